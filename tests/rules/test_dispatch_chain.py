"""dispatch-chain: ProfilerStep → record_function → aten::matmul → aten::mm → launch → kernel."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.rules.dispatch_chain import RULE


def chain_steps(b, n=3):
    for s in range(n):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation("matmul_add", t0 + 5, 300)
        b.op("aten::matmul", t0 + 10, 100)
        b.op("aten::mm", t0 + 20, 80)
        b.launch("ampere_sgemm_128x64_nn", t0 + 30, t0 + 40, 400)
        b.op("aten::add", t0 + 120, 50)
        b.launch("elementwise_add_kernel", t0 + 130, t0 + 450, 20)


def test_one_chain_for_identical_steps(builder):
    chain_steps(builder)
    (f,) = RULE.run(builder.analysis())
    assert f.steps == [1, 2, 3] and f.severity == "info"
    assert ("ProfilerStep#1 (999 µs) → matmul_add (300 µs) → aten::matmul (100 µs) → "
            "aten::mm (80 µs) → cudaLaunchKernel (5.0 µs) → ampere_sgemm_128x64_nn ×1 "
            "(400 µs on the device)") in f.message
    assert [e.name for e in f.evidence][:3] == ["ProfilerStep#1", "matmul_add", "aten::matmul"]


def test_silent_without_device_work(make_builder):
    b = make_builder(device_properties=[])
    b.step(1, 0, 100)
    b.op("aten::mm", 10, 50)
    assert RULE.run(b.analysis()) == []


def _gemm_beside_a_host_bound_step(b):
    """Step 1 (0-1000): ``aten::mm`` launches a 800 µs GEMM at 20; then ten ``aten::add_``
    of 80 µs launch a 2 µs kernel each. No sync: the host ends the step, and the GEMM
    (done at 830) runs beside the host without holding it up."""
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 20)
    b.launch("ampere_sgemm_128x64_nn", 20, 30, 800)
    for i in range(10):
        t = 40 + i * 90
        b.op("aten::add_", t, 80)
        b.launch("elementwise_add_kernel", t + 70, t + 75, 2)


def test_the_chain_is_the_one_on_the_critical_path(builder):
    from tb_diagnostics.analysis.critpath import critical_paths
    from tb_diagnostics.analysis.dispatch import chains
    from tb_diagnostics.rules.dispatch_chain import best_chain, path_chain

    _gemm_beside_a_host_bound_step(builder)
    a = builder.analysis()
    root = a.call_tree(0)
    # Overall the GEMM's chain is the heaviest; the step's end waits on the adds.
    assert best_chain(root)[-1].name == "ampere_sgemm_128x64_nn"
    chain, on_path = path_chain(a, 0, root)
    assert [n.name for n in chain] == ["ProfilerStep#1", "aten::add_", "cudaLaunchKernel",
                                       "elementwise_add_kernel"]
    # The path: the host all along (no kernel holds it up), 30 µs of it aten::mm's
    # dispatch, 880 µs the adds' (from each op's start to its launch, and the rest of the
    # op after it), the rest the step's own: each chain's path time is its calls'.
    cp, m = critical_paths(a), a.model
    by_name: dict[str, float] = {}
    for r, d in zip(cp.row.tolist(), cp.dur.tolist(), strict=True):
        by_name[m.name_of(r)] = by_name.get(m.name_of(r), 0.0) + d
    assert by_name == {"ProfilerStep#1": 90.0, "aten::mm": 30.0, "aten::add_": 880.0}
    assert on_path == 880.0
    assert _per_chain(a, chains(root)) == [30.0, 880.0]
    (f,) = RULE.run(a)
    assert f.message == (
        "Dispatch chain in step 1, the one the critical path runs through (880 µs of "
        "the path on its calls and kernels): ProfilerStep#1 (1.00 ms) → aten::add_ ×10 "
        "(800 µs) → cudaLaunchKernel ×10 (50 µs) → elementwise_add_kernel ×10 (20 µs on "
        "the device). No saving is given: it explains how the step's time is dispatched.")


def _per_chain(a, paths):
    from tb_diagnostics.rules.dispatch_chain_path import chain_path_us

    return chain_path_us(a, 0, paths)


@pytest.mark.shared
@pytest.mark.parametrize("run", ["hta_2022_v100_rank1_of2",
                                 "kineto_resnet50_v100_dataloader_workers4"])
def test_the_rows_nodes_are_the_call_trees(shared, run):
    """On real traces with autograd and other threads: every node of each step's call tree
    has its number, no number is outside the tree, and each node holds exactly the calls
    (or activities) the tree merged into it."""
    from tb_diagnostics.rules.dispatch_chain_path import ROOT, _row_nodes

    a = shared(run)
    for k in range(len(a.windows)):
        ids, _, nodes = _row_nodes(a, k)
        count = np.bincount(nodes, minlength=len(ids) + 1)
        seen = set()
        todo = [(a.call_tree(k), ROOT)]
        while todo:
            node, nid = todo.pop()
            for c in node.children.values():
                cid = ids[(nid, c.kind, c.name)]
                seen.add(cid)
                if c.kind != "thread":  # a thread's node groups calls, it has none
                    assert count[cid] == c.count, (k, c.name)
                todo.append((c, cid))
        assert seen == set(ids.values())
