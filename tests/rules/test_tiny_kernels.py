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


def _graph_steps(b, graphed: int, own: int) -> None:
    """Steps whose ``graphed`` tiny kernels replay from one cudaGraphLaunch, and ``own``
    tiny kernels with a launch call each."""
    for s in range(3):
        t0 = s * 10_000
        b.step(s + 1, t0, 9_999)
        corr = b.runtime("cudaGraphLaunch", t0 + 10, 30)
        for k in range(graphed):
            b.kernel("graph_kernel", t0 + 50 + 4 * k, 2, corr)
        for k in range(own):
            ts = t0 + 2000 + 40 * k
            b.op("aten::add", ts, 30)
            b.launch("add_kernel", ts + 2, ts + 25, 2, api_dur=10)


def test_graph_replays_are_not_tiny_launches(builder):
    # 100 kernels from one graph launch: no kernel is shorter than a launch of its own.
    _graph_steps(builder, graphed=100, own=0)
    assert RULE.run(builder.analysis()) == []


def test_kernels_outside_the_graph_still_count_and_the_graph_is_named(make_builder):
    b = make_builder()
    _graph_steps(b, graphed=100, own=60)
    (f,) = RULE.run(b.analysis())
    assert f.message.startswith("60 kernels per step")
    assert "100 kernels per step already replay from CUDA graphs (not counted)" in f.message


def test_collective_kernels_do_not_make_a_step_compute_bound(builder):
    # Each 2 ms step: 60 tiny kernels (120 µs of compute) beside a 1.7 ms all-reduce kernel
    # on its own stream: 85% busy, 6% compute. The step still waits on its launches.
    for s in range(3):
        t0 = s * 2000
        builder.step(s + 1, t0, 1999)
        builder.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 1, t0 + 5, 1700,
                       stream=9)
        for k in range(60):
            ts = t0 + 10 + k * 30
            builder.op("aten::add", ts, 25)
            builder.launch("add_kernel", ts + 2, ts + 20, 2, api_dur=10)
    w = builder.analysis().windows[1]
    # The kernels after the all-reduce (from 1710 µs on) add 8 µs to its 1700.
    assert (w.wall_us, w.device_busy_us, w.compute_busy_us) == (2000.0, 1708.0, 120.0)
    (f,) = RULE.run(builder.analysis())
    assert f.steps == [1, 2, 3]
    assert "the device computes 6.0% of the step" in f.message
