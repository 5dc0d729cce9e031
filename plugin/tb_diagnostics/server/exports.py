"""The decoded JSON of the span last exported to Perfetto (``/chrome_trace``), kept so the
next step of it is cut without reading and decoding the file again.

A user who opens one step in Perfetto opens the next one of the same span: each request
used to decode the whole file (a 200 MB trace: seconds) to cut a few hundred events. The
decoded file (:class:`~tb_diagnostics.trace.chrome_export.ParsedTrace`) lives in the
loaded span's own cache (``Loaded.details``), so it goes when the loader evicts the
span's analysis or a new version of the file replaces it; and only one span holds one
at a time, since it is the file's text plus a view of each event (about the file's size
again), which the loader's byte bound does not count.
"""

from __future__ import annotations

import threading

from tb_diagnostics.server.loader import Loaded
from tb_diagnostics.trace import chrome_export
from tb_diagnostics.trace.chrome_export import ParsedTrace

#: The key of the decoded file in ``Loaded.details`` (step payloads are keyed by tuples).
PARSED_KEY = "chrome-trace"


class LastExported:
    """The decoded file of the one span exported last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: Loaded | None = None

    def parsed(self, got: Loaded) -> ParsedTrace:
        """``got``'s file decoded: kept from an earlier export of it, or read now (and kept,
        dropping the one another span held)."""
        with self._lock:
            kept = got.details.get(PARSED_KEY)
        if isinstance(kept, ParsedTrace):
            return kept
        f = got.file
        # Read outside the lock: a second span's export must not wait on this one's read.
        parsed = chrome_export.read_trace(f.url, f.relpath)
        with self._lock:
            if self._holder is not None and self._holder is not got:
                self._holder.details.pop(PARSED_KEY, None)
            got.details[PARSED_KEY] = parsed
            self._holder = got
        return parsed
