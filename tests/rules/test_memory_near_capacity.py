"""memory-near-capacity: peak reserved above 90 % of totalGlobalMem."""

from __future__ import annotations

from tb_diagnostics.rules.memory_near_capacity import RULE

GB = 1e9


def _trace(b, reserved: float) -> None:
    for s in range(2):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm_kernel", t0 + 12, t0 + 20, 400)
        b.memory(t0 + 11, 1 * GB, 60 * GB, reserved)
        b.memory(t0 + 500, -1 * GB, 59 * GB, reserved)


def test_fires_above_90_percent(builder):
    _trace(builder, 80 * GB)  # H100: 85.02 GB
    (f,) = RULE.run(builder.analysis())
    assert "peak reserved memory 80.00 GB" in f.message and "94%" in f.message


def test_silent_below(builder):
    _trace(builder, 70 * GB)
    assert RULE.run(builder.analysis()) == []


def test_profile_memory_trace_is_far_from_capacity(shared):
    assert RULE.run(shared("hta_v100_profile_memory_rank1_of2")) == []
