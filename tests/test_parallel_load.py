"""A file decoded on several cores gives the very model one core builds: every column, the
string table and the threads' numbering, the memory samples, the notes."""

from __future__ import annotations

import dataclasses
import gzip
import json

import numpy as np
import pytest

from tb_diagnostics.trace import parallel
from tb_diagnostics.trace.build import ModelBuilder
from tb_diagnostics.trace.stream import iter_event_batches, read_blocks

#: Small blocks: the shared traces (tens of MB) then have enough of them to be cut.
BLOCK = 1 << 15


def one_core(path: str) -> object:
    """load_trace's streamed path, with blocks of BLOCK bytes."""
    builder = ModelBuilder(path)
    with open(path, "rb") as fh:
        for item in iter_event_batches(read_blocks(fh, block=BLOCK)):
            if not isinstance(item, list):
                return builder.finish(item)
            builder.add(item)
    raise AssertionError("no top-level keys")


def assert_same_model(a, b) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f.name
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f.name
        elif f.name == "memory":
            for g in dataclasses.fields(x):
                assert np.array_equal(getattr(x, g.name), getattr(y, g.name),
                                      equal_nan=True), g.name
        else:
            assert x == y, f.name


def on_cores(path: str, workers: int, monkeypatch) -> object:
    monkeypatch.setattr(parallel.stream, "BLOCK_BYTES", BLOCK)
    return parallel.load_parallel(path, path, workers)


def synthetic(tmp_path, n_steps: int = 60) -> str:
    """Kernels with flows, memory samples, python frames, several threads, strings that
    look like boundaries, a 2021-style call stack and keys on both sides of the array."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "trainer"}},
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2,
               "args": {"name": "loader"}}]
    corr = 0
    for k in range(n_steps):
        t0 = k * 1000.0
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}",
                       "pid": 1, "tid": 1, "ts": t0, "dur": 900.0})
        for i in range(40):
            ts = t0 + 5 + i * 20
            events.append({"ph": "X", "cat": "python_function",
                           "name": f"m.py({i % 7}): f{k % 3}" + ("},{" if i == 3 else ""),
                           "pid": 1, "tid": 1 + (i % 3 == 0), "ts": ts, "dur": 18.0,
                           "args": {"Python id": k * 100 + i, "Python parent id": None}})
            events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{(k * i) % 11}",
                           "pid": 1, "tid": 1, "ts": ts + 1, "dur": 10.0,
                           "args": {"External id": k * 100 + i,
                                    "Input Dims": [[k % 5 + 1, i], []],
                                    "Input type": ["float", ""], "Call stack": "a;b"}})
            corr += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 1, "tid": 1, "ts": ts + 2, "dur": 3.0,
                           "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": f"kern_{i % 4}<{k % 9}>",
                           "pid": 0, "tid": 7, "ts": ts + 30, "dur": 5.0,
                           "args": {"correlation": corr, "stream": 7, "device": 0,
                                    "grid": [i, 1, 1], "block": [128, 1, 1]}})
            events.append({"ph": "s", "cat": "ac2g", "id": corr, "pid": 1, "tid": 1,
                           "ts": ts + 2, "name": "ac2g"})
            events.append({"ph": "f", "cat": "ac2g", "id": corr, "pid": 0, "tid": 7,
                           "ts": ts + 30, "name": "ac2g", "bp": "e"})
            events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]",
                           "pid": 1, "tid": 1, "ts": ts + 1.5, "s": "t",
                           "args": {"Bytes": 256 * (i + 1), "Total Allocated": 1e6 + i,
                                    "Total Reserved": 2e6, "Device Id": -1,
                                    "Device Type": 0}})
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU"}],
           "traceEvents": events, "traceName": "x", "displayTimeUnit": "ms"}
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps(doc, indent=1))
    return str(path)


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_a_synthetic_trace_on_several_cores_is_the_one_core_model(tmp_path, monkeypatch,
                                                                   workers):
    path = synthetic(tmp_path)
    assert_same_model(on_cores(path, workers, monkeypatch), one_core(path))


def test_what_cannot_be_cut_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "small.json"
    path.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(parallel.NotSplittable):
        on_cores(str(path), 2, monkeypatch)
    gz = tmp_path / "w.json.gz"
    gz.write_bytes(gzip.compress(b"{" + b" " * (1 << 20) + b'"traceEvents": []}'))
    with pytest.raises(parallel.NotSplittable):
        on_cores(str(gz), 2, monkeypatch)


def test_small_files_and_pool_workers_load_on_one_core(monkeypatch):
    monkeypatch.delenv("TB_DIAGNOSTICS_LOAD_WORKERS", raising=False)
    assert parallel.workers_for(parallel.MIN_BYTES - 1) == 1
    monkeypatch.setenv("TB_DIAGNOSTICS_LOAD_WORKERS", "1")
    assert parallel.workers_for(10 * parallel.MIN_BYTES) == 1
    monkeypatch.setenv("TB_DIAGNOSTICS_LOAD_WORKERS", "4")
    assert parallel.workers_for(10 * parallel.MIN_BYTES) == 4


@pytest.mark.shared
def test_the_shared_traces_on_several_cores_are_their_one_core_models(tmp_path, monkeypatch):
    from conftest import SHARED_TRACES

    paths = sorted(SHARED_TRACES.glob("*/*.pt.trace.json.gz")) if SHARED_TRACES.is_dir() else []
    if not paths:
        pytest.skip("../shared/traces is not present")
    cut = 0
    for gz in paths:
        plain = tmp_path / gz.name.removesuffix(".gz")
        plain.write_bytes(gzip.decompress(gz.read_bytes()))
        try:
            model = on_cores(str(plain), 3, monkeypatch)
        except parallel.NotSplittable:
            plain.unlink()
            continue
        assert_same_model(model, one_core(str(plain)))
        cut += 1
        plain.unlink()
    assert cut >= len(paths) // 2


def test_the_merge_expects_every_range_s_rows():
    from tb_diagnostics.trace.parallel import _expected_rows

    assert _expected_rows([100, 90], 2) == 190  # all parts in hand: exact
    assert _expected_rows([100], 3) == 100 + 2 * 120  # a fifth more for each to come
    assert _expected_rows([], 1) == 0


def _plain(tmp_path, n: int = 20000) -> str:
    """Ops of one shape, nothing that looks like a boundary inside a string."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 13}", "pid": 1, "tid": 1,
               "ts": 10.0 * k, "dur": 5.0, "args": {"External id": k}} for k in range(n)]
    path = tmp_path / "plain.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1))
    return str(path)


@pytest.mark.parametrize("workers", [2, 3])
def test_the_ranges_other_processes_read_are_shorter_than_this_one_s(tmp_path, monkeypatch,
                                                                      workers):
    # The last range (this process: no interpreter to start, no part to pickle) is longer
    # by HEAD_START_BYTES, capped for small files; the model is the one-core model.
    path = _plain(tmp_path)
    monkeypatch.setattr(parallel.stream, "BLOCK_BYTES", BLOCK)
    monkeypatch.setattr(parallel, "HEAD_START_BYTES", 8 * BLOCK)
    with parallel.LocalTrace(path) as source:
        n_blocks = -(-source.size // BLOCK)
        extra = min(8, n_blocks // (4 * workers))
        assert extra > 0
        ranges = parallel.plan(source, workers)
    assert [r.first[1] for r in ranges[1:]] == [k * (n_blocks - extra) // workers
                                                for k in range(1, workers)]
    assert_same_model(on_cores(path, workers, monkeypatch), one_core(path))


def test_equal_ranges_where_a_shorter_one_has_no_clean_cut(tmp_path, monkeypatch):
    path = _plain(tmp_path)
    monkeypatch.setattr(parallel.stream, "BLOCK_BYTES", BLOCK)
    monkeypatch.setattr(parallel, "HEAD_START_BYTES", 8 * BLOCK)
    real = parallel._cut_in_block
    with parallel.LocalTrace(path) as source:
        n_blocks = -(-source.size // BLOCK)
        equal = n_blocks // 2

        def only_equal(fh, b, block):
            if b != equal:
                raise parallel.NotSplittable("the boundary is not between two events")
            return real(fh, b, block)

        monkeypatch.setattr(parallel, "_cut_in_block", only_equal)
        ranges = parallel.plan(source, 2)
    assert ranges[1].first[1] == equal
