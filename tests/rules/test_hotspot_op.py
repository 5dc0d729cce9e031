"""hotspot-op: one op (or kernel) with most of the device time."""

from __future__ import annotations

from tb_diagnostics.rules.hotspot_op import RULE


def _steps(b, mm_us: float, add_us: float, relu_us: float = 0.0) -> None:
    for s in range(3):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm_kernel", t0 + 12, t0 + 20, mm_us)
        b.op("aten::add", t0 + 40, 20)
        b.launch("add_kernel", t0 + 42, t0 + 30 + mm_us, add_us)
        if relu_us:
            b.op("aten::relu", t0 + 70, 20)
            b.launch("relu_kernel", t0 + 72, t0 + 40 + mm_us + add_us, relu_us)


def test_fires_on_a_dominant_op(builder):
    _steps(builder, 900, 50)
    (f,) = RULE.run(builder.analysis())
    assert f.message.startswith("aten::mm takes 95% of the self device time")
    assert f.evidence[0].name == "aten::mm"


def test_silent_when_shared(builder):
    _steps(builder, 400, 400, 400)
    assert RULE.run(builder.analysis()) == []


def test_cpu_only_uses_self_cpu_time(make_builder):
    b = make_builder(device_properties=[])
    for s in range(3):
        b.step(s + 1, s * 1000, 999)
        b.op("aten::conv2d", s * 1000 + 10, 800)
        b.op("aten::relu", s * 1000 + 820, 20)
    (f,) = RULE.run(b.analysis())
    assert "aten::conv2d takes 98% of the self CPU time" in f.message
