"""An upgrade's old cache store goes, and nothing else does (cache_retire)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tb_diagnostics.cache import TraceCache
from tb_diagnostics.cache_retire import IDLE_BEFORE_RETIRE_S, retire_old_stores
from tb_diagnostics.cache_store import MARKER_NAME, MARKER_TEXT

KEY = "0123456789abcdef0123456789abcdef"
OTHER_KEY = "fedcba9876543210fedcba9876543210"


def old_store(root: Path, version: int = 3, marked: bool = True) -> Path:
    store = root / f"tb-diagnostics-cache-v{version}"
    store.mkdir(parents=True)
    if marked:
        (store / MARKER_NAME).write_bytes(MARKER_TEXT)
    return store


def v3_entry(store: Path, key: str, age_s: float, extra: str | None = None) -> Path:
    d = store / key
    d.mkdir()
    (d / "model.bin").write_bytes(b"m" * 1000)
    (d / "results-default.json").write_bytes(b"r" * 100)
    if extra:
        (d / extra).write_bytes(b"x")
    when = time.time() - age_s
    for p in d.iterdir():
        os.utime(p, (when, when))
    return d


def test_an_idle_old_store_goes_whole(tmp_path):
    store = old_store(tmp_path)
    v3_entry(store, KEY, age_s=2 * IDLE_BEFORE_RETIRE_S)
    v3_entry(store, OTHER_KEY, age_s=2 * IDLE_BEFORE_RETIRE_S)
    assert retire_old_stores(tmp_path) == 2 * 1100
    assert not store.exists()


def test_an_entry_in_use_keeps_itself_and_the_store(tmp_path):
    store = old_store(tmp_path)
    v3_entry(store, KEY, age_s=2 * IDLE_BEFORE_RETIRE_S)
    recent = v3_entry(store, OTHER_KEY, age_s=10)
    assert retire_old_stores(tmp_path) == 1100
    assert sorted(os.listdir(store)) == sorted([MARKER_NAME, OTHER_KEY])
    assert (recent / "model.bin").exists()


def test_names_the_old_layout_did_not_make_are_never_deleted(tmp_path):
    store = old_store(tmp_path)
    strange = v3_entry(store, KEY, age_s=2 * IDLE_BEFORE_RETIRE_S, extra="notes.txt")
    (store / "my-data.csv").write_bytes(b"a,b\n")
    assert retire_old_stores(tmp_path) == 0
    assert sorted(p.name for p in strange.iterdir()) == [
        "model.bin", "notes.txt", "results-default.json"]
    assert (store / "my-data.csv").exists() and (store / MARKER_NAME).exists()


def test_an_unmarked_directory_of_that_name_is_someone_elses(tmp_path):
    store = old_store(tmp_path, marked=False)
    d = v3_entry(store, KEY, age_s=2 * IDLE_BEFORE_RETIRE_S)
    assert retire_old_stores(tmp_path) == 0
    assert (d / "model.bin").exists()


def test_the_current_and_later_formats_are_not_old(tmp_path):
    for version in (4, 5):
        store = old_store(tmp_path, version=version)
        v3_entry(store, KEY, age_s=2 * IDLE_BEFORE_RETIRE_S)
    assert retire_old_stores(tmp_path) == 0
    assert (tmp_path / "tb-diagnostics-cache-v4" / KEY / "model.bin").exists()
    assert (tmp_path / "tb-diagnostics-cache-v5" / KEY / "model.bin").exists()


def test_other_files_in_the_root_are_not_looked_at(tmp_path):
    (tmp_path / KEY).mkdir()  # format 2's unmarked entries, straight in the root
    (tmp_path / KEY / "model.npz").write_bytes(b"z")
    (tmp_path / "tb-diagnostics-cache-v3.txt").write_bytes(b"t")
    assert retire_old_stores(tmp_path) == 0
    assert (tmp_path / KEY / "model.npz").exists()
    assert (tmp_path / "tb-diagnostics-cache-v3.txt").exists()


def test_the_cache_rescan_retires_the_old_store(tmp_path):
    store = old_store(tmp_path)
    v3_entry(store, KEY, age_s=2 * IDLE_BEFORE_RETIRE_S)
    cache = TraceCache(tmp_path)
    cache.store.mkdir()
    (cache.store / MARKER_NAME).write_bytes(MARKER_TEXT)
    cache.rescan()
    assert not store.exists()
    assert cache.store.exists()
