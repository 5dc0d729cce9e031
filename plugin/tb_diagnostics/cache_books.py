"""The cache's per-process books of each store, and when a write is due to rescan it.

:class:`~tb_diagnostics.cache.TraceCache` keeps the store's total size bounded (least
recently used first out), but sizing the store means listing every entry, so it is not
done per write. This module holds the running books that decide when to: one
:class:`Books` per store and process, and :func:`record_write`, which counts a write
and runs the cache's rescan when it is due.

**Bookkeeping is O(1) amortized per write.** Each process keeps running books per
store (module level: the pool's jobs each build a :class:`TraceCache`, but a worker
process lives on): bytes and writes since its last scan. It rescans (sizes, sweeps and
evicts) only when its own writes since then pass ``HEADROOM`` of the bound, or their
count passes the number of files the last scan saw (at least ``MIN_WRITES_PER_SCAN``;
both in :mod:`tb_diagnostics.cache`); each scan evicts down to ``1 - HEADROOM`` of the
bound. Each write makes one file, so a scan of F files comes after at least F writes
while the cache fills and ~F/10 once it is full (the headroom), and P processes writing
at once exceed the bound by at most P headrooms (plus one file each).
A shared on-disk index would be exact across processes, but it needs a lock and is one
more file to corrupt; the directory itself stays the only truth.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Books:
    """One process's view of one store (see the module docstring)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    owned: bool | None = None  # the marker was found or written; None: not looked yet
    off: bool = False  # a full disk: no more writes in this process
    warned: bool = False
    scanning: bool = False
    bytes_since: int = 0
    writes_since: int = 0
    budget: int | None = None  # bytes until the next scan; None: not scanned yet
    files_seen: int = 0


_BOOKS: dict[str, Books] = {}
_BOOKS_LOCK = threading.Lock()


def books_for(store_key: str) -> Books:
    """This process's books of the store at ``store_key`` (its absolute path)."""
    books = _BOOKS.get(store_key)
    if books is not None:
        return books
    with _BOOKS_LOCK:
        return _BOOKS.setdefault(store_key, Books())


def record_write(b: Books, written: int, *, max_bytes: int, headroom: int, min_writes: int,
                 rescan: Callable[[], tuple[int, int]]) -> None:
    """Add one write of ``written`` bytes to the books; when they say a scan is due (and
    no other thread of this process is scanning), run ``rescan`` (it returns the bytes
    and files left) and set the budget until the next one."""
    with b.lock:
        b.bytes_since += written
        b.writes_since += 1
        budget = headroom if b.budget is None else b.budget
        due = (b.bytes_since > budget
               or b.writes_since >= max(min_writes, b.files_seen))
        if not due or b.scanning:
            return
        b.scanning = True
        b.bytes_since = b.writes_since = 0
    try:
        total, n = rescan()
    finally:
        with b.lock:
            b.scanning = False
    with b.lock:
        b.files_seen = n
        b.budget = max(0, min(headroom, max_bytes - total))
