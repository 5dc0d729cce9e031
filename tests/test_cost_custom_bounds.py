"""Memory lower bounds (analysis.cost.bounds, analysis.views.lower_bounds): an op with
recorded shapes but no formula is bounded by its tensors' bytes, shown in the roofline
as a bound (never a modelled op), and left out of low-flop-utilisation's priced work."""

from __future__ import annotations

import json

import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.cost.bounds import NO_TENSORS, memory_lower_bound
from tb_diagnostics.analysis.cost.shapes import OpArgs
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.report.document import step_document
from tb_diagnostics.report.roofline import add_step_roofline, roofline_section, roofline_summary
from tb_diagnostics.rules import low_flop_utilisation

BF16, F32 = "c10::BFloat16", "float"
H100_HBM = 3350.0  # GB/s, the shipped H100 SXM row
RMS_DIMS = [[8, 4096], [8, 4096], [4096], []]
RMS_TYPES = [BF16, BF16, BF16, "Scalar"]
# A library's fused op the model has no formula for, my_lib::fused_add_norm(input,
# residual, weight, epsilon): input and residual (8, 4096) and weight (4096) in bf16,
# read once: (2·8·4096 + 4096)·2 bytes.
RMS_BYTES = (2 * 8 * 4096 + 4096) * 2


def _section(b: TraceBuilder):
    a = b.analysis()
    steps = [step_document(w) for w in a.windows]
    add_step_roofline(steps, a)
    return a, roofline_section(a), steps


def _entry(sec, name):
    (e,) = [u for u in sec["unmodelled"] if u["name"] == name]
    return e


def test_the_bound_is_the_bytes_of_the_tensor_arguments():
    c = memory_lower_bound(OpArgs.parse(json.dumps(RMS_DIMS), json.dumps(RMS_TYPES)))
    assert c.bytes == RMS_BYTES and c.flops == 0 and c.lower_bound and not c.tensor_op
    assert c.precision == "bf16" and "lower bound" in c.why
    assert memory_lower_bound(OpArgs.parse("[[], []]", '["Scalar", "Scalar"]')) == NO_TENSORS
    # An MXFP4 MoE kernel's packed weights: one byte per stored element (two values).
    moe = memory_lower_bound(OpArgs.parse(
        "[[16, 2048], [8, 4096, 1024], [8, 4096, 64]]",
        '["c10::BFloat16", "c10::Float4_e2m1fn_x2", "c10::Float8_e8m0fnu"]'))
    assert moe.bytes == 16 * 2048 * 2 + 8 * 4096 * 1024 + 8 * 4096 * 64


def test_a_custom_op_with_shapes_is_a_bound_not_a_modelled_op(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 30, dims=[[64, 64], [64, 64]], types=[BF16, BF16])
    b.launch("gemm", 12, 50, 10)
    b.op("my_lib::fused_add_norm", 100, 30, dims=RMS_DIMS, types=RMS_TYPES)
    b.launch("fused_add_norm_kernel", 102, 200, 20)
    a, sec, steps = _section(b)
    assert [o["name"] for o in sec["ops"]] == ["aten::mm"]  # the bound is not a point
    e = _entry(sec, "my_lib::fused_add_norm")
    assert e["lower_bound_bytes"] == RMS_BYTES and e["device_us"] == 20.0
    assert e["lower_bound_us"] == pytest.approx(RMS_BYTES / (H100_HBM * 1e3), abs=1e-3)
    assert "lower bound" in e["reason"]
    assert sec["lower_bound_device_us"] == 20.0 and sec["unmodelled_device_us"] == 20.0
    (fig,) = [f for f in roofline(a).figures if f.group.name == "my_lib::fused_add_norm"]
    assert fig.lower_bound and not fig.modelled
    assert fig.ideal_us is None and fig.bound is None and fig.loss_us == 0.0
    # The step's FLOPs are the mm's alone; the bounded kernel's time is not "modelled".
    assert steps[0]["flops"] == 2.0 * 64**3
    assert steps[0]["busy_unmodelled_us"] == 20.0
    assert "0.02 ms of it only a memory lower bound" in roofline_summary(
        {"roofline": sec, "steps": steps})


def test_an_op_around_a_priced_op_is_not_bounded(tmp_path):
    # my_lib::block (shapes) runs an aten::mm and launches a kernel of its own: its bytes
    # would count the mm's again, so its own kernel stays unmodelled without a bound.
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("my_lib::block", 10, 200, dims=[[64, 64], [64, 64]], types=[BF16, BF16])
    b.op("aten::mm", 20, 30, dims=[[64, 64], [64, 64]], types=[BF16, BF16])
    b.launch("gemm", 22, 300, 10)
    b.launch("block_epilogue_kernel", 100, 320, 15)
    _, sec, _ = _section(b)
    e = _entry(sec, "my_lib::block")
    assert e["lower_bound_bytes"] is None and e["reason"] == "no cost model for this op"
    assert sec["lower_bound_device_us"] == 0.0


def test_the_deepest_op_with_shapes_is_the_bound(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("vllm::moe_forward", 10, 300, dims=[[16, 1024], [8, 2048, 1024]], types=[BF16, BF16])
    b.op("_moe_C::topk_softmax", 20, 30, dims=[[16, 2], [16, 2], [16, 8], [16, 8]],
         types=[F32, "int", "int", F32])
    b.launch("topk_softmax_kernel", 22, 400, 4)
    _, sec, _ = _section(b)
    e = _entry(sec, "_moe_C::topk_softmax")
    assert e["lower_bound_bytes"] == (16 * 2 * 4) * 2 + (16 * 8 * 4) * 2
    assert not [u for u in sec["unmodelled"] if u["name"] == "vllm::moe_forward"]


def test_work_under_a_priced_op_stays_with_it(tmp_path):
    # The kernel is launched from an unknown child of aten::embedding: the embedding owns it.
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("aten::embedding", 10, 100, dims=[[50000, 1024], [8, 128]], types=[BF16, "long int"])
    b.op("my_lib::gather_rows", 20, 50, dims=[[50000, 1024], [1024]], types=[BF16, "long int"])
    b.launch("indexSelectLargeIndex", 22, 300, 12)
    _, sec, _ = _section(b)
    assert [o["name"] for o in sec["ops"]] == ["aten::embedding"]
    assert sec["ops"][0]["device_us"] == 12.0 and sec["lower_bound_device_us"] == 0.0


def test_collectives_are_communication_not_bounds(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("c10d::allreduce_", 10, 50, dims=[[[8, 4096]]], types=["TensorList"])
    b.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 12, 100, 40)
    b.op("symm_mem::one_shot_all_reduce", 200, 50, dims=[[8, 4096], []], types=[BF16, ""])
    b.launch("one_shot_all_reduce_kernel", 202, 300, 30)
    _, sec, _ = _section(b)
    assert sec["communication"] == {"activities": 2, "device_us": 70.0}
    assert sec["lower_bound_device_us"] == 0.0 and not sec["unmodelled"]


@pytest.mark.parametrize(("name", "dims", "types", "fires"), [
    # The control: an elementwise op the model prices, as slow: the rule fires.
    ("aten::add", [[8, 4096], [8, 4096], []], [BF16, BF16, "Scalar"], True),
    ("my_lib::fused_add_norm", RMS_DIMS, RMS_TYPES, False),
])
def test_low_flop_utilisation_does_not_count_a_bound_as_compute(tmp_path, name, dims, types,
                                                                 fires):
    # A busy step: a slow priced GEMM (10 % of the step) and a memory-side op of a few µs
    # of roofline time that runs 850 µs. Priced, it puts the step far from its roofline
    # with 95 % of its busy time priced; only bounded, the priced share is under
    # min_modelled_share and the rule stays silent.
    b = TraceBuilder(tmp_path)
    for step, t0 in ((1, 0), (2, 1000), (3, 2000)):
        b.step(step, t0, 1000)
        b.op("aten::mm", t0 + 10, 20, dims=[[256, 256], [256, 256]], types=[BF16, BF16])
        b.launch("gemm", t0 + 12, t0 + 20, 100)
        b.op(name, t0 + 40, 20, dims=dims, types=types)
        b.launch("memory_side_kernel", t0 + 42, t0 + 125, 850)
    a = b.analysis()
    assert [w.verdict for w in a.windows] == ["compute-bound"] * 3
    priced = {f.group.name for f in roofline(a).figures if f.ideal_us is not None}
    assert priced == ({"aten::mm", name} if fires else {"aten::mm"})
    findings = low_flop_utilisation.check(a, low_flop_utilisation.RULE.thresholds)
    assert bool(findings) == fires
