"""The cache's stale-temporary sweep runs at rescans only, never per write (issue 29 item
11). Format 4 already does this: ``TraceCache.rescan`` (cache.py) is the only caller of
``scan_store`` with ``sweep_before``, and ``cache_books.record_write`` runs it only when a
process's writes since its last scan pass the headroom or ``MIN_WRITES_PER_SCAN``; a write
itself is one temporary and one rename (``cache_store.write_file``)."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from test_cache import write_run

from tb_diagnostics import cache as cache_module
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.cache_store import STALE_TMP_S, TMP_PREFIX


def test_a_write_does_not_list_the_store_and_the_rescan_sweeps(tmp_path, monkeypatch):
    cache = TraceCache(tmp_path / "cache")
    (f,) = write_run(tmp_path / "logs").files
    assert cache._writable()  # the store and its marker exist: what every later write sees
    stale = cache.store / f"{TMP_PREFIX}killed.tmp"  # a killed writer's, an hour old
    stale.write_bytes(b"half a model")
    old = time.time() - STALE_TMP_S - 10
    os.utime(stale, (old, old))
    listings: list[str] = []
    watched = {cache.root.resolve(), cache.store.resolve()}

    def counted(real):
        def listing(path="."):
            if Path(os.fspath(path)).resolve() in watched:
                listings.append(os.fspath(path))
            return real(path)
        return listing

    monkeypatch.setattr(os, "scandir", counted(os.scandir))
    monkeypatch.setattr(os, "listdir", counted(os.listdir))
    writes = 8
    monkeypatch.setattr(cache_module, "MIN_WRITES_PER_SCAN", writes)
    for i in range(writes - 1):  # distinct keys: a new entry per write
        cache.put_results(replace(f, mtime=float(i)), "v", {"steps": [i]})
    assert listings == []  # no write listed the store...
    assert stale.exists()  # ...so none swept it
    cache.put_results(replace(f, mtime=float(writes)), "v", {"steps": []})  # due: rescan
    assert listings, "the due write rescans the store"
    assert not stale.exists()  # the rescan swept it
    assert len(cache.entries()) == writes
