"""The ``compile`` and ``compile-graphs`` changes (issue 25 item 2): per compiled region,
the eager ops' host time goes, one cache lookup and one launch per generated kernel stay,
GEMMs keep their op's host time, pointwise chains fuse, and a sync splits the region.
Checked on hand-made traces and on the shared eager → torch.compile pair."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.replay.capture import GRAPH_LAUNCH_US
from tb_diagnostics.analysis.replay.compile_change import (
    GENERATED_LAUNCH_US,
    LOOKUP_US,
    WRAPPER_US,
    compile_change,
    compile_graphs_change,
    compile_regions,
)
from tb_diagnostics.analysis.replay.engine import replay

T = [[1024, 1024, 16]]
BF16 = ["c10::BFloat16"]
PAIR = Path(__file__).resolve().parents[1].parent / "shared" / "pairs" / \
    "h100_toyblocks_eager_vs_compile"

#: Host time of each eager op call in the hand-made steps, and of the GEMM's.
OP_US, GEMM_US = 40.0, 30.0


def _block(b: TraceBuilder, t: float, names: list[str], kernel_us: float = 2.0) -> float:
    """Eager op calls from ``t``, each launching one kernel (a GEMM for ``aten::mm``);
    10 µs of Python between them. Returns the time after the last."""
    for name in names:
        dur = GEMM_US if name == "aten::mm" else OP_US
        if name == "aten::mm":
            b.op(name, t, dur, dims=[[1024, 1024], [1024, 1024]], types=BF16 * 2)
        else:
            b.op(name, t, dur, dims=T, types=BF16)
        b.launch("gemm_kernel" if name == "aten::mm" else f"{name[6:]}_kernel", t + dur - 8,
                 t + dur - 3, kernel_us)
        t += dur + 10
    return t


POINTWISE = ["aten::add", "aten::mul", "aten::relu"]


def _steps(b: TraceBuilder, n: int = 3, sync: bool = False) -> None:
    """Host-bound steps: three pointwise ops, a GEMM, a pointwise op (optionally a
    ``.item()`` sync after the first two), then 200 µs of Python the step keeps."""
    for s in range(n):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        t = _block(b, t0 + 10, POINTWISE[:2])
        if sync:
            b.op("aten::item", t, 30)
            b.runtime("cudaStreamSynchronize", t + 5, 20)
            t += 40
        t = _block(b, t, [*POINTWISE[2:], "aten::mm", "aten::gelu"])


def test_a_region_keeps_one_lookup_one_launch_per_generated_kernel_and_its_gemm(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b)
    a = b.analysis()
    regions = compile_regions(a)
    assert len(regions) == 3  # one per step: nothing breaks the graph
    r = regions[0]
    # add → mul → relu fuse into one generated kernel, gelu after the GEMM is another;
    # the GEMM is an extern call.
    assert (r.generated, r.extern) == (2, 1)
    keep = LOOKUP_US + 2 * (GENERATED_LAUNCH_US + WRAPPER_US) + GEMM_US + WRAPPER_US
    span = 4 * OP_US + GEMM_US + 4 * 10.0  # first op's start to last op's end
    assert r.keep_us.sum() + LOOKUP_US == pytest.approx(keep)
    change = compile_change(a)
    # The eager dispatch and the Python between the ops go: all of the span but the kept.
    assert sum(iv.total for iv in change.removed_host.values()) == pytest.approx(
        3 * (span - keep))
    before = np.asarray([w.wall_us for w in a.windows])
    after = replay(a, change).wall_us
    # Host-bound, device idle: the first two steps shorten by what the host no longer does.
    assert after[:2] == pytest.approx(before[:2] - (span - keep), abs=1.0)


def test_pointwise_chains_fuse_on_the_device_and_the_gemm_stays(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b)
    a = b.analysis()
    change = compile_change(a)
    assert change.device_scale is not None
    m = a.model
    names = [m.name_of(int(r)) for r in m.device_activity_rows]
    scale = dict(zip(names, change.device_scale.tolist(), strict=True))
    # add, mul, relu move the same bytes each: fused they move one op's worth.
    for k in ("add_kernel", "mul_kernel", "relu_kernel"):
        assert scale[k] == pytest.approx(1 / 3)
    assert scale["gemm_kernel"] == 1.0 and scale["gelu_kernel"] == 1.0


def test_a_sync_splits_the_region_and_stays_eager(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b, sync=True)
    a = b.analysis()
    regions = compile_regions(a)
    assert len(regions) == 6  # two per step, either side of .item()
    first, second = regions[0], regions[1]
    assert (first.generated, first.extern) == (1, 0)  # add → mul
    assert (second.generated, second.extern) == (2, 1)  # relu | mm | gelu
    m = a.model
    item = int(np.flatnonzero([m.name_of(i) == "aten::item" for i in range(len(m))])[0])
    change = compile_change(a)
    iv = change.removed_host[int(m.lane[item])]
    s, e = float(m.start[item]), float(m.end[item])
    # Nothing of the .item() call is removed: it runs eagerly between the two graphs.
    overlap = np.clip(np.minimum(iv.end, e) - np.maximum(iv.start, s), 0, None).sum()
    assert overlap == 0.0
    # Each region pays its own lookup.
    kept = sum(r.keep_us.sum() for r in regions[:2]) + 2 * LOOKUP_US
    spans = sum(float(m.end[r.ops].max() - m.start[r.ops[0]]) for r in regions[:2])
    removed_step = sum(float(np.clip(np.minimum(iv.end, 2000.0) - iv.start, 0, None).sum())
                       for iv in change.removed_host.values())
    assert removed_step == pytest.approx(spans - kept)


def test_reduce_overhead_keeps_one_lookup_and_one_graph_launch_per_region(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b)
    a = b.analysis()
    change = compile_graphs_change(a)
    span = 4 * OP_US + GEMM_US + 4 * 10.0
    assert sum(iv.total for iv in change.removed_host.values()) == pytest.approx(
        3 * (span - LOOKUP_US - GRAPH_LAUNCH_US))
    # Its kernels are the compile change's (the chain fused) and replay at the graph's gap.
    assert np.array_equal(change.device_scale, compile_change(a).device_scale)
    assert np.all(np.isfinite(change.stream_gap))


def test_already_compiled_work_is_left_as_it_is(tmp_path):
    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("TorchDynamo Cache Lookup", t0 + 10, 15)
        b.op("Torch-Compiled Region: 0/0", t0 + 30, 300)
        b.op("triton_poi_fused_add_mul_0", t0 + 40, 10)
        b.launch("triton_poi_fused_add_mul_0", t0 + 42, t0 + 50, 2, api="cuLaunchKernel")
        b.op("aten::mm", t0 + 60, 20)
        b.launch("gemm_kernel", t0 + 65, t0 + 70, 5)
    a = b.analysis()
    assert compile_regions(a) == []
    assert compile_change(a) is None and compile_graphs_change(a) is None


# ---- the shared pair ---------------------------------------------------------------------
def _pair(side: str):
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    files = sorted((PAIR / side).glob("*.pt.trace.json*")) if PAIR.is_dir() else []
    if not files:
        pytest.skip("../shared/pairs/h100_toyblocks_eager_vs_compile is absent")
    return SpanAnalysis(load_trace(str(files[0]))), files[0]


def _warm_median(a) -> float:
    from tb_diagnostics.analysis.views.whatif import warm_windows

    return statistics.median(a.windows[k].wall_us for k in warm_windows(a))


@pytest.mark.shared
def test_the_figures_are_the_medians_of_the_shared_compiled_trace():
    _, path = _pair("after")
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    lookups = [e["dur"] for e in events if e["name"] == "TorchDynamo Cache Lookup"]
    launchers = [e["dur"] for e in events
                 if e.get("cat") == "cpu_op" and e["name"].startswith("triton_")]
    assert statistics.median(lookups) == pytest.approx(LOOKUP_US, abs=0.05)
    assert statistics.median(launchers) == pytest.approx(GENERATED_LAUNCH_US, abs=0.05)
    # The wrapper's own code: each region's time outside its calls, per call.
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    per_call = []
    for r in (e for e in ops if e["name"].startswith("Torch-Compiled Region")):
        lo, hi = r["ts"], r["ts"] + r["dur"]
        calls = [e for e in ops if e is not r and lo <= e["ts"] and e["ts"] + e["dur"] <= hi]
        per_call.append((r["dur"] - sum(e["dur"] for e in calls)) / len(calls))
    assert statistics.median(per_call) == pytest.approx(WRAPPER_US, abs=0.05)


@pytest.mark.shared
def test_the_eager_run_compiles_to_the_kernels_the_compiled_run_launches():
    before, _ = _pair("before")
    after, _ = _pair("after")
    m = after.model
    triton = sum(m.name_of(int(r)).startswith("triton_") for r in m.device_activity_rows)
    gemm_calls = sum(m.name_of(int(r)) == "aten::mm" for r in after.op_rows)
    regions = compile_regions(before)
    assert len(regions) == len(before.windows) == 5  # one graph per iteration
    # Inductor's 9 kernels per iteration and its 8 extern GEMM calls, predicted from the
    # eager run's 40 kernels.
    assert all(r.generated == triton // 5 and r.extern == gemm_calls // 5 for r in regions)
    assert compile_regions(after) == []  # compiled already


@pytest.mark.shared
def test_the_compile_projection_is_within_20_percent_of_the_measured_saving():
    from tb_diagnostics.analysis.views.whatif import projection, warm_windows

    before, _ = _pair("before")
    after, _ = _pair("after")
    measured = _warm_median(before) - _warm_median(after)
    p = projection(before, "compile")
    predicted = p.saving(warm_windows(before))
    assert abs(predicted - measured) <= 0.2 * measured


def test_the_cards_name_the_rules_that_propose_torch_compile(tmp_path):
    from tb_diagnostics.analysis.views.whatif import projections

    b = TraceBuilder(tmp_path)
    _steps(b)
    a = b.analysis()
    cards = {p.id: p for p in projections(a)}
    rules = {"tiny-kernels", "high-call-count", "memory-bound-chain", "dispatch-chain"}
    for card in ("compile", "compile-graphs"):
        assert set(cards[card].related) == rules
        assert cards[card].rules == ()  # each of them names a symptom, none claims the card
    assert f"{LOOKUP_US:g} µs" in cards["compile"].assumes
    assert f"{GRAPH_LAUNCH_US:g} µs" in cards["compile-graphs"].assumes
    # Compiled, the steps are shorter; with graphs too, shorter still (host-bound steps).
    warm = [1]
    assert 0 < cards["compile"].saving(warm) < cards["compile-graphs"].saving(warm)


def test_region_groups_are_numpy_s_unique_rows():
    # compile_regions groups ops by (thread, window, graph-break segment) by one lexsort:
    # the same group numbers as np.unique of the stacked keys, rows as records.
    from tb_diagnostics.analysis.replay.compile_regions import _group_of
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 100, 5000):
        a, b, c = (rng.integers(-1, 4, n) for _ in range(3))
        expected = np.unique(np.stack([a, b, c], axis=1), axis=0, return_inverse=True)[1]
        assert np.array_equal(_group_of(a, b, c), expected.reshape(-1))
