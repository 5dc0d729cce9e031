"""memory-growth: allocated memory rising step over step (profile_memory=True)."""

from __future__ import annotations

from tb_diagnostics.rules.memory_growth import RULE

MB = 2**20


def _steps(b, leak: float) -> None:
    base = 1000 * MB
    for s in range(4):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm_kernel", t0 + 12, t0 + 20, 400)
        # A temporary freed in the step, and what is kept (the leak).
        b.memory(t0 + 11, 64 * MB, base + 64 * MB, 2000 * MB)
        b.memory(t0 + 500, -64 * MB, base, 2000 * MB)
        if leak:
            base += leak
            b.memory(t0 + 600, leak, base, 2000 * MB)


def test_fires_on_a_leak(builder):
    _steps(builder, 16 * MB)
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "warning" and f.steps == [1, 2, 3, 4]
    assert f.message.startswith("CUDA 0: allocated memory grows 16.78 MB per step")


def test_flat_curve_reports_its_figures_as_info(builder):
    _steps(builder, 0)
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "info" and "does not grow" in f.message
    assert "peak allocated 1.12 GB" in f.message


def test_silent_without_memory_events(builder):
    builder.steady_steps(4)
    assert RULE.run(builder.analysis()) == []


def test_profile_memory_trace_is_evaluated(shared):
    findings = RULE.run(shared("hta_v100_profile_memory_rank1_of2"))
    (f,) = findings
    assert f.severity == "info" and f.steps == [2, 3, 4, 5, 6]
    assert "CUDA 1" in f.message and "peak reserved 12.78 GB (37% of 34.09 GB)" in f.message
