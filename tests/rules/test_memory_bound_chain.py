"""memory-bound-chain: consecutive memory-bound elementwise kernels that fusion would merge."""

from __future__ import annotations

import pytest

from tb_diagnostics.rules.memory_bound_chain import RULE

T = [[1024, 1024, 16]]
BF16 = ["c10::BFloat16"]


def _chain(b, ops: list[str], kernel_us: float = 100.0, steps: int = 2,
           gemm_between: bool = False) -> None:
    for s in range(steps):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        t = t0 + 10
        for i, name in enumerate(ops):
            if gemm_between and i == 1:
                b.op("aten::mm", t, 10, dims=[[64, 64], [64, 64]], types=BF16 * 2)
                b.launch("gemm", t + 2, t + 600 + i * kernel_us, 5)
                t += 12
            b.op(name, t, 10, dims=T, types=BF16)
            b.launch(f"elementwise_kernel_{i}", t + 2, t0 + 600 + i * kernel_us + 10, kernel_us)
            t += 12


def test_fires_on_a_chain_of_four_and_counts_the_round_trips(builder):
    _chain(builder, ["aten::gelu", "aten::sigmoid", "aten::tanh", "aten::relu"])
    (f,) = RULE.run(builder.analysis())
    # Four ops moving the same bytes each; fused, the chain moves one op's worth.
    assert f.savings_us == pytest.approx(400.0 * (1 - 1 / 4))
    assert "gelu → sigmoid → tanh → relu" in f.message
    assert "1 chains of memory-bound kernels per step" in f.message
    assert f.steps == [1, 2]
    assert sum(e.category == "kernel" for e in f.evidence) == 4


def test_two_ops_are_no_chain(builder):
    _chain(builder, ["aten::gelu", "aten::relu"])
    assert RULE.run(builder.analysis()) == []


def test_a_gemm_in_between_breaks_the_chain(builder):
    _chain(builder, ["aten::gelu", "aten::sigmoid", "aten::tanh"], gemm_between=True)
    assert RULE.run(builder.analysis()) == []


def test_fires_on_qwen_rms_norm(shared):
    (f,) = RULE.run(shared("tracelens_h100_qwen1.5_0.5b_inference"))
    assert "pow → mean → add → rsqrt → mul" in f.message
    assert f.savings_us > 1000
