"""cold-start-step: a first step much longer than the rest, and its dead window."""

from __future__ import annotations

from tb_diagnostics.rules.cold_start_step import RULE


def _steps(b, first_us: float, first_dead: float = 5.0, n: int = 4) -> None:
    t = 0.0
    for s in range(n):
        wall = first_us if s == 0 else 1000.0
        dead = first_dead if s == 0 else 5.0
        b.step(s + 1, t, wall - 1)
        b.annotation("matmul_add", t + 10, dead + 60)
        b.op("aten::matmul", t + 10 + dead, 50)
        t += wall


def test_fires_on_a_cold_first_step_and_names_the_dead_window(make_builder):
    b = make_builder(device_properties=[])
    _steps(b, 3000, first_dead=228)
    (f,) = RULE.run(b.analysis())
    assert f.steps == [1]
    assert "Step 1 took 3.00 ms, 3.0× the median 1.00 ms of steps 2–4" in f.message
    assert "record_function 'matmul_add' waited 228 µs" in f.message
    assert "warm mean step 1.00 ms (with the cold step: 1.50 ms)" in f.message


def test_silent_on_steady_steps(make_builder):
    b = make_builder(device_properties=[])
    _steps(b, 1000)
    assert RULE.run(b.analysis()) == []


def test_profiler_gap_does_not_make_a_step_cold(builder):
    # Step 1 is 3 ms only because of a 2.5 ms buffer-request gap: not cold.
    builder.buffer_request_steps()
    assert RULE.run(builder.analysis()) == []
