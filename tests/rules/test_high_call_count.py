"""high-call-count: many cheap calls per step."""

from __future__ import annotations

import numpy as np

from tb_diagnostics.rules.high_call_count import RULE, namespaced


def _steps(b, calls: int) -> None:
    for s in range(3):
        t0 = s * 5000
        b.step(s + 1, t0, 4999)
        b.annotation("Optimizer.step#SGD.step", t0 + 1, 4990)
        for k in range(calls):
            b.op("aten::add_", t0 + 10 + k * 20, 10)


def test_fires_on_many_small_calls(builder):
    _steps(builder, 200)
    (f,) = RULE.run(builder.analysis())
    assert f.message.startswith("aten::add_ is called 200 times per step at 10 µs each")
    assert "2.00 ms per step (40% of a warm step)" in f.message


def test_silent_on_few_calls(builder):
    _steps(builder, 20)
    assert RULE.run(builder.analysis()) == []


def test_calls_inside_other_ops_are_not_the_programs(builder):
    for s in range(3):
        t0 = s * 5000
        builder.step(s + 1, t0, 4999)
        builder.op("aten::conv2d", t0 + 5, 4900)
        for k in range(200):
            builder.op("aten::empty", t0 + 10 + k * 20, 10)
    assert RULE.run(builder.analysis()) == []


def test_namespaced_is_the_per_string_test() -> None:
    """``namespaced`` (each distinct name tested once) is ``'::' in`` each name's string."""
    strings = ["aten::add", "ProfilerStep#1", "Optimizer.step#SGD.step", "c10d::x", "", "::"]
    rng = np.random.default_rng(0)
    for size in (0, 1, 2, 50):
        ids = rng.integers(0, len(strings), size=size).astype(np.int32)
        want = np.asarray(["::" in strings[i] for i in ids.tolist()], dtype=bool)
        got = namespaced(ids, strings)
        assert got.dtype == bool and np.array_equal(got, want)
