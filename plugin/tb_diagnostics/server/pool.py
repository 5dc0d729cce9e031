"""The loaders' threads: daemon threads on a queue, where a stalled job gives up its slot.

:class:`concurrent.futures.ThreadPoolExecutor` joins its threads when the interpreter
exits, so one load stuck in a read (a FIFO, a stalled NFS or FUSE mount) would keep
TensorBoard alive after SIGTERM: TensorBoard's handler calls ``sys.exit``, and that
waits for the executor's threads. Here every thread is a daemon: an exit never waits
for a load.

A stuck read also holds its thread. So at most ``workers`` jobs run at a time, but a job
that has run for ``stall_s`` no longer counts against that: the next queued job starts
beside it, up to ``workers + max_stalled`` threads in all. A small run queued behind two
stuck files is therefore loaded a few seconds later, not never.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)


class LoadPool:
    """Runs ``fn(*args)`` jobs on daemon threads, at most ``workers`` of them un-stalled."""

    def __init__(self, workers: int, name: str, stall_s: float | None = None,
                 max_stalled: int = 8) -> None:
        self._workers = max(1, workers)
        self._name = name
        self._stall_s = stall_s
        self._max_threads = self._workers + (max_stalled if stall_s is not None else 0)
        self._cond = threading.Condition()
        self._queue: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._running: dict[int, float] = {}  # job number -> when it started (monotonic)
        self._numbers = itertools.count()
        self._watching = False
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self._name}: submit after shutdown")
            self._queue.append((fn, args))
            self._dispatch()

    def shutdown(self) -> None:
        """Drop the queued jobs; running ones finish (or stay stuck) on their daemon threads."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()

    def _active(self, now: float) -> int:
        if self._stall_s is None:
            return len(self._running)
        return sum(now - t < self._stall_s for t in self._running.values())

    def _dispatch(self) -> None:
        """Start queued jobs while a slot is free (called with the lock held)."""
        now = time.monotonic()
        while (self._queue and not self._closed and len(self._running) < self._max_threads
               and self._active(now) < self._workers):
            fn, args = self._queue.popleft()
            number = next(self._numbers)
            self._running[number] = now
            threading.Thread(target=self._run, args=(number, fn, args), daemon=True,
                             name=f"{self._name}-{number}").start()
        if self._queue and self._stall_s is not None and not self._watching:
            # Jobs wait only on running ones: look again when the oldest could stall.
            self._watching = True
            threading.Thread(target=self._watch, daemon=True,
                             name=f"{self._name}-watch").start()

    def _watch(self) -> None:
        assert self._stall_s is not None
        with self._cond:
            while self._queue and not self._closed:
                now = time.monotonic()
                fresh = [t + self._stall_s for t in self._running.values()
                         if now - t < self._stall_s]
                if not fresh:
                    if len(self._running) >= self._max_threads:
                        break  # only a finished job frees a thread: _run dispatches then
                    self._dispatch()
                    continue
                self._cond.wait(min(fresh) - now + 0.01)
                self._dispatch()
            self._watching = False

    def _run(self, number: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            fn(*args)
        except Exception:  # a job reports its own errors; this one must not end the pool
            _log.exception("tb-diagnostics: a load job failed")
        finally:
            with self._cond:
                del self._running[number]
                self._dispatch()
                self._cond.notify_all()
