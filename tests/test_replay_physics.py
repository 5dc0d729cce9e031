"""The replay's physical rules (issue 25 items 1, 3, 4), each on a hand-made trace:
a graph replay drops the Python and the dispatch; a sync splits a capture; launch slack
is split into latency and queueing, and queueing is re-derived; a change that only
shortens the host saves no more than the device's idle time; collectives keep their wait
(their recorded duration) and move with the work before them."""

from __future__ import annotations

import re

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.intervals import Intervals
from tb_diagnostics.analysis.replay.capture import GRAPH_GAP_US, GRAPH_LAUNCH_US, capture_regions
from tb_diagnostics.analysis.replay.changes import graphs_change, input_change, launch_change
from tb_diagnostics.analysis.replay.engine import Change, replay
from tb_diagnostics.analysis.replay.graph import replay_graph

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def walls(a) -> np.ndarray:
    return np.asarray([w.wall_us for w in a.windows])


# ---- graphs: the region's host time goes, one graph launch stays ---------------------------
def _python_steps(b: TraceBuilder, n: int = 3, ops: int = 40, step_us: float = 3000.0) -> None:
    """Per step: 100 µs of Python before the model, then ``ops`` calls, each a Python
    frame (10 µs of Python) around an op (20 µs of dispatch) that launches one 2 µs
    kernel; 200 µs of Python after the last one; the device idles most of the step."""
    for s in range(n):
        t0 = s * step_us
        b.step(s + 1, t0, step_us - 1)
        b.python("train.py(10): step", t0 + 1, 50)
        for k in range(ops):
            ts = t0 + 100 + 30 * k
            b.python("model.py(20): forward", ts, 29)
            b.op("aten::add", ts + 5, 20)
            b.launch("add_kernel", ts + 10, ts + 18, 2, api_dur=5)


def test_graph_replay_drops_the_python_and_dispatch_of_its_region(tmp_path):
    b = TraceBuilder(tmp_path)
    _python_steps(b)
    a = b.analysis()
    regions = capture_regions(a)
    assert len(regions) == 3  # one per step: nothing splits them
    # The region runs from the first op's start to the last op's end: the Python frames
    # between the ops lie inside it and go with them.
    first, last = 3000 + 100 + 5, 3000 + 100 + 30 * 39 + 25
    assert (regions.ext_start[1], regions.ext_end[1]) == (first, last)
    before = walls(a)
    after = replay(a, graphs_change(a)).wall_us
    assert after[:2] == pytest.approx(before[:2] - (last - first - GRAPH_LAUNCH_US))
    # Cheaper launches keep the Python: 40 calls of 20 µs become 40 × 5 µs, and that is all.
    cheap = replay(a, launch_change(a)).wall_us
    assert cheap[:2] == pytest.approx(before[:2] - 40 * 15.0)


def test_captured_kernels_follow_each_other_at_the_graph_gap(tmp_path):
    b = TraceBuilder(tmp_path)
    _python_steps(b, n=2)
    a = b.analysis()
    r = replay(a, graphs_change(a))
    g = replay_graph(a)
    start = r.a_end - g.a_dur
    step0 = a.activity_step == 0
    s, e = start[step0], r.a_end[step0]
    # The first kernel's launch is where it was (it lies in the graph launch's time); the
    # rest were launched with it and run back to back, a graph's gap apart, where eager
    # they ran 28 µs apart, each 8 µs after its own launch.
    gaps = s[2:] - e[1:-1]
    assert gaps == pytest.approx(np.full(gaps.shape, min(GRAPH_GAP_US, g.stream_gap_us)))


def test_steps_already_replaying_a_graph_keep_it(tmp_path):
    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::add", t0 + 10, 20)
        b.launch("add_kernel", t0 + 15, t0 + 25, 2)
        corr = b.runtime("cudaGraphLaunch", t0 + 100, 30)
        for k in range(20):
            b.kernel("graph_kernel", t0 + 140 + 5 * k, 4, corr)
    a = b.analysis()
    regions = capture_regions(a)
    graph_acts = np.flatnonzero(a.model.name[a.model.device_activity_rows]
                                == a.model.strings.index("graph_kernel"))
    assert not regions.captured[graph_acts].any()  # a graph already: not captured again
    c = graphs_change(a)
    assert c is not None and np.isnan(c.stream_gap[graph_acts]).all()
    r = replay(a, c)
    g = replay_graph(a)
    start = r.a_end - g.a_dur
    # The graph's kernels keep their recorded gaps (1 µs) after its launch.
    d = np.diff(start[graph_acts[:20]])
    assert d == pytest.approx(np.full(19, 5.0))


# ---- a sync, an .item() or the DataLoader ends a capture ----------------------------------
@pytest.mark.parametrize("breaker", ["sync", "item", "dataloader"])
def test_a_sync_splits_a_capture(tmp_path, breaker):
    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = s * 4000
        b.step(s + 1, t0, 3999)
        for k in range(10):  # forward: 10 ops of 20 µs
            ts = t0 + 100 + 20 * k
            b.op("aten::mul", ts, 20)
            b.launch("mul_kernel", ts + 5, ts + 12, 2)
        at = t0 + 400
        if breaker == "sync":
            b.runtime("cudaDeviceSynchronize", at, 50)
        elif breaker == "item":
            b.op("aten::item", at, 50)
            b.op("aten::_local_scalar_dense", at + 1, 48)
            b.launch("Memcpy DtoH (Device -> Pageable)", at + 5, at + 10, 2,
                     api="cudaMemcpyAsync", cat="gpu_memcpy")
            b.runtime("cudaStreamSynchronize", at + 20, 25)
        else:
            b.annotation(LOADER, at, 50)
        for k in range(10):  # backward and optimizer: 10 more
            ts = t0 + 500 + 20 * k
            b.op("aten::add", ts, 20)
            b.launch("add_kernel", ts + 5, ts + 12, 2)
    a = b.analysis()
    regions = capture_regions(a)
    assert len(regions) == 6  # two per step, one each side of the breaker
    assert regions.step.tolist() == [0, 0, 1, 1, 2, 2]
    m = a.model
    names = {m.name_of(int(r)) for r in regions.unit_rows.tolist()}
    assert names == {"aten::mul", "aten::add"}  # the breaker stays outside
    # Each region: 10 ops of 20 µs back to back, 200 µs of host less one graph launch.
    before = walls(a)
    after = replay(a, graphs_change(a)).wall_us
    assert after[:2] == pytest.approx(before[:2] - 2 * (200.0 - GRAPH_LAUNCH_US))


# ---- slack: launch latency stays, queueing is re-derived ----------------------------------
def _queue_then_launch_bound(b: TraceBuilder, n: int = 3) -> None:
    """Per step: a 1000 µs kernel with 30 small ones queued behind it (launched 10 µs
    apart while it runs; they run back to back, 0.5 µs apart); then 30 launch-bound
    ones (launched 20 µs apart onto an idle stream, each 6 µs after its launch)."""
    for s in range(n):
        t0 = s * 4000
        b.step(s + 1, t0, 3999)
        b.op("aten::mm", t0 + 10, 10)
        b.launch("big_gemm", t0 + 12, t0 + 20, 1000)
        t = t0 + 1020.0
        for k in range(30):
            b.op("aten::add", t0 + 30 + 10 * k, 8)
            b.launch("queued_add", t0 + 31 + 10 * k, t, 2)
            t += 2.5
        for k in range(30):
            ts = t0 + 1200 + 20 * k
            b.op("aten::relu", ts, 15)
            b.launch("relu_kernel", ts + 2, ts + 8, 2)


def test_the_device_latencies_are_measured_on_the_trace(tmp_path):
    b = TraceBuilder(tmp_path)
    _queue_then_launch_bound(b)
    g = replay_graph(b.analysis())
    assert g.stream_gap_us == pytest.approx(0.5)  # queued kernels, back to back
    assert g.launch_latency_us == pytest.approx(6.0)  # launched onto an idle stream


def test_queueing_goes_with_its_cause(tmp_path):
    """The big kernel 10 times faster: the kernels queued behind it no longer wait for
    it. Each starts a launch latency after its own launch, or right after the kernel
    before it: the 1000 µs it queued are not kept as slack."""
    b = TraceBuilder(tmp_path)
    _queue_then_launch_bound(b, n=2)
    a = b.analysis()
    g = replay_graph(a)
    m = a.model
    acts = m.device_activity_rows
    big = m.name[acts] == m.strings.index("big_gemm")
    scale = np.where(big, 0.1, 1.0)
    r = replay(a, Change(device_scale=scale))
    start = r.a_end - g.a_dur * scale
    queued = np.flatnonzero(m.name[acts] == m.strings.index("queued_add"))[:30]
    launch = g.h_time[g.a_launch[queued]]
    # The delay after the kernel before: as recorded (0 µs after the big one, 0.5 µs
    # between the small ones), the edge that held each of them in the recording.
    assert g.a_gap[queued].tolist() == [0.0] + [0.5] * 29
    expect = np.empty(30)
    prev_end = 20 + 100.0  # the big kernel now ends here
    for k in range(30):
        expect[k] = max(launch[k] + g.launch_latency_us, prev_end + g.a_gap[queued[k]])
        prev_end = expect[k] + 2
    assert start[queued] == pytest.approx(expect)
    # The early ones follow the faster kernel; the later ones start 6 µs after their
    # launch, as a launch onto an idle stream does, not 1000 µs late.
    assert (start[queued] - launch).max() < 120


def test_a_launch_bound_kernels_latency_does_not_follow_it_into_the_queue(tmp_path):
    """The host's launches gone (all at once): the launch-bound kernels run back to
    back at the device's gap, not each 6 µs (its recorded launch delay) after the last."""
    b = TraceBuilder(tmp_path)
    _queue_then_launch_bound(b, n=2)
    a = b.analysis()
    g = replay_graph(a)
    m = a.model
    relu_ops = m.rows_matching(re.compile(r"^aten::relu$"))
    lane = int(m.lane[relu_ops[0]])
    t0, t1 = float(m.start[relu_ops[0]]), float(m.end[relu_ops[29]])
    # Host time from the first relu's call to the last one's end removed: every launch
    # is made at once.
    change = Change(removed_host={lane: Intervals(np.asarray([t0 + 3]), np.asarray([t1]))})
    r = replay(a, change)
    start = r.a_end - g.a_dur
    relu = np.flatnonzero(m.name[m.device_activity_rows] == m.strings.index("relu_kernel"))[:30]
    gaps = start[relu[1:]] - r.a_end[relu[:-1]]
    assert gaps == pytest.approx(np.full(29, g.stream_gap_us))


# ---- no free overlap -----------------------------------------------------------------------
def _serial_streams(b: TraceBuilder, n: int = 3, concurrent: bool = False) -> None:
    """Per 1200 µs step: a 500 µs kernel on stream 7; a 600 µs DataLoader wait; a 500 µs
    kernel on stream 8, launched after the wait (the device idles 200 µs of the step).
    Serial in the recording, or (``concurrent``) with a second stream-8 kernel that ran
    alongside the first."""
    for s in range(n):
        t0 = s * 1200
        b.step(s + 1, t0, 1199)
        b.op("aten::mm", t0 + 10, 10)
        b.launch("gemm_a", t0 + 12, t0 + 20, 500)
        if concurrent:
            b.op("aten::mm", t0 + 25, 10)
            b.launch("gemm_side", t0 + 27, t0 + 100, 50, stream=8)
        b.annotation(LOADER, t0 + 30, 600)
        b.op("aten::mm", t0 + 640, 10)
        b.launch("gemm_b", t0 + 642, t0 + 650, 500, stream=8)


def test_a_host_only_change_saves_no_more_than_the_idle_time(tmp_path):
    b = TraceBuilder(tmp_path)
    _serial_streams(b)
    a = b.analysis()
    before = walls(a)
    idle = before - np.asarray([w.device_busy_us for w in a.windows])
    after = replay(a, input_change(a)).wall_us
    saved = before - after
    assert idle[:2] == pytest.approx([200.0, 200.0])
    # Without the wait gemm_b is launched 600 µs earlier. Sliding under gemm_a, the step
    # would end with the host's, 600 µs earlier; but the two streams never ran together
    # in the recording, so gemm_b starts when gemm_a ends: 180 µs saved, of 200 idle (the
    # first 20 µs, before gemm_a, stay). The next step starts at the device's end and
    # runs gapless: all its 200 µs of idle go, and no more.
    assert saved[:2] == pytest.approx([180.0, 200.0])
    assert np.all(saved <= idle + 1e-6)
    g = replay_graph(a)
    m = a.model
    acts = m.device_activity_rows
    r = replay(a, input_change(a))
    gb = np.flatnonzero(m.name[acts] == m.strings.index("gemm_b"))
    ga = np.flatnonzero(m.name[acts] == m.strings.index("gemm_a"))
    assert np.all(r.a_end[gb] - g.a_dur[gb] >= r.a_end[ga] - 1e-6)


def test_streams_shown_running_together_may_overlap_again(tmp_path):
    b = TraceBuilder(tmp_path)
    _serial_streams(b, concurrent=True)
    a = b.analysis()
    g = replay_graph(a)
    m = a.model
    acts = m.device_activity_rows
    side = np.flatnonzero(m.name[acts] == m.strings.index("gemm_side"))
    # gemm_side ran while gemm_a ran: its bound is gemm_a's start, not its end.
    ga = np.flatnonzero(m.name[acts] == m.strings.index("gemm_a"))
    assert g.a_dev[side].tolist() == ga.tolist() and not g.a_dev_end[side].any()


def test_collectives_keep_their_recorded_duration_and_move_with_the_work(tmp_path):
    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        b.annotation(LOADER, t0 + 10, 500)
        b.op("nccl:all_reduce", t0 + 520, 20)
        b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", t0 + 525, t0 + 540, 800)
    a = b.analysis()
    g = replay_graph(a)
    r = replay(a, input_change(a))
    # Without the wait (on every rank: the peers too) the launch is 500 µs earlier, and so
    # is the collective; it keeps its 800 µs, the wait for the peers included.
    # (The replay's clock runs on: step k's collective is k + 1 waits earlier.)
    assert r.a_end == pytest.approx(g.a_start + g.a_dur - 500 * np.arange(1, 4))
    # No change scales a collective's duration (nothing else moves here: it ends as recorded).
    scaled = replay(a, Change(device_scale=np.full(g.a_dur.shape, 0.5)))
    assert scaled.a_end == pytest.approx(g.a_start + g.a_dur)


# ---- a thread blocked on another returns when that one is done ----------------------------
def test_the_main_thread_returns_from_backward_when_the_autograd_thread_is_done(tmp_path):
    """``## backward ##`` (100-900 µs) blocks the main thread while the autograd engine's
    thread runs two backward functions (150-400, 410-850); the main thread's next launch is
    at 910. Remove 200 µs of the autograd thread's host time in its first function: the
    second one starts 200 µs earlier, and so does everything on the main thread after the
    wait; the main thread's own 55 µs after the burst stay. Host time removed on the main
    thread inside the wait is no saving: it was waiting."""
    from test_critical_path import _backward

    b = TraceBuilder(tmp_path)
    _backward(b)
    a = b.analysis()
    g = replay_graph(a)
    main_l = int(a.model.lane[a.host_steps.rows[0]])
    auto_l = int(next(x for x in set(g.h_lane.tolist()) if x != main_l))
    last_launch = int(np.flatnonzero((g.h_lane == main_l) & (g.h_time == 910.0))[0])
    assert replay(a).h_time[last_launch] == 910.0  # unchanged: as recorded
    faster = Change(removed_host={auto_l: Intervals(np.array([180.0]), np.array([380.0]))})
    assert replay(a, faster).h_time[last_launch] == pytest.approx(710.0)
    waiting = Change(removed_host={main_l: Intervals(np.array([300.0]), np.array([800.0]))})
    assert replay(a, waiting).h_time[last_launch] == pytest.approx(910.0)
