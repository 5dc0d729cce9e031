"""too-few-active-steps: fewer than three warm steps."""

from __future__ import annotations

from tb_diagnostics.rules.too_few_active_steps import RULE


def test_fires_on_one_step(builder):
    builder.steady_steps(1)
    (f,) = RULE.run(builder.analysis())
    assert "Only 1 profiled step(s) (step 1)" in f.message


def test_fires_without_steps(builder):
    builder.op("aten::mm", 0, 10)
    (f,) = RULE.run(builder.analysis())
    assert f.message.startswith("No ProfilerStep# events") and f.steps == [None]


def test_cold_first_step_leaves_too_few(make_builder):
    b = make_builder(device_properties=[])
    for s, wall in enumerate([5000, 1000, 1000]):
        b.step(s + 1, s * 5000, wall)
        b.op("aten::mm", s * 5000 + 1, 10)
    (f,) = RULE.run(b.analysis())
    assert "of which the first is cold: 2 warm" in f.message


def test_silent_with_enough_steps(builder):
    builder.steady_steps(5)
    assert RULE.run(builder.analysis()) == []
