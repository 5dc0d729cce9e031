"""The persistent cache: used, invalidated, bounded, shared safely, never inside the log dir."""

from __future__ import annotations

import os
import threading
from dataclasses import fields

import numpy as np
import pytest

from conftest import TraceBuilder, tree_digest
from tb_diagnostics import engine, opening
from tb_diagnostics.cache import TMP_PREFIX, TraceCache
from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.trace.model import MemoryEvents, TraceModel


def write_run(root, n_files: int = 1, busy: float = 60):
    for i in range(n_files):
        t = TraceBuilder(device_properties=[{"id": 0, "name": "GPU"}])
        t.step(1, 0, 100)
        t.op("aten::mm", 5, 30)
        t.launch(10, 5, "gemm", 20, busy)
        t.write(root / "run" / f"worker{i}.{100 + i}.pt.trace.json")
    return scan_logdir(str(root))


@pytest.fixture
def cache(tmp_path):
    # Models of every size are kept: these tests are about the model entries themselves
    # (by default a model as small as write_run's is not written, see test_cache_sizes).
    return TraceCache(tmp_path / "cache", min_model_rows=0)


def test_second_open_comes_from_the_cache(tmp_path, cache, monkeypatch):
    (f,) = write_run(tmp_path / "logs").files
    cold = engine.span_summary(f, cache=cache)
    model_cold = engine.open_model(f)

    def no_parsing(*a, **k):
        raise AssertionError("parsed again despite a current cache entry")

    monkeypatch.setattr(opening, "load_trace", no_parsing)
    assert engine.span_summary(f, cache=cache) == cold
    warm = engine.open_model(f, cache)
    pairs = [(fld.name, getattr(model_cold, fld.name), getattr(warm, fld.name))
             for fld in fields(TraceModel) if fld.name != "memory"]
    pairs += [(f"memory.{fld.name}", getattr(model_cold.memory, fld.name),
               getattr(warm.memory, fld.name)) for fld in fields(MemoryEvents)]
    for name, a, b in pairs:
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
            assert a.dtype == b.dtype, name
        elif name != "path":
            assert a == b, name


def test_a_changed_file_is_analysed_again(tmp_path, cache):
    logs = tmp_path / "logs"
    (f,) = write_run(logs, busy=60).files
    assert engine.span_summary(f, cache=cache)["steps"][0]["device_busy_us"] == 60
    write_run(logs, busy=80)  # same size: only the content and the mtime differ
    path = logs / "run" / "worker0.100.pt.trace.json"
    os.utime(path, ns=(1, 2))  # even an older mtime is a different key
    (f2,) = scan_logdir(str(logs)).files
    assert f2.size == f.size
    assert engine.span_summary(f2, cache=cache)["steps"][0]["device_busy_us"] == 80


def test_thresholds_get_their_own_results(tmp_path, cache):
    from tb_diagnostics.analysis import Thresholds

    (f,) = write_run(tmp_path / "logs", busy=60).files
    assert engine.span_summary(f, cache=cache)["steps"][0]["verdict"] == "mixed"
    strict = Thresholds(compute_bound=0.5, low_busy=0.4)
    assert engine.span_summary(f, strict, cache=cache)["steps"][0]["verdict"] == "compute-bound"


def test_cache_never_writes_inside_the_logdir(tmp_path, cache):
    logs = tmp_path / "logs"
    ld = write_run(logs, n_files=3)
    before = tree_digest(logs)
    build_document(ld, cache=cache, workers=1)
    build_document(ld, cache=cache, workers=1)
    assert tree_digest(logs) == before
    assert len(cache.entries()) == 3
    assert all(not str(p).startswith(str(logs)) for e in cache.entries() for p in e.files)


def test_unreadable_files_are_not_cached(tmp_path, cache):
    bad = tmp_path / "logs" / "r" / "w.1.pt.trace.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"traceEvents": [')
    (f,) = scan_logdir(str(tmp_path / "logs")).files
    assert engine.span_summary(f, cache=cache)["errors"]
    assert cache.entries() == []


def test_concurrent_writers_share_one_entry(tmp_path, cache):
    (f,) = write_run(tmp_path / "logs").files
    model = engine.open_model(f)
    errors = []

    def put():
        try:
            cache.put_model(f, model)
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=put) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache.entries()) == 1
    assert cache.get_model(f) is not None
    assert not [p for p in cache.store.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_the_cache_is_bounded_least_recently_used_first(tmp_path):
    ld = write_run(tmp_path / "logs", n_files=4)
    one = TraceCache(tmp_path / "c1")
    engine.span_summary(ld.files[0], cache=one)
    entry_size = one.size()
    small = TraceCache(tmp_path / "c2", max_bytes=int(entry_size * 2.5))
    for f in ld.files:
        engine.span_summary(f, cache=small)
    assert small.size() <= small.max_bytes
    assert len(small.entries()) == 2
    assert small.get_results(ld.files[-1], engine.thresholds_variant(None)) is not None
    assert small.get_results(ld.files[0], engine.thresholds_variant(None)) is None


def test_pool_and_serial_give_identical_documents(tmp_path):
    ld = write_run(tmp_path / "logs", n_files=3)
    serial = build_document(ld, workers=1)
    pooled = build_document(ld, workers=2)
    assert serial == pooled
    seen = []
    build_document(ld, workers=1, progress=lambda i, n, f: seen.append((i, n)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
