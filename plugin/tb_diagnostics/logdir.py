"""Log directory → runs → workers → spans, as ``tensorboard_trace_handler`` lays them out.

``LOGDIR/<run>/<worker>.<timestamp>.pt.trace.json[.gz]``: a run is any
directory (at any depth) holding trace files, named by its path relative to
LOGDIR; a worker's files with different timestamps are its spans, one per
profiling cycle. Local paths are listed directly; URLs go through fsspec
(:mod:`tb_diagnostics.storage`), so ``s3://``, ``gs://`` and ``memory://`` log
dirs work where the backend is installed. Nothing here writes.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field, replace

from tb_diagnostics.errors import LogDirError
from tb_diagnostics.storage import ScanError, list_files

#: The profiler writes ``.json`` or ``.json.gz``; a compressed copy (bzip2, xz, zstd) is
#: read too, by its content (the suffix only lists it).
TRACE_FILE = re.compile(
    r"^(?P<worker>.+?)(?:\.(?P<ts>\d+))?\.pt\.trace\.json(?:\.(?:gz|bz2|xz|zst))?$")
ROOT_RUN = "."


@dataclass(frozen=True)
class SpanFile:
    """One trace file: one profiling cycle of one worker of one run."""

    run: str
    worker: str
    span: str
    url: str  # what storage.open_binary opens (file:// or an fsspec URL)
    relpath: str  # relative to the log dir, '/'-separated: what users see
    size: int | None
    mtime: float | None

    @property
    def order_key(self) -> tuple[int, str]:
        numeric = self.span.isascii() and self.span.isdigit()
        return (int(self.span), "") if numeric else (-1, self.span)


@dataclass
class Worker:
    name: str
    spans: list[SpanFile] = field(default_factory=list)


@dataclass
class Run:
    name: str
    workers: list[Worker] = field(default_factory=list)

    @property
    def files(self) -> list[SpanFile]:
        return [s for w in self.workers for s in w.spans]


#: How many skipped links a note names before it only counts the rest.
_NAMED_LINKS = 5


@dataclass
class LogDir:
    logdir: str  # as the user gave it
    runs: list[Run]
    #: Symbolic links the scan did not follow (trace names, or links to directories),
    #: relative to the log dir: said in :attr:`notes`, never silently dropped.
    links: list[str] = field(default_factory=list)

    def run(self, name: str) -> Run | None:
        return next((r for r in self.runs if r.name == name), None)

    @property
    def notes(self) -> list[str]:
        """Log-dir-level notes, one line each (the report and the tab show them)."""
        if not self.links:
            return []
        n = len(self.links)
        named = ", ".join(self.links[:_NAMED_LINKS])
        more = f" and {n - _NAMED_LINKS} more" if n > _NAMED_LINKS else ""
        return [f"{n} symbolic link{'s' if n > 1 else ''} not followed (a log dir is read "
                f"without leaving it): {named}{more}"]

    @property
    def files(self) -> list[SpanFile]:
        return [s for r in self.runs for s in r.files]


def parse_trace_name(filename: str) -> tuple[str, str] | None:
    """``worker0.1623143089861.pt.trace.json.gz`` → ``("worker0", "1623143089861")``.

    Without a timestamp the span is named by the file name. Returns None for
    files that are not profiler traces.
    """
    m = TRACE_FILE.match(filename)
    if not m:
        return None
    return m.group("worker"), m.group("ts") or filename


def scan_logdir(logdir: str) -> LogDir:
    """List every trace file below ``logdir``, grouped into runs, workers and spans.

    Raises :class:`LogDirError` when ``logdir`` does not exist or is not a directory.
    """
    try:
        # Only names like traces are stat'ed: other files beside them cost nothing.
        found = list_files(logdir, wanted=lambda name: TRACE_FILE.match(name) is not None)
    except ScanError as exc:
        raise LogDirError(f"{logdir}: {exc}") from None

    runs: dict[str, dict[str, list[SpanFile]]] = {}
    for f in found.files:
        parsed = parse_trace_name(posixpath.basename(f.relpath))
        if parsed is None:
            continue
        worker, span = parsed
        run = posixpath.dirname(f.relpath) or ROOT_RUN
        runs.setdefault(run, {}).setdefault(worker, []).append(SpanFile(
            run=run, worker=worker, span=span, url=f.url, relpath=f.relpath,
            size=f.size, mtime=f.mtime))

    out = []
    for run_name in sorted(runs):
        workers = [Worker(name=w, spans=_distinct(sorted(spans, key=lambda s: s.order_key)))
                   for w, spans in sorted(runs[run_name].items())]
        out.append(Run(name=run_name, workers=workers))
    return LogDir(logdir=logdir, runs=out, links=found.links)


def _distinct(spans: list[SpanFile]) -> list[SpanFile]:
    """Spans of one worker with distinct names: a second file with the same timestamp
    (``w.1.pt.trace.json`` beside ``w.1.pt.trace.json.gz``) is named by its file name, so
    both can be opened."""
    seen: set[str] = set()
    out = []
    for s in sorted(spans, key=lambda s: (s.order_key, s.relpath)):
        if s.span in seen:
            s = replace(s, span=posixpath.basename(s.relpath))
        seen.add(s.span)
        out.append(s)
    return out
