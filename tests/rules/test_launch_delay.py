"""launch-delay: the profiler's first-launch lag vs steady-state latency/queueing."""

from __future__ import annotations

from tb_diagnostics.rules.launch_delay import RULE


def test_first_launch_lag_is_an_artefact(builder):
    builder.step(1, 0, 4000)
    builder.op("aten::mm", 10, 20)
    builder.launch("gemm_kernel", 12, 2517, 100)  # call ends at 17, kernel 2.5 ms later
    builder.steady_steps(3, first=2, start=4000)
    (f,) = RULE.run(builder.analysis())
    assert f.artefact and f.title.startswith("First-launch lag")
    assert "2.50 ms" in f.message and "Steady state" in f.message


def test_latency_on_an_idle_device(builder):
    for s in range(3):
        t0 = s * 10000
        builder.step(s + 1, t0, 9999)
        for k in range(5):
            ts = t0 + 100 + k * 1000
            builder.op("aten::relu", ts, 20)
            builder.launch("relu_kernel", ts + 2, ts + 310, 50)  # 303 µs after the call
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "warning" and f.title == "Launch latency" and not f.artefact
    assert "idle device" in f.message


def test_silent_on_normal_launches(builder):
    builder.steady_steps(4)
    assert RULE.run(builder.analysis()) == []
