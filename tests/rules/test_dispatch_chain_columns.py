"""Every window's dispatch tree and chain at once (analysis.dispatch_forest,
rules.dispatch_chain_columns) equal the per-window forms the rule read before.

The forest holds each window's :func:`flat_tree`, node for node (the same columns, the
same floats: sums in the same order); :func:`path_chains` gives each window the chain
and path time of :func:`flat_path_chain` (itself checked against the call tree in
``test_dispatch_chain_flat``), the fallback chain included.
"""

from __future__ import annotations

import numpy as np
import pytest

from rules.conftest import shared_analysis, shared_file_ids
from rules.test_dispatch_chain_flat import _threads_and_fallback
from tb_diagnostics.analysis.dispatch_flat import THREAD, flat_tree
from tb_diagnostics.analysis.dispatch_forest import flat_forest
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.rules.dispatch_chain import GEMM, flat_path_chain
from tb_diagnostics.rules.dispatch_chain_columns import path_chains


def assert_forest_is_the_trees(a: SpanAnalysis) -> None:
    f = flat_forest(a)
    strings = a.model.strings
    assert f.offsets.shape[0] == len(a.windows) + 1
    for k in range(len(a.windows)):
        t = flat_tree(a, k)
        lo, hi = int(f.offsets[k]), int(f.offsets[k + 1])
        assert hi - lo == len(t), k
        parent = f.parent[lo:hi] - lo
        parent[0] = -1
        assert np.array_equal(parent, t.parent), k
        for col in ("kind", "depth", "count", "first_row"):
            assert np.array_equal(getattr(f, col)[lo:hi], getattr(t, col)), (k, col)
        for col in ("total_us", "device_us"):  # the same floats, bit for bit
            assert getattr(f, col)[lo:hi].tobytes() == getattr(t, col).tobytes(), (k, col)
        assert [f.name_text(a, i) for i in range(lo, hi)] == [
            t.name_text(i, strings) for i in range(len(t))], k
        assert (f.window[lo:hi] == k).all()
        mine = (f.row_key >= k * f.stride) & (f.row_key < (k + 1) * f.stride)
        assert np.array_equal(f.row_key[mine] - k * f.stride, t.rows), k
        assert np.array_equal(f.row_node[mine] - lo, t.row_node), k


def chain_fields(nodes) -> list[tuple]:
    return [(n.name, n.kind, n.count, n.total_us, n.device_us, n.rows[:1]) for n in nodes]


def assert_chains_are_the_flat_chains(a: SpanAnalysis) -> int:
    """Every window's chain as flat_path_chain's; returns how many fell back."""
    from tb_diagnostics.rules.dispatch_chain import _call_node

    pc = path_chains(a, GEMM)
    fallback = 0
    for k in range(len(a.windows)):
        want, want_on = flat_path_chain(a, k)
        got = [_call_node(a, pc.forest, int(i)) for i in pc.nodes[k, :pc.length[k]]]
        assert chain_fields(got) == chain_fields(want), k
        assert (pc.nodes[k, pc.length[k]:] == -1).all()
        assert float(pc.on_path[k]) == want_on, k
        fallback += want_on == 0
    return fallback


def test_the_forest_and_chains_on_made_traces(builder):
    _threads_and_fallback(builder)
    a = builder.analysis()
    assert (flat_forest(a).kind == THREAD).any()  # the autograd thread's node
    assert_forest_is_the_trees(a)
    assert_chains_are_the_flat_chains(a)


def test_the_fallback_chain_is_the_first_best_in_tree_order(builder):
    """The main thread runs one Python frame, the ops run on another thread: the path
    lies on no chain's node, and every step falls back to the best GEMM chain. Two tie
    (the same device and host time): ``a``'s (``a`` called twice, the second time around
    the mm) and ``b``'s, whose mm node was created first; the first chain in the tree's
    order is ``a``'s, not the one with the lowest-numbered kernel."""
    for s in range(3):
        t0 = s * 3000
        builder.step(s + 1, t0, 2999)
        builder.python("train.py(1): loop", t0 + 5, 2990)
        for label, ts, dur, op in (("a", 100, 100, "aten::relu"), ("b", 300, 200, "aten::mm"),
                                   ("a", 600, 100, "aten::mm")):
            builder.annotation(label, t0 + ts, dur, tid=2)
            builder.op(op, t0 + ts + 10, 50, tid=2)
            corr = builder.runtime("cudaLaunchKernel", t0 + ts + 20, 5, tid=2)
            builder.kernel("gemm_kernel" if op == "aten::mm" else "relu_kernel",
                           t0 + ts + 30, 10, corr)
    a = builder.analysis()
    assert_forest_is_the_trees(a)
    assert assert_chains_are_the_flat_chains(a) == len(a.windows) == 3
    pc = path_chains(a, GEMM)
    f = pc.forest
    for k in range(3):
        names = [f.name_text(a, int(i)) for i in pc.nodes[k, :pc.length[k]]]
        assert names[2:] == ["a", "aten::mm", "cudaLaunchKernel", "gemm_kernel"]
        kernels = np.flatnonzero((f.window == k) & (f.name == f.name[pc.nodes[k, 5]]))
        assert pc.nodes[k, 5] == kernels.max()  # b's kernel node comes first by number


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_the_forest_and_chains_on_every_shared_trace(run, index):
    a = shared_analysis(run, index)
    if a.cpu_only or not a.windows:
        pytest.skip("no device work: the rule reads no chain")
    assert_forest_is_the_trees(a)
    assert_chains_are_the_flat_chains(a)


def test_the_rule_reads_the_windows_a_range_at_a_time_to_the_same_findings(builder,
                                                                           monkeypatch):
    """Steps of three chains (the largest group reported first, then by first step),
    read two windows at a time (chains of one group in several ranges, ranges of
    several groups) and all at once: the same findings."""
    from tb_diagnostics.rules import dispatch_chain

    ops = {"A": ("aten::mm", "gemm_kernel"), "B": ("aten::add", "add_kernel"),
           "C": ("aten::mul", "mul_kernel")}
    for s, which in enumerate("ABBABCB"):
        t0 = s * 1000
        op, kernel = ops[which]
        builder.step(s + 1, t0, 999)
        builder.op(op, t0 + 10, 100 + 10 * s)
        builder.launch(kernel, t0 + 20, t0 + 900, 50 + s)
    a = builder.analysis()
    whole = dispatch_chain.check(a, dispatch_chain.Thresholds())
    assert [f.steps for f in whole] == [[2, 3, 5, 7], [1, 4], [6]]
    monkeypatch.setattr(dispatch_chain, "CHUNK_WINDOWS", 2)
    assert dispatch_chain.check(a, dispatch_chain.Thresholds()) == whole
    monkeypatch.setattr(dispatch_chain, "CHUNK_WINDOWS", 1)
    assert dispatch_chain.check(a, dispatch_chain.Thresholds()) == whole
