"""kernel-duration-variance: the same kernel at the same point of every step, timed differently."""

from __future__ import annotations

from tb_diagnostics.rules.kernel_duration_variance import RULE


def _steps(b, durations):
    for s, d in enumerate(durations):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm_kernel", t0 + 12, t0 + 20, d)
        b.op("aten::add", t0 + 40, 10)
        b.launch("add_kernel", t0 + 42, t0 + d + 30, 20)


def test_fires_with_the_spread(builder):
    _steps(builder, [600, 600, 1200, 600])
    (f,) = RULE.run(builder.analysis())
    assert "gemm_kernel" in f.message and "min 600 µs" in f.message
    assert "max 1.20 ms" in f.message and f.steps == [3]
    assert f.savings_us is None


def test_silent_when_stable(builder):
    _steps(builder, [600, 610, 605, 600])
    assert RULE.run(builder.analysis()) == []


def test_kernels_launched_before_the_window_do_not_break_it(builder):
    # A trace whose record window opened while the device still ran work queued earlier:
    # those kernels have no launch event and no External id (2 of them run in step 1, 1 in
    # step 2, so their counts per step differ). It raised IndexError on this ("no kernel
    # left to compare"); nothing is compared, so nothing is found.
    for s in range(3):
        builder.step(s + 1, s * 1000, 999)
        builder.op("aten::relu", s * 1000 + 10, 5)
    builder.kernel("cutlass_80_tensorop_gemm", 10, 120, None)
    builder.kernel("cutlass_80_tensorop_gemm", 140, 120, None)
    builder.kernel("cutlass_80_tensorop_gemm", 1010, 120, None)
    assert RULE.run(builder.analysis()) == []
