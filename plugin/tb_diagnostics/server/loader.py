"""Lazy, shared, bounded loading of spans.

A span is loaded the first time the tab asks for it, on a few daemon threads
(:mod:`~tb_diagnostics.server.pool`: a load stuck in a read holds neither TensorBoard's
exit nor, past ``STALLED_SMALL_LOAD_S``, the next load), so TensorBoard's request threads
never parse a 100 MB trace; the tab shows the progress meanwhile. Concurrent requests
for one file share one load (one future per key). Loaded analyses live in an LRU bounded
by count and by an estimate of their memory; a span's summary is small and outlives its
analysis, so the step table stays instant after an eviction and only the per-step detail
reloads. Summaries are bounded by count, a bound the provider grows with the log dir's
listed files (:meth:`SpanLoader.hold_summaries`).

Files of ``BIG_FILE_BYTES`` or more load on a pool of their own, one at a time, so
that two huge (or hostile) files requested first never hold the loaders that small runs
need. A small file that inflates past ``SMALL_LOAD_INFLATE_BYTES`` (a gzip bomb, or a
trace that compresses 20×) is moved to that pool as soon as it does. After a load that
failed, or one of a big file, the memory its parse freed is handed back to the system.

Entries are keyed by ``(url, size, mtime)``: a file the profiler rewrites,
or one that was truncated on the first look, gets a fresh load.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.errors import DiagnosticsError
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.server.pool import LoadPool
from tb_diagnostics.trace.model import TraceModel
from tb_diagnostics.trace.stream import OverBudget, inflate_budget
from tb_diagnostics.trace.string_table import strings_nbytes

_log = logging.getLogger(__name__)

Key = tuple[str, int | None, float | None]

#: Files this large on disk load on the big-file pool (one at a time).
BIG_FILE_BYTES = 64 << 20
#: A load on the small pool that inflates more JSON than this moves to the big-file pool
#: (a 256 MiB trace takes a few seconds: longer would hold a loader small runs need).
SMALL_LOAD_INFLATE_BYTES = 256 << 20
#: A small load running this long has stalled (a FIFO, a hung network mount: a small load
#: takes a few seconds): the next queued one starts beside it.
STALLED_SMALL_LOAD_S = 15.0
#: A big file's load may take minutes before the next big one starts beside it.
BIG_STALL_FACTOR = 20
#: ``work(file, progress) -> (analysis, summary)``; raises DiagnosticsError for a bad file.
Work = Callable[[SpanFile, "Progress"], tuple[SpanAnalysis, dict[str, Any]]]


def key_of(f: SpanFile) -> Key:
    return (f.url, f.size, f.mtime)


@dataclass
class Progress:
    """Where one load stands; ``fraction`` is a rough 0..1 for a progress bar."""

    file: SpanFile
    stage: str = "queued"  # queued, reading (and parsing), analysing, ready, error
    fraction: float = 0.0
    started: float = field(default_factory=time.time)

    def set(self, stage: str, fraction: float) -> None:
        self.stage, self.fraction = stage, max(self.fraction, min(fraction, 1.0))

    def to_dict(self) -> dict[str, Any]:
        f = self.file
        return {"run": f.run, "worker": f.worker, "span": f.span, "file": f.relpath,
                "stage": self.stage, "fraction": round(self.fraction, 3), "size": f.size,
                "elapsed_s": round(time.time() - self.started, 2)}


@dataclass
class Loaded:
    """A loaded span: its summary (or error) and, while resident, its analysis."""

    file: SpanFile
    summary: dict[str, Any] | None
    error: str | None
    analysis: SpanAnalysis | None = None
    nbytes: int = 0
    details: dict[Any, Any] = field(default_factory=dict)  # per-step payload cache

    @functools.cached_property
    def tab_summary(self) -> dict[str, Any] | None:
        """The summary as the tab gets it: at most ``MAX_TAB_STEPS`` step rows (made once;
        it outlives the analysis, like the summary)."""
        from tb_diagnostics.server.bounded import bound_steps

        return None if self.summary is None else bound_steps(self.summary)


def _resident(v: object) -> int:
    """Bytes an array holds (a constant column is one value viewed n times)."""
    if not isinstance(v, np.ndarray):
        return 0
    return v.itemsize if v.ndim == 1 and v.strides == (0,) else v.nbytes


def release_memory() -> None:
    """Hand the memory a finished parse freed back to the system.

    A parse allocates millions of small objects; once freed, glibc keeps their arenas
    mapped, so the process would stay gigabytes large after one failed bomb.
    """
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def model_nbytes(model: TraceModel) -> int:
    """An estimate of a model's memory: its columns, its strings, and as much again
    for the analysis' derived views (intervals, indexes, call trees)."""
    arrays = sum(_resident(v) for v in vars(model).values())
    arrays += sum(_resident(v) for v in vars(model.memory).values())
    strings = strings_nbytes(model.strings)
    return 2 * (arrays + strings)


class SpanLoader:
    """Loads spans on a pool, one load per key, and keeps a bounded cache."""

    def __init__(self, work: Work, workers: int = 2, max_models: int = 8,
                 max_bytes: int = 2 << 30, max_summaries: int = 512,
                 stall_s: float = STALLED_SMALL_LOAD_S) -> None:
        self._work = work
        # Daemon threads: a load stuck in a read never holds TensorBoard's exit.
        self._pool = LoadPool(workers, "tb-diagnostics-load", stall_s=stall_s)
        self._big_pool = LoadPool(1, "tb-diagnostics-load-big",
                                  stall_s=stall_s * BIG_STALL_FACTOR)
        self._max_models = max_models
        self._max_bytes = max_bytes
        self._max_summaries = self._least_summaries = max_summaries
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, Loaded] = OrderedDict()
        self._resident: OrderedDict[Key, int] = OrderedDict()  # key → nbytes, LRU order
        self._loads: dict[Key, tuple[Future, Progress]] = {}

    def get(self, f: SpanFile, need_analysis: bool = False) -> Loaded | Progress:
        """The loaded span, or the progress of its load (started here if needed)."""
        key = key_of(f)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (entry.error or not need_analysis
                                      or entry.analysis is not None):
                self._entries.move_to_end(key)
                if key in self._resident:
                    self._resident.move_to_end(key)
                return entry
            running = self._loads.get(key)
            if running is not None:
                return running[1]
            progress = Progress(file=f)
            # The load's own future: a load moved to the big pool keeps it.
            done: Future = Future()
            if (f.size or 0) >= BIG_FILE_BYTES:
                self._big_pool.submit(self._load, key, f, progress, done, None)
            else:
                self._pool.submit(self._load, key, f, progress, done,
                                  SMALL_LOAD_INFLATE_BYTES)
            self._loads[key] = (done, progress)
            return progress

    def wait(self, f: SpanFile, timeout: float | None = None) -> Loaded:
        """Load ``f`` (if needed) and block until it is loaded: for tests and the CLI."""
        got = self.get(f, need_analysis=True)
        if isinstance(got, Loaded):
            return got
        with self._lock:
            running = self._loads.get(key_of(f))
        if running is not None:
            return running[0].result(timeout)
        return self.wait(f, timeout)  # finished between the two looks

    def progress(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p.to_dict() for _, p in self._loads.values()]

    def peek(self, f: SpanFile) -> str:
        """``ready``, ``error``, ``loading`` or ``unloaded``, without starting anything."""
        key = key_of(f)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                return "error" if entry.error else "ready"
            return "loading" if key in self._loads else "unloaded"

    def device_of(self, f: SpanFile) -> dict[str, Any] | None:
        """The device of ``f`` (``kind`` and ``name``) if its summary is here, else None:
        read without starting a load (the compare picker puts same-device runs first)."""
        with self._lock:
            entry = self._entries.get(key_of(f))
        d = entry.summary.get("device") if entry is not None and entry.summary else None
        return {"kind": d.get("kind"), "name": d.get("name")} if d else None

    def errors(self) -> list[Loaded]:
        with self._lock:
            return [e for e in self._entries.values() if e.error]

    def refuse(self, f: SpanFile, error: str) -> Loaded:
        """Record ``error`` as the load of ``f`` without reading it (a FIFO, a link): it
        shows as that file's error, in ``/runs`` too, as a bad file's would."""
        key = key_of(f)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.error != error:
                entry = self._entries[key] = Loaded(file=f, summary=None, error=error)
            self._entries.move_to_end(key)
            self._evict()
            return entry

    def hold_summaries(self, files: int) -> None:
        """Keep at least ``files`` summaries (the log dir's listed files) and as many
        again for old versions and other looks; never fewer than the constructor's bound.
        A summary is small beside an analysis, and a run whose spans evicted each other's
        summaries would reload them for ever and never be ready."""
        with self._lock:
            self._max_summaries = max(self._least_summaries, 2 * files)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"summaries": len(self._entries), "resident": len(self._resident),
                    "resident_bytes": sum(self._resident.values()), "loading": len(self._loads)}

    def shutdown(self) -> None:
        self._pool.shutdown()
        self._big_pool.shutdown()

    # ---- the pool side ------------------------------------------------------
    def _load(self, key: Key, f: SpanFile, progress: Progress, done: Future,
              budget: int | None) -> None:
        try:
            with inflate_budget(budget):
                analysis, summary = self._work(f, progress)
            entry = Loaded(file=f, summary=summary, error=None, analysis=analysis,
                           nbytes=model_nbytes(analysis.model))
            progress.set("ready", 1.0)
        except OverBudget:
            # Larger inside than on disk: start again among the big files, and free this
            # loader for the small runs now.
            progress.stage, progress.fraction = "queued", 0.0
            release_memory()
            self._big_pool.submit(self._load, key, f, progress, done, None)
            return
        except DiagnosticsError as exc:
            entry = Loaded(file=f, summary=None, error=str(exc))
            progress.set("error", 1.0)
        except Exception as exc:  # a bug must not leave the tab spinning forever
            # One line in TensorBoard's log; the traceback only at DEBUG.
            _log.warning("tb-diagnostics: loading %s failed: %s: %s", f.relpath,
                         type(exc).__name__, exc)
            _log.debug("tb-diagnostics: loading %s failed", f.relpath, exc_info=True)
            entry = Loaded(file=f, summary=None,
                           error=f"{f.relpath}: internal error ({type(exc).__name__}: {exc})")
            progress.set("error", 1.0)
        with self._lock:
            # Older versions of the file (it was still being written) are superseded: their
            # errors ("truncated") must not linger in /runs once it has loaded.
            for old in [k for k in self._entries if k[0] == key[0] and k != key]:
                del self._entries[old]
                self._resident.pop(old, None)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            if entry.analysis is not None:
                self._resident[key] = entry.nbytes
            self._evict()
            self._loads.pop(key, None)
        if entry.error or budget is None:
            release_memory()
        done.set_result(entry)

    def _evict(self) -> None:
        """Drop analyses (LRU) over the count or byte bound; then old summaries."""
        while self._resident and (len(self._resident) > self._max_models
                                  or sum(self._resident.values()) > self._max_bytes):
            if len(self._resident) == 1:
                break  # keep the one just loaded, however big: it is being asked for
            old, _ = self._resident.popitem(last=False)
            entry = self._entries.get(old)
            if entry is not None:
                entry.analysis = None
                entry.details.clear()
        while len(self._entries) > self._max_summaries:
            old, _ = self._entries.popitem(last=False)
            self._resident.pop(old, None)
