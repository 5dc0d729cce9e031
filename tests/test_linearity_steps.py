"""Per-step figures are columns, not numpy calls per step (issue 28, item 3).

A span of 10⁶ tiny steps (``bench/gen_steps.py``) makes every per-step numpy call a
million calls, and every per-step call that recomputes a column over all the steps a
quadratic pass: ``LaunchBacklog.step_fields`` read four properties per step, each a pass
over every step, and the critical-path segments of a set of windows took an ``arange``
per window. The cost is counted, not timed (as in ``test_linearity_depth``), at N and at
10·N steps: the numpy calls made (a vectorised pass makes a fixed number whatever the
steps), and the elements ufuncs read from the backlog's columns (a fixed number of passes
reads 10x the elements on 10x the steps; a pass over all the steps per step, 100x).
Each result is checked against the per-step form it replaces.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.load import load_trace_bytes

NUMPY = str(Path(np.__file__).parent)
#: Base span's steps; the wide one has 10x.
STEPS = 60
#: Allowed growth of the numpy calls from the base to 10x its steps: a fixed number of
#: vectorised passes stays at 1x; a call per step grows 10x.
GROWTH = 2.0


def tiny_steps_trace(steps: int) -> bytes:
    """``steps`` steps of 10 µs, each an ``aten::add`` launching one 3 µs kernel; every
    third kernel starts late, so that the launch queue holds work across step ends."""
    events: list[dict] = []
    for k in range(steps):
        t = 1000 + 10 * k
        late = 8 if k % 3 == 0 else 0
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1,
             "tid": 1, "ts": t, "dur": 10},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
             "ts": t + 1, "dur": 6, "args": {"External id": k + 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
             "tid": 1, "ts": t + 2, "dur": 3,
             "args": {"External id": k + 1, "correlation": k + 1}},
            {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7,
             "ts": t + 5 + late, "dur": 3,
             "args": {"device": 0, "stream": 7, "correlation": k + 1}}]
    return json.dumps({"schemaVersion": 1, "traceEvents": events,
                       "deviceProperties": [{"id": 0, "name": "Test GPU"}]}).encode()


def analysis_of(steps: int) -> SpanAnalysis:
    return SpanAnalysis(load_trace_bytes(tiny_steps_trace(steps), "steps.pt.trace.json"))


def numpy_calls(fn: Callable[[], object]) -> int:
    """Calls into numpy that ``fn()`` makes: its Python functions, its C functions and
    array methods (a ufunc or an operator such as ``a - b`` is no call the profiler sees,
    and counts 0: :class:`Counted` counts those)."""
    count = 0

    def profiler(frame, event, arg):
        nonlocal count
        python = event == "call" and frame.f_code.co_filename.startswith(NUMPY)
        c = event == "c_call" and (
            isinstance(getattr(arg, "__self__", None), np.ndarray)
            or (getattr(arg, "__module__", None) or "").startswith("numpy"))
        count += python or c

    previous = sys.getprofile()
    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(previous)
    return count


@pytest.fixture(scope="module")
def spans() -> dict[str, SpanAnalysis]:
    return {"base": analysis_of(STEPS), "wide": analysis_of(10 * STEPS)}


def _launch_queue_doc(a: SpanAnalysis) -> dict:
    from tb_diagnostics.report.document import step_document
    from tb_diagnostics.report.launch_queue import add_launch_queue

    doc = {"steps": [step_document(w) for w in a.windows], "notes": []}
    add_launch_queue(doc, a)
    return doc


class Counted(np.ndarray):
    """An array that counts the elements every ufunc over it reads (its results count
    too): a pass over all the steps per step shows as steps² elements."""

    elements = 0

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, Counted) else x for x in inputs]
        Counted.elements += max(int(np.size(x)) for x in plain)
        out = getattr(ufunc, method)(*plain, **kwargs)
        return out.view(Counted) if isinstance(out, np.ndarray) else out


def counted_backlog(a: SpanAnalysis) -> int:
    """Elements the launch-queue keys of the step documents read from the backlog's
    columns (the view itself built beforehand, as the span's other readers share it)."""
    from dataclasses import fields

    from tb_diagnostics.analysis.views.backlog import LaunchBacklog, launch_backlog

    bl = launch_backlog(a)
    cols = {f.name: getattr(bl, f.name).view(Counted) for f in fields(LaunchBacklog)}
    a._computed[launch_backlog.__wrapped__] = LaunchBacklog(**cols)
    Counted.elements = 0
    _launch_queue_doc(a)
    return Counted.elements


def test_the_launch_queue_fields_read_each_step_a_fixed_number_of_times():
    # Fresh analyses: the backlog's derived columns are cached on it.
    touched = {k: counted_backlog(analysis_of(n)) for k, n in
               (("base", STEPS), ("wide", 10 * STEPS))}
    # Linear: 10x the steps, 10x the elements (a per-step pass over them: 100x).
    assert 0 < touched["wide"] <= 1.1 * 10 * touched["base"], touched


def test_backlog_columns_equal_the_fields_of_each_step(spans):
    from tb_diagnostics.analysis.views.backlog import launch_backlog
    from tb_diagnostics.report.launch_queue import backlog_columns
    from tb_diagnostics.report.step_columns import with_columns

    a = spans["wide"]
    bl = launch_backlog(a)
    fields = with_columns([{} for _ in range(len(bl))], backlog_columns(bl))
    assert fields == [bl.step_fields(k) for k in range(len(bl))]
    assert [f["backlog_trend"] for f in fields] == [bl.trend(k) for k in range(len(bl))]
    # The late kernels leave work queued at step ends: the trend is read, not all None.
    assert {f["backlog_trend"] for f in fields} - {None}
    assert any(f["backlog_end"] > 0 for f in fields)


def test_segment_indices_make_no_numpy_call_per_window(spans):
    from tb_diagnostics.analysis.critpath import critical_paths
    from tb_diagnostics.analysis.path_clause import segment_indices

    for a in spans.values():
        critical_paths(a)
    calls = {k: numpy_calls(lambda a=a: segment_indices(a, range(len(a.windows))))
             for k, a in spans.items()}
    assert calls["wide"] <= GROWTH * calls["base"], calls


@pytest.mark.parametrize("pick", ["all", "odd", "reversed", "none", "repeated", "runs", "one"])
def test_segment_indices_equal_the_ranges_of_each_window(spans, pick):
    from tb_diagnostics.analysis.critpath import critical_paths
    from tb_diagnostics.analysis.path_clause import segment_indices

    a = spans["base"]
    cp = critical_paths(a)
    n = len(a.windows)
    windows = {"all": list(range(n)), "odd": list(range(1, n, 2)),
               "reversed": list(range(n))[::-1], "none": [],
               "repeated": [3, 3, 0, n - 1],
               # Runs of consecutive windows (one range of segments each), and lone ones.
               "runs": [1, 2, 3, 7, 8, 0, 1, 5, n - 2, n - 1], "one": [n - 1]}[pick]
    parts = [np.arange(int(cp.offsets[k]), int(cp.offsets[k + 1])) for k in windows]
    want = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    got = segment_indices(a, windows)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert pick == "none" or got.size > 0


def test_a_windows_activities_read_no_pass_over_every_step_per_window():
    touched = {}
    for label, n in (("base", STEPS), ("wide", 10 * STEPS)):
        a = analysis_of(n)
        n_windows = len(a.windows)
        a.__dict__["activity_step"] = a.activity_step.view(Counted)  # the cached column
        Counted.elements = 0
        for k in range(n_windows):
            a.window_activity_rows(k)
        touched[label] = Counted.elements
    # A mask per window read base² and 100x base² elements (3,600 and 360,000).
    assert touched["wide"] <= 1.1 * 10 * touched["base"] + 10 * STEPS, touched


def test_a_windows_activities_equal_the_mask(spans):
    a = spans["base"]
    acts = a.model.device_activity_rows
    for k in [*range(len(a.windows)), -1, len(a.windows), len(a.windows) + 5]:
        want = acts[a.activity_step == k]
        got = a.window_activity_rows(k)
        assert got.dtype == want.dtype and np.array_equal(got, want), k
    assert sum(a.window_activity_rows(k).size for k in range(len(a.windows))) == acts.size


def test_a_windows_host_rows_equal_the_mask(spans):
    from tb_diagnostics.analysis.dispatch_flat import _host_rows_between

    a = spans["base"]
    m = a.model
    host = m.host_rows
    rng = np.random.default_rng(0)
    lo_t, hi_t = float(m.start[host].min()), float(m.start[host].max())
    bounds = [(w.host_start, w.host_end) for w in a.windows]
    bounds += [tuple(sorted(rng.uniform(lo_t - 5, hi_t + 5, 2))) for _ in range(50)]
    bounds += [(lo_t, lo_t), (hi_t, hi_t + 1), (hi_t + 1, hi_t + 9)]
    for lo, hi in bounds:
        want = host[(m.start[host] >= lo) & (m.start[host] < hi)]
        assert np.array_equal(_host_rows_between(a, lo, hi), want), (lo, hi)


def removed_per_region(start, end, regions, keep) -> dict:
    """The former ``compile_change._removed``: the same walk, region by region."""
    from tb_diagnostics.analysis.intervals import union_sorted

    starts: dict[int, list] = {}
    ends: dict[int, list] = {}
    for r, k in zip(regions, keep, strict=True):
        s = start[r.ops].astype(np.float64)
        seg_end = np.append(s[1:], float(end[r.ops].max()))
        room = seg_end - s
        want = k.astype(np.float64)
        done = 0
        for i in np.flatnonzero(want > room).tolist():
            if i < done:
                continue
            carry = 0.0
            while i < want.shape[0]:
                w = float(want[i]) + carry
                want[i] = w
                carry = w - min(w, float(room[i]))
                i += 1
                if carry == 0.0:
                    break
            done = i
        kept = np.minimum(want, room)
        left = s + kept < seg_end
        starts.setdefault(r.lane, []).append((s + kept)[left])
        ends.setdefault(r.lane, []).append(seg_end[left])
    out = {}
    for lane in starts:
        s, e = np.concatenate(starts[lane]), np.concatenate(ends[lane])
        order = np.argsort(s, kind="stable")
        iv = union_sorted(s[order], e[order])
        if iv.total > 0:
            out[lane] = iv
    return out


@pytest.mark.parametrize("seed", range(6))
def test_compile_change_removed_equals_the_walk_region_by_region(seed):
    from types import SimpleNamespace

    from tb_diagnostics.analysis.replay.compile_change import Region, _removed

    rng = np.random.default_rng(seed)
    n = 400
    start = np.sort(rng.uniform(0, 4000, n))
    end = start + rng.uniform(0.5, 30, n)
    rows = rng.permutation(n)
    regions, keep, at = [], [], 0
    while at < n - 1:
        size = int(rng.integers(1, 12))
        ops = np.sort(rows[at:at + size])
        at += size
        regions.append(Region(lane=int(rng.integers(0, 3)), window=0, ops=ops,
                              keep_us=np.zeros(ops.size), activities=np.zeros(0, np.int64),
                              generated=0, extern=0))
        # Budgets that fit, that overflow into the next ops, and that overflow the region.
        keep.append(rng.uniform(0, 1, ops.size) * rng.choice([1, 20, 400], ops.size))
    analysis = SimpleNamespace(model=SimpleNamespace(start=start, end=end))
    got = _removed(analysis, regions, keep)
    want = removed_per_region(start, end, regions, keep)
    assert list(got) == list(want) and want
    for lane in want:
        assert np.array_equal(got[lane].start, want[lane].start)
        assert np.array_equal(got[lane].end, want[lane].end)


def test_compile_change_removed_makes_no_numpy_call_per_region():
    from types import SimpleNamespace

    from tb_diagnostics.analysis.replay.compile_change import Region, _removed

    def calls(n: int) -> int:
        start = np.arange(n, dtype=np.float64) * 10
        model = SimpleNamespace(start=start, end=start + 6)
        regions = [Region(lane=0, window=k, ops=np.asarray([k]), keep_us=np.zeros(1),
                          activities=np.zeros(0, np.int64), generated=0, extern=0)
                   for k in range(n)]
        keep = [np.asarray([2.0 + 5 * (k % 2)]) for k in range(n)]  # every other overflows
        return numpy_calls(lambda: _removed(SimpleNamespace(model=model), regions, keep))

    counted = {"base": calls(STEPS), "wide": calls(10 * STEPS)}
    assert counted["wide"] <= GROWTH * counted["base"], counted


def test_every_windows_dispatch_chain_makes_no_numpy_call_per_window():
    """The dispatch-chain rule's trees and chains of every window (one forest, one walk
    a depth per pass), and the rule itself (the chains grouped as columns): 60 and 600
    windows, the same numpy calls (a flat tree and a chain per window made some 60 calls
    each)."""
    from tb_diagnostics.analysis.critpath import critical_paths
    from tb_diagnostics.rules.dispatch_chain import GEMM, Thresholds, check
    from tb_diagnostics.rules.dispatch_chain_columns import path_chains

    counted = {}
    for label, n in (("base", STEPS), ("wide", 10 * STEPS)):
        a = analysis_of(n)
        critical_paths(a)  # the paths' own cost is not the chains'
        counted[label] = numpy_calls(lambda a=a: path_chains(a, GEMM))
        counted[f"rule {label}"] = numpy_calls(lambda a=a: check(a, Thresholds()))
    assert counted["wide"] <= GROWTH * counted["base"], counted
    assert counted["rule wide"] <= GROWTH * counted["rule base"], counted


def test_every_windows_dispatch_chain_is_the_chain_of_each_window(spans):
    from tb_diagnostics.rules.dispatch_chain import GEMM, _call_node, flat_path_chain
    from tb_diagnostics.rules.dispatch_chain_columns import path_chains

    a = spans["wide"]
    pc = path_chains(a, GEMM)
    for k in range(len(a.windows)):
        want, want_on = flat_path_chain(a, k)
        got = [_call_node(a, pc.forest, int(i)) for i in pc.nodes[k, :pc.length[k]]]
        assert got == want and float(pc.on_path[k]) == want_on, k
    # Every step's chain: step → aten::add → its launch → its kernel; on the path in
    # some steps, the fallback (no path time on it) in others: both ways are read.
    assert (pc.length == 4).all()
    assert (pc.on_path > 0).any() and (pc.on_path == 0).any()


def regions_one_by_one(a: SpanAnalysis) -> list[tuple]:
    """The former ``compile_change._region``, region by region, on the regions' ops: each
    region's (lane, window, ops, keep_us, activities, generated, extern)."""
    from tb_diagnostics.analysis.replay.compile_change import (
        GENERATED_LAUNCH_US,
        WRAPPER_US,
        _fused_families,
        compile_regions,
    )
    from tb_diagnostics.analysis.views.hierarchy import launching_op, outermost_op

    m = a.model
    acts = m.device_activity_rows
    inner = launching_op(a)
    fused = _fused_families(a, inner)
    top = np.where(m.launcher[acts] >= 0, outermost_op(a)[np.maximum(m.launcher[acts], 0)], -1)
    out = []
    for r in compile_regions(a):
        parts = [np.flatnonzero(top == op) for op in r.ops.tolist()]
        parts = [p[np.isin(p, r.activities)] for p in parts]  # the compiled ones
        mine = np.concatenate(parts).astype(np.int64)
        owner = np.repeat(np.arange(r.ops.shape[0]), [p.shape[0] for p in parts])
        by_act = np.argsort(mine, kind="stable")
        mine, owner = mine[by_act], owner[by_act]
        keep = np.zeros(r.ops.shape[0])
        ran = np.lexsort((m.start[acts[mine]], m.stream[acts[mine]]))
        order, owner = mine[ran], owner[ran]
        stream, gen = m.stream[acts[order]], fused[order]
        after_gen = np.zeros(order.shape[0], dtype=bool)
        after_gen[1:] = gen[:-1] & (stream[1:] == stream[:-1])
        run_first = gen & ~after_gen
        op = np.where(inner[order] >= 0, inner[order], r.ops[owner]).astype(np.int64)
        ext = np.flatnonzero(~gen)
        ext = ext[np.sort(np.unique(op[ext], return_index=True)[1])]
        cost = np.zeros(order.shape[0])
        cost[run_first] = GENERATED_LAUNCH_US + WRAPPER_US
        cost[ext] = m.dur[op[ext]] + WRAPPER_US
        at = np.sort(np.concatenate([np.flatnonzero(run_first), ext]))
        np.add.at(keep, owner[at], cost[at])
        out.append((r.lane, r.window, r.ops.tolist(), keep.tobytes(), mine.tolist(),
                    int(np.count_nonzero(run_first)), int(ext.shape[0])))
    return out


def test_compile_regions_equal_the_regions_one_by_one(spans, tmp_path):
    from rules.conftest import TraceBuilder
    from test_compile_change import _steps

    from tb_diagnostics.analysis.replay.compile_change import compile_regions

    b = TraceBuilder(tmp_path)
    _steps(b, n=4, sync=True)  # fused runs, a GEMM (extern), a sync splitting each step
    made = b.analysis()
    for a in (spans["base"], made):
        got = [(r.lane, r.window, r.ops.tolist(), r.keep_us.tobytes(), r.activities.tolist(),
                r.generated, r.extern) for r in compile_regions(a)]
        assert got == regions_one_by_one(a) and got
    assert {r.extern for r in compile_regions(made)} - {0}  # the GEMMs' regions
    # The columns read as a sequence of regions: by index, from the end, by slice.
    regions = compile_regions(made)
    fields = [(r.lane, r.ops.tolist(), r.generated) for r in regions]
    assert [(r.lane, r.ops.tolist(), r.generated) for r in regions[1:3]] == fields[1:3]
    assert regions[-1].ops.tolist() == fields[-1][1] and len(regions) == len(fields)
    with pytest.raises(IndexError):
        regions[len(regions)]
    assert regions != [] and compile_regions(analysis_of(0)) == []


def test_compile_regions_make_no_numpy_call_per_region():
    """60 and 600 one-op regions (a step each): the same numpy calls (the region-by-region
    budget made a dozen per region)."""
    from tb_diagnostics.analysis.replay.compile_change import compile_change, compile_regions
    from tb_diagnostics.analysis.views.hierarchy import launching_op, outermost_op

    counted = {}
    for label, n in (("base", STEPS), ("wide", 10 * STEPS)):
        a = analysis_of(n)
        for view in (outermost_op, launching_op):  # views the regions share with others
            view(a)
        a.windows  # noqa: B018 (the windows are the steps', not the regions')

        def regions(a: SpanAnalysis = a) -> None:
            assert len(compile_regions(a)) == len(a.windows)
            compile_change(a)

        counted[label] = numpy_calls(regions)
    assert counted["wide"] <= GROWTH * counted["base"], counted


def test_compile_change_removed_walks_no_line_per_region_where_each_ends_over_budget():
    """One-op regions, every other one over its budget (as every tiny step's: its lookup
    and launch outlast the op): a region's last op carries to nothing, so no op is walked
    (the walk ran some ten lines per region over budget)."""
    from types import SimpleNamespace

    from linecount import executed_lines

    from tb_diagnostics.analysis.replay.compile_change import Regions, _removed

    def lines(n: int) -> int:
        start = np.arange(n, dtype=np.float64) * 10
        model = SimpleNamespace(start=start, end=start + 6)
        z = np.zeros(n, dtype=np.int64)
        regions = Regions(lane=z, window=np.arange(n), op_cut=np.arange(n + 1),
                          ops=np.arange(n), keep_us=np.zeros(n),
                          act_cut=np.zeros(n + 1, np.int64), activities=z[:0], generated=z,
                          extern=z)
        # 7 µs kept of every other 6 µs op (it overflows), 2 µs of the others.
        keep = np.where(np.arange(n) % 2 == 0, 7.0, 2.0)
        got = {}
        count = executed_lines(lambda: got.update(
            _removed(SimpleNamespace(model=model), regions, keep)))
        want = removed_per_region(start, start + 6, list(regions), list(keep[:, None]))
        assert np.array_equal(got[0].start, want[0].start)
        assert np.array_equal(got[0].end, want[0].end)
        return count

    counted = {"base": lines(STEPS), "wide": lines(10 * STEPS)}
    assert counted["wide"] <= GROWTH * counted["base"], counted
