"""The log dir scan, cached and refreshed in the background.

TensorBoard calls ``is_active()`` on every page load, reload click and
auto-reload tick, and logs how long it took; a remote log dir can take
seconds to list. So only the very first look scans in the caller's thread
(briefly, bounded by ``first_wait_s``); after that callers get the last scan
at once and, when it is older than ``max_age_s``, one background refresh is
started. The profiler keeps writing while TensorBoard runs, so the tab's own
``/runs`` request asks for a scan no older than a second, which makes the
reload button pick up new files.

A request for one file does not trust a scan that may be seconds old: :func:`file_now`
stats that file (without following a link) so that a file the profiler finished writing
a moment ago loads as it is now, and one swapped for a link or a FIFO is refused.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from tb_diagnostics.errors import LogDirError
from tb_diagnostics.logdir import LogDir, SpanFile, scan_logdir
from tb_diagnostics.server.devices import DeviceBook
from tb_diagnostics.storage import is_local, local_path
from tb_diagnostics.trace.source import describe_mode

#: Seconds a scan waits for the file headers it read before it is given out.
HEADER_WAIT_S = 0.5


@dataclass(frozen=True)
class ScanResult:
    """One scan: the tree, or the reason there is none."""

    logdir: LogDir | None
    error: str | None
    finished_at: float  # time.monotonic()
    took_s: float

    @property
    def has_traces(self) -> bool:
        return bool(self.logdir and self.logdir.runs)


class ScanCache:
    """The latest scan of one log dir, with at most one scan running at a time."""

    def __init__(self, logdir: str, max_age_s: float = 5.0, first_wait_s: float = 2.0,
                 scan: Callable[[str], LogDir] = scan_logdir) -> None:
        self._logdir = logdir
        self._max_age_s = max_age_s
        self._first_wait_s = first_wait_s
        self._scan = scan
        self._lock = threading.Lock()
        self._result: ScanResult | None = None
        self._running: threading.Event | None = None
        #: Each listed file's device from its header (the compare picker's order).
        self.devices = DeviceBook()
        self.header_wait_s = HEADER_WAIT_S

    @property
    def logdir(self) -> str:
        return self._logdir

    def peek(self) -> ScanResult | None:
        """The last scan without waiting; starts a background refresh when it is stale.

        Only the very first call waits, and at most ``first_wait_s``: None
        means the first scan is still running.
        """
        with self._lock:
            result = self._result
        if result is None:
            done = self._start()
            done.wait(self._first_wait_s)
            with self._lock:
                return self._result
        if time.monotonic() - result.finished_at > self._max_age_s:
            self._start()
        return result

    def get(self, max_age_s: float = 1.0, timeout_s: float = 30.0) -> ScanResult | None:
        """A scan no older than ``max_age_s``, waiting (up to ``timeout_s``) for one."""
        with self._lock:
            result = self._result
        if result is not None and time.monotonic() - result.finished_at <= max_age_s:
            return result
        self._start().wait(timeout_s)
        with self._lock:
            return self._result

    def _start(self) -> threading.Event:
        """Start a scan unless one is running; returns the event set when it finishes."""
        with self._lock:
            if self._running is not None:
                return self._running
            done = self._running = threading.Event()
        threading.Thread(target=self._run, args=(done,), name="tb-diagnostics-scan",
                         daemon=True).start()
        return done

    def _run(self, done: threading.Event) -> None:
        t0 = time.monotonic()
        try:
            tree, error = self._scan(self._logdir), None
        except LogDirError as exc:
            tree, error = None, str(exc)
        except Exception as exc:  # a broken filesystem backend must not kill the tab
            tree, error = None, f"{self._logdir}: cannot list ({type(exc).__name__}: {exc})"
        if tree is not None:
            # File headers are read beside the scan, which waits for them a moment: a local
            # log dir's take a few ms a file, so the first /runs already has the devices; a
            # slow store's (or one stalled file's) never hold the listing back for long.
            reader = threading.Thread(target=self.devices.read_missing, args=(tree.files,),
                                      name="tb-diagnostics-headers", daemon=True)
            reader.start()
            reader.join(self.header_wait_s)
        t1 = time.monotonic()
        with self._lock:
            self._result = ScanResult(logdir=tree, error=error, finished_at=t1, took_s=t1 - t0)
            self._running = None
        done.set()


@dataclass(frozen=True)
class FileNow:
    """A listed file as it is at the moment of a request."""

    file: SpanFile  # with its current size and mtime (local files; a URL keeps the scan's)
    exists: bool
    problem: str | None = None  # why it cannot be read, in one line naming the file


def file_now(f: SpanFile) -> FileNow:
    """Stat ``f`` again, without following a symbolic link.

    A URL (``s3://``…) keeps the scan's size and mtime: asking the store on every
    request would cost a round trip each time.
    """
    if not is_local(f.url):
        return FileNow(f, exists=True)
    try:
        st = os.lstat(local_path(f.url))
    except FileNotFoundError:
        return FileNow(f, exists=False)
    except OSError as exc:
        return FileNow(f, exists=True, problem=f"{f.relpath}: cannot stat ({exc.strerror})")
    now = replace(f, size=st.st_size, mtime=st.st_mtime)
    what = describe_mode(st.st_mode)
    if what is None:
        return FileNow(now, exists=True)
    # Worded as the loader's open refuses it (the scan lists FIFOs; a link may be swapped
    # in after the scan), so the file has one message whichever looks first.
    why = what if stat.S_ISLNK(st.st_mode) else f"{what}, not a regular file"
    return FileNow(now, exists=True, problem=f"{f.relpath}: is {why}")
