"""gpu-idle-gap: device gaps between kernels inside steps, with what the host was doing."""

from __future__ import annotations

from tb_diagnostics.rules.gpu_idle_gap import RULE


def test_fires_with_the_host_cause(builder):
    for s in range(3):
        t0 = s * 1000
        builder.step(s + 1, t0, 999)
        builder.op("aten::mm", t0 + 5, 10)
        builder.launch("gemm_kernel", t0 + 6, t0 + 10, 290)  # [10, 300)
        builder.op("aten::item", t0 + 20, 560)
        builder.runtime("cudaStreamSynchronize", t0 + 25, 550)  # host blocked [25, 575)
        builder.op("aten::add", t0 + 590, 10)
        builder.launch("add_kernel", t0 + 592, t0 + 600, 300)  # gap [300, 600)
    (f,) = RULE.run(builder.analysis())
    assert f.steps == [1, 2, 3]
    # The gaps' time is what the findings on their causes save (host-sync here): not
    # claimed a second time.
    assert f.savings_us is None and "replayed per cause" in f.message
    assert "blocked in a sync" in f.message and "aten::item" not in f.message[:20]
    assert {e.name for e in f.evidence} >= {"gemm_kernel", "add_kernel"}


def test_buffer_request_gap_is_not_blamed_on_the_user(builder):
    builder.buffer_request_steps()
    assert RULE.run(builder.analysis()) == []


def test_silent_on_back_to_back_kernels(builder):
    builder.steady_steps(4)
    assert RULE.run(builder.analysis()) == []
