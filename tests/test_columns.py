"""The memory-lean column machinery gives exactly what the plain numpy forms give."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import GPU_PID, TraceBuilder
from tb_diagnostics.analysis.intervals import union, union_of_rows
from tb_diagnostics.analysis.steps import per_window_sum, window_index
from tb_diagnostics.trace import load_trace_bytes
from tb_diagnostics.trace.build import ModelBuilder
from tb_diagnostics.trace.columns import GrowingColumn, constant, narrowest_ints
from tb_diagnostics.trace.decode import decode
from tb_diagnostics.trace.model import NO_ID, row_indices


def _model(trace: TraceBuilder):
    return load_trace_bytes(json.dumps(trace.document()).encode(), "t.json")


def _decoded_and_built(trace: TraceBuilder):
    """The trace's decoded document, and its model built from all its events at once."""
    doc = decode(json.dumps(trace.document()).encode(), "t.json")
    whole = ModelBuilder("t")
    whole.add(doc.events)
    return doc, whole.finish(doc)


def test_growing_column_equals_the_joined_batches():
    rng = np.random.default_rng(0)
    col = GrowingColumn(np.int64, NO_ID)
    batches = []
    for i in range(300):
        size = int(rng.integers(0, 500))
        # Absent for a while, then values, then absent again: the prefix must be filled in.
        b = (np.full(size, NO_ID, dtype=np.int64) if i < 40 or i > 250
             else rng.integers(-1, 1000, size))
        batches.append(b)
        col.extend(b)
    assert np.array_equal(col.take(), np.concatenate(batches))


def test_a_column_told_its_rows_is_made_once_at_that_size():
    # A merge knows the rows all parts bring: the buffer is made once, never doubled (a
    # doubling copies the column while the parts it comes from are still held).
    col = GrowingColumn(np.int64, NO_ID, capacity=100_000)
    col.extend(np.full(10, NO_ID, dtype=np.int64))  # absent: only counted
    first = None
    for i in range(100):
        col.extend(np.arange(i * 999, (i + 1) * 999, dtype=np.int64))
        first = col.data if first is None else first
        assert col.data is first and col.data.shape == (100_000,)
    out = col.take()
    assert np.array_equal(out[:10], np.full(10, NO_ID))
    assert np.array_equal(out[10:], np.arange(99_900))
    # Told too few rows, it grows as before.
    small = GrowingColumn(np.int64, NO_ID, capacity=5)
    small.extend(np.arange(20))
    small.extend(np.arange(20))
    assert np.array_equal(small.take(), np.concatenate([np.arange(20)] * 2))


def test_merging_a_part_takes_its_columns_out_of_it_and_keeps_the_model():
    t = TraceBuilder()
    for n in range(60):
        t.step(n, n * 100, 100)
        t.op(f"aten::op{n % 9}", n * 100 + 5, 40)
        t.launch(n * 100 + 10, 5, "gemm", n * 100 + 20, 50)
    doc, a = _decoded_and_built(t)
    merged = ModelBuilder("t")
    cut = len(doc.events) // 3
    parts = []
    for lo, hi in ((0, cut), (cut, len(doc.events))):
        b = ModelBuilder("t")
        b.add(doc.events[lo:hi])
        parts.append(b.export())
    for part in parts:
        merged.merge(part, rows=len(doc.events))
        assert part["columns"] == {}  # each column let go of once copied
    b = merged.finish(doc)
    for name in ("kind", "start", "dur", "correlation", "launcher", "parent", "lane"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert [a.string(i) for i in a.name.tolist()] == [b.string(i) for i in b.name.tolist()]


def test_a_column_without_any_value_is_a_constant_read_only_view():
    col = GrowingColumn(np.float64, np.nan)
    for _ in range(10):
        col.extend(np.full(1000, np.nan))
    out = col.take()
    assert out.shape == (10_000,) and out.strides == (0,) and np.isnan(out).all()
    with pytest.raises(ValueError):
        out[0] = 1.0


def test_cpu_only_model_stores_the_empty_columns_as_constants():
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.op("aten::add", 10, 5, **{"External id": 3})
    m = _model(t)
    for name in ("correlation", "stream", "device", "launcher", "python_id", "call_stack",
                 "launch_shape", "launch_resources"):
        col = getattr(m, name)
        assert col.strides == (0,) and col.shape == (len(m),), name
        assert (col == NO_ID).all(), name
    assert np.isnan(m.nbytes).all()
    # Columns with values stay ordinary arrays.
    assert m.start.strides != (0,) and m.external_id.strides != (0,)


def test_device_fields_fill_a_constant_column_from_the_lane():
    t = TraceBuilder()
    t.step(1, 0, 100)
    # No "device"/"stream" args on the kernel: they come from the GPU track's pid/tid.
    t.x("kernel", "k", 20, 10, pid=GPU_PID, tid=7)
    m = _model(t)
    k = m.rows_named({"k"})
    assert int(m.device[k][0]) == GPU_PID and int(m.stream[k][0]) == 7


def test_id_columns_are_int32_when_they_fit_and_keep_large_ids():
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.op("aten::a", 10, 5, **{"External id": 5})
    m = _model(t)
    assert m.external_id.dtype == np.int32
    t.op("aten::b", 20, 5, **{"External id": 2**40})
    m = _model(t)
    assert m.external_id.dtype == np.int64
    assert sorted(m.external_id[m.external_id >= 0].tolist()) == [5, 2**40]


@pytest.mark.parametrize(("values", "dtype"), [
    ([-1, 0, 7], np.int8), ([-128, 127], np.int8), ([-129], np.int16), ([128], np.int16),
    ([2**15], np.int32), ([-(2**31)], np.int32), ([2**31], np.int64),
    ([2**62 + 5, -1], np.int64)])
def test_narrowest_ints_keeps_every_value_in_the_narrowest_dtype(values, dtype):
    col = np.asarray(values, dtype=np.int64)
    got = narrowest_ints(col)
    assert got.dtype == dtype and got.tolist() == values
    const = narrowest_ints(constant(values[0], 5, np.int64))
    assert const.strides == (0,) and const.dtype == dtype  # values[0] needs the same
    assert const.tolist() == [values[0]] * 5
    empty = np.zeros(0, dtype=np.int64)
    assert narrowest_ints(empty) is empty
    f = np.zeros(3)
    assert narrowest_ints(f) is f  # only int64 columns are narrowed


def test_device_stream_and_correlation_are_narrow_and_keys_stay_exact():
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.x("kernel", "k", 20, 10, pid=GPU_PID, tid=7)
    t.x("kernel", "k2", 40, 10, pid=GPU_PID, tid=2**40)
    m = _model(t)
    assert m.device.dtype == np.int8
    assert m.stream.dtype == np.int64  # one stream id needs it: the column keeps it
    k = m.rows_named({"k"})
    # The stream key of the launch views: computed in int64, never wrapped.
    key = m.device[k].astype(np.int64) * (1 << 32) + m.stream[k]
    assert key.tolist() == [GPU_PID * (1 << 32) + 7]


def test_streamed_batches_build_the_same_model_as_one_batch():
    t = TraceBuilder()
    for n in range(200):
        t.step(n, n * 100, 100)
        t.op("aten::mm", n * 100 + 5, 40, **({"Input Dims": [[2, 3]]} if n % 7 else {}))
        if n > 150:
            t.launch(n * 100 + 10, 5, "gemm", n * 100 + 20, 50)
    doc, a = _decoded_and_built(t)
    piecewise = ModelBuilder("t")
    for i in range(0, len(doc.events), 37):
        piecewise.add(doc.events[i:i + 37])
    b = piecewise.finish(doc)
    for name in ("kind", "start", "dur", "correlation", "launcher", "parent", "stream",
                 "device", "external_id"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    # String ids depend on interning order; the strings they name do not.
    assert ([a.string(i) for i in a.input_dims.tolist()]
            == [b.string(i) for i in b.input_dims.tolist()])


@pytest.mark.parametrize("n", [0, 5, 70_000])
def test_row_indices_equal_flatnonzero(n):
    mask = np.random.default_rng(n).random(n) < 0.3
    got = row_indices(mask)
    assert got.dtype == np.int32 and np.array_equal(got, np.flatnonzero(mask))


def test_name_groups_equal_numpy_unique():
    t = TraceBuilder()
    rng = np.random.default_rng(1)
    for i in range(500):
        t.op(f"aten::op{int(rng.integers(0, 20))}", i * 10, 5)
    m = _model(t)
    rows = np.sort(rng.choice(len(m), 300, replace=False))
    ids, codes = m.name_groups(rows)
    want_ids, want_codes = np.unique(m.name[rows], return_inverse=True)
    assert np.array_equal(ids, want_ids) and np.array_equal(codes, want_codes)


def test_window_lookups_equal_the_naive_forms():
    rng = np.random.default_rng(2)
    lo = np.arange(0, 1000, 100, dtype=np.float64)
    hi = lo + 80  # gaps between windows
    t = np.sort(rng.uniform(-50, 1100, 100_000))
    rows = np.sort(rng.choice(t.shape[0], 70_000, replace=False)).astype(np.int32)
    got = window_index(lo, hi, t, rows)
    naive = np.full(rows.shape[0], -1)
    for k in range(lo.shape[0]):
        naive[(t[rows] >= lo[k]) & (t[rows] < hi[k])] = k
    assert np.array_equal(got, naive)
    values = rng.random(t.shape[0])
    want = np.asarray([values[rows][naive == k].sum() for k in range(lo.shape[0])])
    assert np.allclose(per_window_sum(lo, hi, t, rows, values), want)
    counts = np.asarray([(naive == k).sum() for k in range(lo.shape[0])])
    assert np.array_equal(per_window_sum(lo, hi, t, rows), counts)


def test_union_of_rows_equals_union():
    rng = np.random.default_rng(3)
    start = np.sort(rng.uniform(0, 1e6, 100_000))
    end = start + rng.exponential(20, start.shape[0]) * (rng.random(start.shape[0]) > 0.05)
    rows = np.sort(rng.choice(start.shape[0], 80_000, replace=False)).astype(np.int32)
    a = union_of_rows(start, end, rows, chunk=1000)
    b = union(start[rows], end[rows])
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)


def test_a_local_log_dir_is_analysed_without_importing_fsspec(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.op("aten::add", 10, 5)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "w.1.pt.trace.json").write_text(json.dumps(t.document()))
    code = (
        "import sys\n"
        "from tb_diagnostics.engine import span_summary\n"
        "from tb_diagnostics.logdir import scan_logdir\n"
        f"(f,) = scan_logdir({str(tmp_path)!r}).files\n"
        "doc = span_summary(f)\n"
        "assert doc['steps'] and not doc['errors'], doc\n"
        "print(sorted(m for m in ('fsspec', 'hashlib', 'asyncio') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_the_cache_keeps_constant_columns_constant(tmp_path):
    from tb_diagnostics.cache import TraceCache
    from tb_diagnostics.engine import open_model
    from tb_diagnostics.logdir import scan_logdir

    t = TraceBuilder()
    t.step(1, 0, 100)
    t.op("aten::add", 10, 5, **{"External id": 3})
    (tmp_path / "logs" / "run").mkdir(parents=True)
    (tmp_path / "logs" / "run" / "w.1.pt.trace.json").write_text(json.dumps(t.document()))
    (f,) = scan_logdir(str(tmp_path / "logs")).files
    cache = TraceCache(tmp_path / "cache", min_model_rows=0)  # keeps even this small a model
    cold = open_model(f, cache)
    warm = cache.get_model(f)
    assert warm is not None and warm.stream.strides == (0,) and len(warm.stream) == len(cold)
    for name in ("stream", "correlation", "external_id", "start", "nbytes"):
        assert np.array_equal(getattr(warm, name), getattr(cold, name), equal_nan=True), name
