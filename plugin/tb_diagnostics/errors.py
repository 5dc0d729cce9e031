"""The errors the engine raises on purpose.

Anything a user can cause with bad input surfaces as one of these, with the
file named, so the CLI and the tab can show one readable line per problem.
"""

from __future__ import annotations


class DiagnosticsError(Exception):
    """Base class of every error the engine raises deliberately."""


class LogDirError(DiagnosticsError):
    """The log directory itself cannot be read (missing, not a directory, no access)."""


class TraceLoadError(DiagnosticsError):
    """One trace file cannot be turned into a model.

    ``path`` is the file as the user knows it (relative to the log dir where
    possible) and ``problem`` a short human sentence, e.g. "truncated JSON
    (the profiler may still be writing it)".
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
