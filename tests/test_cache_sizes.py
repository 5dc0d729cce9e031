"""What a cold cache write costs and keeps (issue 22, case 7): a model too small to be worth
a file is not written (its results are), a larger one is, and every entry is plain files
side by side, each written by one temporary and one rename."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_cache import write_run

from conftest import TraceBuilder
from tb_diagnostics import cache_store, engine, opening
from tb_diagnostics.cache import MIN_MODEL_ROWS, TraceCache
from tb_diagnostics.logdir import scan_logdir


def write_big_run(root: Path, launches: int) -> list:
    """One step of ``launches`` ops, each launching a kernel: about 3 rows per launch."""
    t = TraceBuilder(device_properties=[{"id": 0, "name": "GPU"}])
    t.step(1, 0, 10 * launches + 10)
    for k in range(launches):
        t.op("aten::mm", 10 * k + 1, 8)
        t.launch(10 * k + 2, 2, "gemm", 10 * k + 5, 4)
    t.write(root / "big" / "worker0.1.pt.trace.json")
    return scan_logdir(str(root)).files


class Parses:
    """Counts the parses that opening a model does (a cache hit does none)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = opening.load_trace

        def counted(*a, **k):
            self.n += 1
            return real(*a, **k)

        monkeypatch.setattr(opening, "load_trace", counted)


def store_files(cache: TraceCache) -> list[str]:
    return sorted(p.name for p in cache.store.iterdir() if p.name != "CACHEDIR.TAG")


def test_a_small_trace_keeps_its_results_but_not_its_model(tmp_path, monkeypatch):
    (f,) = write_run(tmp_path / "logs").files
    cache = TraceCache(tmp_path / "cache")
    assert len(engine.open_model(f)) < MIN_MODEL_ROWS
    parses = Parses(monkeypatch)
    doc = engine.span_summary(f, cache=cache)
    assert parses.n == 1
    key, variant = cache.key(f), engine.thresholds_variant(None)
    assert store_files(cache) == [f"{key}.{variant}.results"]  # one file, no model
    assert cache.get_model(f) is None
    assert engine.span_summary(f, cache=cache) == doc and parses.n == 1  # results: no parse
    engine.open_model(f, cache)
    assert parses.n == 2  # its model is parsed again, as cheap as reading it would be


def test_a_trace_of_enough_rows_keeps_its_model(tmp_path, monkeypatch):
    (f,) = write_big_run(tmp_path / "logs", launches=MIN_MODEL_ROWS // 3 + 50)
    model = engine.open_model(f)
    assert len(model) >= MIN_MODEL_ROWS, "the trace is too small: the test proves nothing"
    cache = TraceCache(tmp_path / "cache")
    parses = Parses(monkeypatch)
    engine.span_summary(f, cache=cache)
    key, variant = cache.key(f), engine.thresholds_variant(None)
    assert store_files(cache) == sorted([f"{key}.model", f"{key}.{variant}.results"])
    assert all((cache.store / n).is_file() and not (cache.store / n).is_symlink()
               for n in store_files(cache))
    warm = engine.open_model(f, cache)
    assert parses.n == 1 and len(warm) == len(model)  # read back, not parsed


@pytest.mark.parametrize("above", [0, 1])
def test_the_threshold_is_in_rows_of_the_model(tmp_path, above):
    (f,) = write_run(tmp_path / "logs").files
    model = engine.open_model(f)
    cache = TraceCache(tmp_path / "cache", min_model_rows=len(model) + above)
    cache.put_model(f, model)
    assert (cache.get_model(f) is None) == bool(above)


def test_each_file_of_an_entry_costs_one_temporary_and_one_rename(tmp_path, monkeypatch):
    (f,) = write_big_run(tmp_path / "logs", launches=MIN_MODEL_ROWS // 3 + 50)
    cache = TraceCache(tmp_path / "cache")
    made: list[str] = []
    real_mkstemp, real_mkdir, real_replace = (cache_store.tempfile.mkstemp, os.mkdir,
                                              os.replace)

    def mkstemp(*a, **k):
        fd, name = real_mkstemp(*a, **k)
        made.append("temporary")
        return fd, name

    def mkdir(path, *a, **k):
        if Path(os.fspath(path)).is_relative_to(cache.store):
            made.append("directory")
        return real_mkdir(path, *a, **k)

    def replace(src, dst):
        made.append("rename")
        return real_replace(src, dst)

    cache._writable()  # the store and its marker: once per cache, not per entry
    monkeypatch.setattr(cache_store.tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "replace", replace)
    engine.span_summary(f, cache=cache)
    assert made == ["temporary", "rename"] * 2  # the model, then the results
    assert not [n for n in os.listdir(cache.store) if n.startswith(cache_store.TMP_PREFIX)]


def test_eviction_takes_all_files_of_an_entry(tmp_path):
    ld = write_run(tmp_path / "logs", n_files=4)
    sizer = TraceCache(tmp_path / "sizer", min_model_rows=0)
    engine.span_summary(ld.files[0], cache=sizer)
    (one,) = sizer.entries()
    assert len(one.files) == 2  # a model and its results, one entry
    cache = TraceCache(tmp_path / "cache", max_bytes=int(one.size * 2.5), min_model_rows=0)
    for f in ld.files:
        engine.span_summary(f, cache=cache)
        cache.rescan()
    kept = cache.entries()
    assert 1 <= len(kept) < 4
    assert all(len(e.files) == 2 for e in kept)  # no entry left with half its files
    gone = [f for f in ld.files if cache.key(f) not in {e.key for e in kept}]
    assert gone and all(cache.entry_files(f) == [] for f in gone)


def test_the_pools_workers_keep_the_callers_cache_settings(tmp_path):
    # A pool worker opens the cache again in its own process: it must get the bound and
    # the model threshold the caller chose, not the defaults (two files: a real pool).
    files = write_run(tmp_path / "logs", n_files=2).files
    cache = TraceCache(tmp_path / "cache", min_model_rows=0)
    engine.summarise_files(files, cache=cache, workers=2)
    models = [n for n in store_files(cache) if n.endswith(".model")]
    assert sorted(models) == sorted(f"{cache.key(f)}.model" for f in files)


def test_a_cache_spec_round_trips():
    cache = TraceCache("/nonexistent/root", max_bytes=123, min_model_rows=7)
    again = TraceCache.from_spec(cache.spec())
    assert (str(again.root), again.max_bytes, again.min_model_rows) == (
        "/nonexistent/root", 123, 7)
