"""dispatch-dead-window: a record_function label waiting long before its first op."""

from __future__ import annotations

from tb_diagnostics.rules.dispatch_dead_window import RULE


def _steps(b, dead: list[float]) -> None:
    for s, d in enumerate(dead):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation("fwd", t0 + 10, d + 100)
        b.op("aten::linear", t0 + 10 + d, 50)


def test_fires_on_a_long_window(make_builder):
    b = make_builder(device_properties=[])
    _steps(b, [5, 5, 300, 5])
    (f,) = RULE.run(b.analysis())
    assert f.steps == [3]
    assert "record_function 'fwd' waited up to 300 µs before dispatching aten::linear" in \
        f.message
    assert "warm median of 5.0 µs" in f.message
    assert f.evidence[0].name == "fwd" and f.evidence[1].name == "aten::linear"


def test_silent_when_uniform(make_builder):
    b = make_builder(device_properties=[])
    _steps(b, [5, 6, 5, 5])
    assert RULE.run(b.analysis()) == []
