"""matmul-to-bmm: what aten::matmul dispatched to."""

from __future__ import annotations

from tb_diagnostics.rules.matmul_to_bmm import RULE


def test_bmm_and_mm(builder):
    builder.step(1, 0, 999)
    builder.op("aten::matmul", 10, 100, dims=[[4, 64, 64], [4, 64, 64]],
               types=["float", "float"])
    builder.op("aten::bmm", 20, 80)
    builder.op("aten::matmul", 200, 100, dims=[[64, 64], [64, 64]])
    builder.op("aten::mm", 210, 80)
    (f,) = RULE.run(builder.analysis())
    assert "to aten::bmm 1 time(s) per step" in f.message
    assert "[[4,64,64],[4,64,64]]" in f.message and "to aten::mm 1" in f.message


def test_silent_without_matmul(builder):
    builder.steady_steps(2)
    assert RULE.run(builder.analysis()) == []


def test_qwen_rotary_bmm(shared):
    (f,) = RULE.run(shared("tracelens_h100_qwen1.5_0.5b_inference"))
    assert "aten::bmm" in f.message and "[[1,32,1],[1,1,559]]" in f.message
