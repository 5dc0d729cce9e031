"""tiny-kernels: kernels shorter than their launch call, launch-overhead bound steps."""

from __future__ import annotations

from tb_diagnostics.rules.tiny_kernels import RULE


def test_fires_on_many_tiny_kernels(builder):
    for s in range(3):
        t0 = s * 2000
        builder.step(s + 1, t0, 1999)
        for k in range(60):
            ts = t0 + 10 + k * 30
            builder.op("aten::add", ts, 25)
            builder.launch("add_kernel", ts + 2, ts + 20, 2, api_dur=10)
    (f,) = RULE.run(builder.analysis())
    assert f.steps == [1, 2, 3]
    assert "60 kernels per step" in f.message and "2.0 µs vs launch 10 µs" in f.message


def test_silent_on_long_kernels(builder):
    builder.steady_steps(3)
    assert RULE.run(builder.analysis()) == []
