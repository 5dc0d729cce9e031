"""The dispatch-chain rule's columnar tree (analysis.dispatch_flat) is the call tree.

The rule reads every step's chain as :func:`flat_path_chain` gives it (no tree of Python
objects; all windows at once in ``rules.dispatch_chain_columns``, checked equal to it in
``test_dispatch_chain_columns``); the tab and the HTML report draw :func:`call_tree`.
Both must be one tree: every node with the same name, kind, count, host and device time
(the same floats: sums in the tree's order), first row and children in the same order,
and the same chain and path time as :func:`path_chain` on the call tree.
"""

from __future__ import annotations

import pytest

from tb_diagnostics.analysis.dispatch_flat import THREAD, flat_tree
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.rules.dispatch_chain import flat_path_chain, path_chain


def assert_same_tree(a: SpanAnalysis, k: int) -> None:
    t = flat_tree(a, k)
    strings = a.model.strings
    kids: dict[int, list[int]] = {}
    for i in range(1, len(t)):
        kids.setdefault(int(t.parent[i]), []).append(i)
    todo, seen = [(a.call_tree(k), 0)], 0
    while todo:
        node, i = todo.pop()
        seen += 1
        got = (t.name_text(i, strings), t.kind_label(i), int(t.count[i]),
               float(t.total_us[i]), float(t.device_us[i]),
               [int(t.first_row[i])] if t.first_row[i] >= 0 else [])
        assert got == (node.name, node.kind, node.count, node.total_us, node.device_us,
                       node.rows[:1])
        children = list(node.children.values())
        assert [c.name for c in children] == [t.name_text(j, strings)
                                              for j in kids.get(i, [])]
        todo += zip(children, kids.get(i, []), strict=True)
    assert seen == len(t)


def assert_same_chain(a: SpanAnalysis, k: int) -> None:
    want, want_on = path_chain(a, k, a.call_tree(k))
    got, got_on = flat_path_chain(a, k)
    fields = [(n.name, n.kind, n.count, n.total_us, n.device_us, n.rows[:1]) for n in want]
    assert [(n.name, n.kind, n.count, n.total_us, n.device_us, n.rows[:1])
            for n in got] == fields
    assert got_on == want_on


def _threads_and_fallback(b) -> None:
    """Step 1: a GEMM's chain, an op on another thread, an op nested under a Python
    frame (it goes under the step), and a kernel no launch call owns; step 2 the same."""
    for s in range(2):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        b.annotation("fwd", t0 + 5, 900)
        b.op("aten::matmul", t0 + 10, 300)
        b.op("aten::mm", t0 + 20, 200)
        b.launch("ampere_sgemm_128x64_nn", t0 + 30, t0 + 40, 700)
        b.op("aten::add", t0 + 400, 50)
        b.launch("elementwise_add_kernel", t0 + 410, t0 + 800, 20)
        b.op("autograd::engine::evaluate_function", t0 + 1000, 300, tid=2)
        b.op("aten::mul", t0 + 1010, 40, tid=2)
        corr = b.runtime("cudaLaunchKernel", t0 + 1020, 5, tid=2)
        b.kernel("elementwise_mul_kernel", t0 + 1100, 30, corr)
        b.python("m.py(3): f", t0 + 1400, 200)
        b.op("aten::mm", t0 + 1410, 100)
        b.launch("ampere_sgemm_128x64_nn", t0 + 1420, t0 + 1500, 90)
        b.kernel("orphan_kernel", t0 + 1700, 10, None)


@pytest.mark.parametrize("make", [_threads_and_fallback])
def test_the_flat_tree_is_the_call_tree_on_made_traces(builder, make):
    make(builder)
    a = builder.analysis()
    assert (flat_tree(a, 0).kind == THREAD).any()  # the autograd thread's node
    for k in range(len(a.windows)):
        assert_same_tree(a, k)
        assert_same_chain(a, k)


@pytest.mark.shared
@pytest.mark.parametrize("run", ["hta_2022_v100_rank1_of2",
                                 "kineto_resnet50_v100_dataloader_workers4",
                                 "hta_a100_nccl_train_rank0_of2",
                                 "tracelens_h100_owlv2_large_inference"])
def test_the_flat_tree_is_the_call_tree_on_real_traces(shared, run):
    a = shared(run)
    for k in range(len(a.windows)):
        assert_same_tree(a, k)
        assert_same_chain(a, k)
