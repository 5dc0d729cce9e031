"""Each listed trace file's device, read from its header once per version of the file.

The compare picker orders baselines by device before any run is analysed, so /runs says
every span's device: the analysis' where the span's summary is loaded, else what the
file's first bytes say (:mod:`tb_diagnostics.trace.header`). Header reads are kept here
by (url, size, mtime), so a scan every second re-reads only files that changed; nothing
is ever written to the log dir. A remote log dir's files are read a few at a time, each
read being a round trip.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.storage import is_local
from tb_diagnostics.trace.header import HeaderDevice, read_header_device

#: Remote files read at once (each read is a request to the store).
REMOTE_READERS = 4

Version = tuple[int | None, float | None]


class DeviceBook:
    """The header device of every file of the last scan, by url."""

    def __init__(self, read: Callable[[str, str], HeaderDevice] | None = None) -> None:
        self._read = read or (lambda url, shown: read_header_device(url, shown))
        self._lock = threading.Lock()
        self._pass = threading.Lock()  # one reading pass at a time
        self._book: dict[str, tuple[Version, HeaderDevice]] = {}

    def get(self, f: SpanFile) -> HeaderDevice | None:
        """The header device of ``f`` as it was listed; None where not read yet."""
        with self._lock:
            entry = self._book.get(f.url)
        return entry[1] if entry is not None and entry[0] == (f.size, f.mtime) else None

    def read_missing(self, files: Iterable[SpanFile]) -> bool:
        """Read the files not read at their listed version; forget files no longer listed.

        Returns False where a pass already running elsewhere is left to do it (one pass at
        a time: the next scan's pass reads what this one missed)."""
        files = list(files)
        if not self._pass.acquire(blocking=False):
            return False
        try:
            with self._lock:
                listed = {f.url for f in files}
                for url in [u for u in self._book if u not in listed]:
                    del self._book[url]
                todo = [f for f in files if self._book.get(f.url, (None,))[0]
                        != (f.size, f.mtime)]
            for f in todo:
                if is_local(f.url):
                    self._one(f)
            remote = [f for f in todo if not is_local(f.url)]
            if remote:
                with ThreadPoolExecutor(max_workers=REMOTE_READERS,
                                        thread_name_prefix="tb-diagnostics-header") as pool:
                    list(pool.map(self._one, remote))
            return True
        finally:
            self._pass.release()

    def _one(self, f: SpanFile) -> None:
        device = self._read(f.url, f.relpath)
        with self._lock:
            self._book[f.url] = ((f.size, f.mtime), device)


def span_device(analysed: dict[str, Any] | None,
                header: HeaderDevice | None) -> tuple[dict[str, Any] | None, str | None]:
    """What /runs says of a span's device: (device, note). The analysis' device where its
    summary is loaded (it saw the run's activity), else the header's; the note says why
    there is none."""
    if analysed:
        return {**analysed, "from": "analysis"}, None
    if header is None:
        return None, "not read yet"
    return header.as_json(), None if header.kind else header.why
