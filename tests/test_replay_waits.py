"""Waits between streams in the replay, on hand-made traces: a stream's wait for another
stream's work moves with that work, even where the trace links no event and the wait ends
more than a µs or two after it (a V100's event latency is 5-7 µs); and work that runs in
a collective's shadow, the step waiting for the collective, saves nothing when it gets
faster (issue 25: fusion and AMP on the shared 2-rank V100 trace)."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.replay.engine import Change, replay
from tb_diagnostics.analysis.replay.graph import replay_graph

LAUNCH_GAP_US = 30.0  # the side stream's kernel starts this long after its launch


def walls(a) -> np.ndarray:
    return np.asarray([w.wall_us for w in a.windows])


def scaled(a, name: str, factor: float) -> Change:
    """Every activity called ``name`` runs ``factor`` times as long."""
    m = a.model
    acts = m.device_activity_rows
    return Change(device_scale=np.where(m.name[acts] == m.strings.index(name), factor, 1.0))


def _event_wait_steps(b: TraceBuilder, n: int = 3, step_us: float = 2000.0) -> None:
    """Per step, the host queues everything at once, then blocks in a sync: an 800 µs
    GEMM on stream 7; a 50 µs kernel on stream 8 that waits (``cudaStreamWaitEvent``,
    no flow in the trace) for it and starts 6 µs after it ends; a 400 µs GEMM on stream
    7 that waits for that kernel and starts 6 µs after it ends; the host's sync returns
    8 µs after the last GEMM."""
    for s in range(n):
        t0 = s * step_us
        b.step(s + 1, t0, step_us - 1)
        b.op("aten::mm", t0 + 10, 10)
        b.launch("gemm_a", t0 + 12, t0 + 20, 800)
        b.runtime("cudaStreamWaitEvent", t0 + 25, 2)
        b.op("aten::index", t0 + 28, 8)
        b.launch("side_kernel", t0 + 30, t0 + 826, 50, stream=8)
        b.runtime("cudaStreamWaitEvent", t0 + 38, 2)
        b.op("aten::mm", t0 + 40, 8)
        b.launch("gemm_c", t0 + 42, t0 + 882, 400)
        b.runtime("cudaDeviceSynchronize", t0 + 50, 1240)  # returns at t0 + 1290


def test_a_wait_for_another_streams_work_moves_with_it(tmp_path):
    """gemm_a twice as fast: the side kernel waited for it, not for the host's call 796 µs
    before it started, and gemm_c waited for the side kernel; the sync, and the step,
    end 400 µs sooner. Kept as a delay after the host's call, the side kernel's wait
    held it where the recording has it, and gemm_c behind it: nothing saved."""
    b = TraceBuilder(tmp_path)
    _event_wait_steps(b)
    a = b.analysis()
    g = replay_graph(a)
    m = a.model
    acts = m.device_activity_rows
    side = np.flatnonzero(m.name[acts] == m.strings.index("side_kernel"))
    gemm_a = np.flatnonzero(m.name[acts] == m.strings.index("gemm_a"))
    # The side kernel's edge is gemm_a, 6 µs after it; its launch keeps the device's
    # launch latency only.
    assert g.a_cross[side].tolist() == gemm_a.tolist()
    assert g.a_cross_lat[side] == pytest.approx(np.full(3, 6.0))
    assert np.all(g.a_lat[side] < 796.0)
    assert replay(a).wall_us == pytest.approx(walls(a))  # unchanged: the recording
    before = walls(a)
    after = replay(a, scaled(a, "gemm_a", 0.5)).wall_us
    assert before[:2] - after[:2] == pytest.approx([400.0, 400.0])


def _collective_shadow_steps(b: TraceBuilder, n: int = 3, step_us: float = 3000.0) -> None:
    """Per step (the host queues it all, then blocks in a sync): a 300 µs GEMM on stream
    7; an all-to-all on stream 9 that waits for it (starts 6 µs after it) and takes
    1000 µs, the peers' data included; under it, a 500 µs GEMM on stream 7; then a
    kernel on stream 7 that needs the all-to-all's output (starts 6 µs after it)."""
    for s in range(n):
        t0 = s * step_us
        b.step(s + 1, t0, step_us - 1)
        b.op("aten::mm", t0 + 10, 10)
        b.launch("gemm_before", t0 + 12, t0 + 20, 300)
        b.op("nccl:all_to_all", t0 + 25, 10)
        b.launch("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", t0 + 28, t0 + 326, 1000,
                 stream=9)
        b.op("aten::mm", t0 + 40, 10)
        b.launch("gemm_shadow", t0 + 42, t0 + 330, 500)
        b.op("aten::cat", t0 + 55, 10)
        b.launch("cat_kernel", t0 + 57, t0 + 1332, 100)
        b.runtime("cudaDeviceSynchronize", t0 + 70, 1370)  # returns at t0 + 1440


def test_a_kernel_the_step_does_not_wait_for_saves_nothing(tmp_path):
    """The GEMM under the all-to-all twice as fast: the step still waits for the
    collective, which keeps its recorded duration (the transfer and the wait for the
    peers): nothing saved. The GEMM before it twice as fast: the collective starts, and
    the step ends, 150 µs sooner."""
    b = TraceBuilder(tmp_path)
    _collective_shadow_steps(b)
    a = b.analysis()
    before = walls(a)
    assert replay(a).wall_us == pytest.approx(before)
    shadow = replay(a, scaled(a, "gemm_shadow", 0.5)).wall_us
    assert shadow == pytest.approx(before)
    ahead = replay(a, scaled(a, "gemm_before", 0.5)).wall_us
    assert before[:2] - ahead[:2] == pytest.approx([150.0, 150.0])


# ---- a lone pageable copy is staged, not held -----------------------------------------------
@pytest.mark.parametrize(("kind", "delay", "held"), [
    ("Pageable", 166.0, False),  # within its own 3.46 ms: the driver staging it
    ("Pageable", 20_000.0, True),  # far past it: it waited for unrecorded work
    ("Pinned", 166.0, True),  # nothing to stage: 166 µs is 4x past the launch latency
])
def test_a_lone_copy_is_held_only_past_what_staging_explains(tmp_path, kind, delay, held):
    """One step, one host→device copy of 38.5 MB running 3.46 ms (TimeSformer's), no like
    copy to compare its launch-to-start delay with: from pageable memory the driver
    stages it before the transfer starts, which may take as long as the copy; the replay
    holds the copy at its recorded start (work before the window held it) only beyond."""
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 30_000)
    b.op("aten::copy_", 10, 10)
    corr = b.runtime("cudaMemcpyAsync", 12, delay + 3_470)
    b.device("gpu_memcpy", f"Memcpy HtoD ({kind} -> Device)", 12 + delay, 3_460.0, corr,
             bytes=38_535_168)
    a = b.analysis()
    floor = replay_graph(a).a_floor
    assert bool(np.isfinite(floor[0])) is held
