"""memory-bound-chain: consecutive memory-bound elementwise kernels that fusion would merge."""

from __future__ import annotations

from tb_diagnostics.rules.memory_bound_chain import RULE

T = [[1024, 1024, 16]]
BF16 = ["c10::BFloat16"]


def _chain(b, ops: list[str], kernel_us: float = 100.0, steps: int = 2,
           gemm_between: bool = False, device_from: float = 600.0) -> None:
    for s in range(steps):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        t = t0 + 10
        for i, name in enumerate(ops):
            if gemm_between and i == 1:
                b.op("aten::mm", t, 10, dims=[[64, 64], [64, 64]], types=BF16 * 2)
                b.launch("gemm", t + 2, t + device_from + i * kernel_us, 5)
                t += 12
            b.op(name, t, 10, dims=T, types=BF16)
            b.launch(f"elementwise_kernel_{i}", t + 2, t0 + device_from + i * kernel_us + 10,
                     kernel_us)
            t += 12


def test_fires_on_a_chain_of_four_and_counts_the_round_trips(builder):
    # The chain runs past the step's host end, so the device's work sets the step's length.
    _chain(builder, ["aten::gelu", "aten::sigmoid", "aten::tanh", "aten::relu"],
           device_from=1900.0)
    (f,) = RULE.run(builder.analysis())
    # Four ops moving the same bytes each; fused, the chain moves one op's worth: its
    # kernels take 300 µs less per step. Replayed, the host still needs 2 ms per step, so
    # only the chains' overrun past it goes: the two steps end 300 µs sooner, ~150 µs each.
    assert "take 300 µs less per step" in f.message
    assert 140.0 < f.savings_us < 170.0
    assert "gelu → sigmoid → tanh → relu" in f.message
    assert "1 chains of memory-bound kernels per step" in f.message
    assert f.steps == [1, 2]
    assert sum(e.category == "kernel" for e in f.evidence) == 4


def test_a_host_bound_step_gains_nothing_from_fusion(builder):
    _chain(builder, ["aten::gelu", "aten::sigmoid", "aten::tanh", "aten::relu"])
    (f,) = RULE.run(builder.analysis())
    # The kernels end long before the host's step does: faster kernels, same step.
    assert f.savings_us == 0.0 and "and the step 0.0 µs less (replayed)" in f.message


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
