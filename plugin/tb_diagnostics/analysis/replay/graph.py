"""The dependency graph of a span, built once from the recording.

Like Daydream (USENIX ATC 2020), a span becomes a graph of host and device events whose
recorded times it reproduces, so a change to some of them can be replayed:

- **host threads**: each thread's launch calls, sync calls and step marks in order; the
  host time between two of them is kept as recorded (gaps included), less whatever a
  change removes. The main thread (the one with the steps) leads: every burst of work on
  another thread (a top-level call, e.g. the autograd engine's backward pass) starts as
  long after the main thread's latest event before it as it did in the recording;
- **device streams**: kernels, copies and memsets in their order on each stream;
- **edges**: a device activity starts no earlier than its launch call, the previous
  activity on its stream, and, where the recording shows one, the activity on another
  stream it waited for (``cudaStreamWaitEvent``, collectives: :func:`_cross_waits`); a
  sync call returns no earlier than the device activity that released it in the
  recording. A wait the device's own delays do not explain is a wait for the device's
  work, not for the host: it follows the other stream's work (an activity that started
  37.5 ms after its launch onto an idle stream, kept as a delay after the host's call,
  held every stream that may not overlap it to its recorded time, step after step);
- **latencies, not frozen slack**: each edge has its own delay. The recorded
  launch-to-start delay is split into the device's launch latency and queueing: on the
  edge that bound the activity in the recording the recorded delay stays (the replay
  reproduces the recording); on the others, the device's own figure, measured on the
  trace (:func:`device_latencies`: the launch latency of launches onto an idle stream, the
  gap between back-to-back kernels of a busy one). An activity that queued behind its
  stream keeps its launch latency only: when a change empties the queue, it starts a
  launch latency after its launch, and when the queue moves, it follows its predecessor;
- **no free overlap**: an activity does not move into overlap with another stream of its
  device further than the recording shows them running together: it starts no earlier
  than the end of another stream's activity that had ended when it started, nor earlier
  than the start of one that was running when it started (:func:`_device_edges`);
- **collectives** (kernels that wait on the other ranks) keep their recorded duration, the
  wait for the peers included, and no change scales it. They move with this rank's work:
  a fix is made in the script every rank runs, so the peers arrive earlier by as much and
  the skew between the ranks, which the wait measures, stays.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.replay.host_points import (
    LAUNCH,
    SYNC_END,
    anchors,
    host_timepoints,
)
from tb_diagnostics.analysis.replay.unseen import waited_unseen
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.categories import GRAPH_LAUNCH, PAGEABLE_HTOD, Kind
from tb_diagnostics.trace.columns import narrow_ids, one_value
from tb_diagnostics.trace.model import NO_ID

#: An activity starting within this many µs of another stream's activity's end, and
#: later than its own launch and stream allow, waited for it; one starting this much later
#: than its own edges allow at the device's own delays waited for the other stream's
#: activity that ended last before it (:func:`_cross_waits`).
CROSS_STREAM_US = 2.0
#: Fewer samples than this and a trace's own launch latency or back-to-back gap is not
#: measured: the defaults below stand in.
MIN_SAMPLES = 20
#: The device's launch latency (launch call's start to the kernel's, onto an idle stream)
#: where the trace has too few samples: the median of the 20 shared trace files' own
#: figures that have enough (:func:`device_latencies`: 5.4-20 µs, H100 5.4-6.8 µs, V100
#: and A100 7-20 µs).
DEFAULT_LAUNCH_LATENCY_US = 9.5
#: The gap between back-to-back kernels of a busy stream, likewise (0.8-4 µs on 18 of
#: those 20 files; the two sampled HTA files, whose dropped events leave no true
#: neighbours, 42-52 µs).
DEFAULT_STREAM_GAP_US = 1.4


@dataclass(frozen=True)
class ReplayGraph:
    """Host timepoints and device activities with their recorded edges and slacks."""

    # host timepoints (one per launch call, sync start and end, step start and end)
    h_time: np.ndarray  # recorded µs
    h_lane: np.ndarray  # host lane index
    h_kind: np.ndarray  # SYNC_START / LAUNCH / SYNC_END / MARK
    h_row: np.ndarray  # model row the timepoint belongs to
    h_release: np.ndarray  # SYNC_END: activity index that released it, or -1
    h_tail: np.ndarray  # SYNC_END: µs from the release to the call's return
    h_anchor: np.ndarray  # first timepoint of a burst on another thread: its main-thread
    #   anchor (the latest main-thread timepoint before the burst), or -1 (also when its
    #   thread's previous burst was still running then: it follows that one)
    # device activities (model.device_activity_rows order)
    a_start: np.ndarray
    a_dur: np.ndarray
    a_launch: np.ndarray  # host timepoint index of the launch call, or -1
    a_prev: np.ndarray  # previous activity on the same stream, or -1
    a_cross: np.ndarray  # activity on another stream it waited for, or -1
    # Per edge, the delay after it (µs): see the module docstring.
    a_lat: np.ndarray  # after the launch call's start
    a_gap: np.ndarray  # after the previous activity on the stream
    a_cross_lat: np.ndarray  # after the other stream's activity it waited for
    # The other stream's activity it may not overlap further than recorded, or -1, and
    # whether the edge is that activity's end (it had ended) or its start (it was running).
    a_dev: np.ndarray
    a_dev_end: np.ndarray  # bool
    a_floor: np.ndarray  # earliest start of each activity (-inf: none)
    a_fixed: np.ndarray  # bool: a collective, whose duration no change scales
    # The device's own figures, measured on the trace (or the defaults).
    launch_latency_us: float
    stream_gap_us: float
    # the order the replay visits everything in: (is_device, index)
    order_device: np.ndarray  # bool
    order_index: np.ndarray  # int
    # step marks: host timepoint index of each window's ProfilerStep start and end
    mark_start: np.ndarray
    mark_end: np.ndarray


def _median_or(values: np.ndarray, default: float) -> float:
    return float(np.median(values)) if values.size >= MIN_SAMPLES else default


def device_latencies(launch_t: np.ndarray, prev_end: np.ndarray, start: np.ndarray,
                     in_graph: np.ndarray) -> tuple[float, float]:
    """(launch latency, back-to-back gap) of the device, measured on the recording.

    The launch latency is the median launch-to-start delay of the activities launched
    onto an idle stream (their stream's previous activity had ended when the call began):
    nothing but the launch itself held them. The gap is the median start minus the
    previous activity's end of those launched while their stream was still busy: the
    device went from one to the next as fast as it does. Activities a graph replays have
    no launch of their own and are left out (theirs is the graph's gap).
    """
    eager = ~in_graph & np.isfinite(launch_t)
    idle = eager & (~np.isfinite(prev_end) | (prev_end <= launch_t))
    busy = eager & np.isfinite(prev_end) & (prev_end > launch_t)
    lat = np.maximum(start[idle] - launch_t[idle], 0.0)
    gap = np.maximum(start[busy] - prev_end[busy], 0.0)
    return (_median_or(lat, DEFAULT_LAUNCH_LATENCY_US), _median_or(gap, DEFAULT_STREAM_GAP_US))


def _edge_delay(start: np.ndarray, edge: np.ndarray, base: np.ndarray,
                nominal: float, floor: float = 0.0) -> np.ndarray:
    """The delay after an edge: the recorded one where it bound the start, else the
    device's nominal figure (no more than recorded: the unchanged replay stays exact).
    ``floor`` bounds a recorded delay below (-inf: a kernel recorded starting before its
    stream's previous one ended, by a µs or two of timestamp rounding, keeps that)."""
    recorded = np.where(np.isfinite(edge), np.maximum(start - edge, floor), 0.0)
    return np.where(edge >= base, recorded, np.minimum(recorded, nominal))


def _device_edges(a_start: np.ndarray, a_end: np.ndarray, a_lane: np.ndarray,
                  a_device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per activity, the other-stream activity that bounds how far it may move into
    overlap, and whether the bound is its end or its start.

    On each other stream of its device, the last activity that started before it: one
    that had ended bounds it by its end (the two did not run together: the device's SMs
    may not have room for both), one that was still running by its start (they did run
    together, as far as that). Of those, the latest bound in the recording is kept.
    """
    n = a_start.shape[0]
    best = np.full(n, -np.inf)
    dev = np.full(n, NO_ID, dtype=np.int64)
    dev_end = np.zeros(n, dtype=bool)
    for lane in unique(a_lane).tolist():
        on = np.flatnonzero(a_lane == lane)
        on = on[np.argsort(a_start[on], kind="stable")]
        d = a_device[on[0]]
        others = np.flatnonzero((a_lane != lane) & (a_device == d))
        if not others.size:
            continue
        k = np.searchsorted(a_start[on], a_start[others], side="left") - 1
        ok = k >= 0
        others, k = others[ok], on[k[ok]]
        ended = a_end[k] <= a_start[others]
        bound = np.where(ended, a_end[k], a_start[k])
        better = bound > best[others]
        others, k, ended, bound = others[better], k[better], ended[better], bound[better]
        best[others] = bound
        dev[others] = k
        dev_end[others] = ended
    return dev, dev_end


def _cross_waits(a_start: np.ndarray, a_end: np.ndarray, a_lane: np.ndarray,
                 a_device: np.ndarray, base: np.ndarray, ready: np.ndarray) -> np.ndarray:
    """Per activity, the activity on another stream of its device it waited for, or -1.

    The candidate is the one on another stream that ended last by its start. It waited
    for it where it started later than its own edges allow (``base``: its launch call,
    its stream's previous activity) right when the candidate ended (within
    :data:`CROSS_STREAM_US`); or where it started later than its own edges allow at the
    device's own delays (``ready``: a launch latency after the call, a back-to-back gap
    after the previous activity) and the candidate ended after that: the wait is the
    device's, for another stream's work (a ``cudaStreamWaitEvent`` the trace does not
    link, the V100's 5-7 µs event latency), not a delay after the host's call. Kept on
    the launch edge, such a wait would hold the activity, and every stream that may not
    overlap it further than recorded, to the host's recorded time.
    """
    n = a_start.shape[0]
    cross = np.full(n, NO_ID, dtype=np.int64)
    for lane in unique(a_lane).tolist():
        on = np.flatnonzero(a_lane == lane)
        others = np.flatnonzero((a_lane != lane) & (a_device == a_device[on[0]]))
        if not others.size:
            continue
        others = others[np.argsort(a_end[others], kind="stable")]
        at = np.searchsorted(a_end[others], a_start[on] + 0.5, side="right") - 1
        ok = at >= 0
        on, cand = on[ok], others[at[ok]]
        end, start = a_end[cand], a_start[on]
        rounded = (start - base[on] > CROSS_STREAM_US) & (np.abs(start - end) <= CROSS_STREAM_US)
        unexplained = (np.isfinite(ready[on]) & (start - ready[on] > CROSS_STREAM_US)
                       & (end > ready[on]))
        use = rounded | unexplained
        cross[on[use]] = cand[use]
    return cross


@computed
def replay_graph(analysis: SpanAnalysis) -> ReplayGraph:
    m = analysis.model
    acts = m.device_activity_rows
    a_start = m.start[acts].astype(np.float64)
    a_dur = m.dur[acts].astype(np.float64)
    a_end = a_start + a_dur
    a_lane = m.lane[acts].astype(np.int64)
    n_a = acts.shape[0]

    hp = host_timepoints(analysis, acts)
    h_row, h_kind, h_time = hp.row, hp.kind, hp.time
    h_lane = m.lane[h_row].astype(np.int64)

    # Launch edges: the LAUNCH timepoint of each activity's launch call.
    launch_tp = np.flatnonzero(h_kind == LAUNCH)  # one per launch call
    tp_of_call = np.full(len(m), NO_ID, dtype=np.int32)
    tp_of_call[h_row[launch_tp]] = launch_tp
    call = m.launcher[acts]
    a_launch = np.where(call >= 0, tp_of_call[np.maximum(call, 0)], NO_ID).astype(np.int64)

    # Stream order.
    by_stream = np.lexsort((a_start, a_lane))
    a_prev = np.full(n_a, NO_ID, dtype=np.int64)
    same = a_lane[by_stream[1:]] == a_lane[by_stream[:-1]]
    a_prev[by_stream[1:][same]] = by_stream[:-1][same]

    has_launch = a_launch >= 0
    launch_t = np.full(n_a, -np.inf)
    launch_t[has_launch] = h_time[a_launch[has_launch]]
    has_prev = a_prev >= 0
    prev_end = np.full(n_a, -np.inf)
    prev_end[has_prev] = a_end[a_prev[has_prev]]
    base = np.maximum(launch_t, prev_end)

    graph_ids = np.asarray([i for i in unique(m.name[call[call >= 0]]).tolist()
                            if GRAPH_LAUNCH.match(m.strings[i])], dtype=np.int64)
    in_graph = (call >= 0) & np.isin(m.name[np.maximum(call, 0)], graph_ids)
    latency, gap = device_latencies(launch_t, prev_end, a_start, in_graph)

    # Cross-stream waits, where the recording shows one (:func:`_cross_waits`).
    a_cross = _cross_waits(a_start, a_end, a_lane, m.device[acts], base,
                           np.maximum(launch_t + latency, prev_end + gap))
    use = a_cross >= 0
    cross_end = np.full(n_a, -np.inf)
    cross_end[use] = a_end[a_cross[use]]
    base[use] = np.maximum(base[use], cross_end[use])

    a_lat = _edge_delay(a_start, launch_t, base, latency)
    a_gap = _edge_delay(a_start, prev_end, base, gap, floor=-np.inf)
    a_cross_lat = _edge_delay(a_start, cross_end, base, gap)

    a_dev, a_dev_end = _device_edges(a_start, a_end, a_lane, m.device[acts])
    a_fixed = analysis.comm_activity_mask.copy() if n_a else np.zeros(0, dtype=bool)
    # No earliest start: a collective moves with the work before it (every rank gets the
    # fix), keeping its recorded duration (a_fixed).
    a_floor = np.full(n_a, -np.inf)
    pageable = np.isin(m.name[acts], m.name_ids_matching(PAGEABLE_HTOD))
    unseen = waited_unseen(a_start - launch_t, a_prev, a_cross, a_dev, a_lane, m.name[acts],
                           m.nbytes[acts], m.kind[acts] == Kind.MEMCPY, pageable, a_dur,
                           latency)
    a_floor[unseen] = a_start[unseen]

    # What released each sync: the last activity to end inside the call (it waited for it).
    h_release = np.full(h_row.shape[0], NO_ID, dtype=np.int64)
    h_tail = np.zeros(h_row.shape[0])
    ends = np.flatnonzero(h_kind == SYNC_END)
    if ends.size and n_a:
        by_end = np.argsort(a_end, kind="stable")
        sorted_end = a_end[by_end]
        b = h_time[ends]
        a = m.start[h_row[ends]]
        at = np.searchsorted(sorted_end, b + 1e-6, side="right") - 1
        ok = at >= 0
        cand = by_end[np.maximum(at, 0)]
        waited = ok & (sorted_end[np.maximum(at, 0)] > a) & (a_start[cand] < b)
        h_release[ends[waited]] = cand[waited]
        h_tail[ends[waited]] = np.maximum(b[waited] - a_end[cand[waited]], 0.0)

    h_anchor = anchors(analysis, h_row, h_lane, h_time, hp.steps)

    # Visit order: by recorded time; a host timepoint before an activity starting at the
    # same time (its launch), a sync's return after everything else at that time. A node's
    # number (host timepoints, then activities) is its index in the concatenation.
    n_h = h_time.shape[0]
    rank = np.concatenate([np.where(h_kind == SYNC_END, 2, 0).astype(np.int8),
                           np.ones(n_a, dtype=np.int8)])
    order = np.lexsort((rank, np.concatenate([h_time, a_start])))
    del rank
    is_dev = order >= n_h
    if n_h + n_a <= np.iinfo(np.int32).max:
        order = order.astype(np.int32)
    np.subtract(order, n_h, out=order, where=is_dev)  # an activity's own index
    # Kept through the replays of every card: its indices as int32 where they fit (rows,
    # timepoints and activities are far fewer than 2³¹), its kinds as int8 (110 of its
    # 290 MB at 10⁶ steps).
    n32 = narrow_ids
    return _one_values(ReplayGraph(h_time=h_time, h_lane=n32(h_lane), h_kind=h_kind,
                       h_row=n32(h_row), h_release=n32(h_release), h_tail=h_tail,
                       h_anchor=n32(h_anchor), a_start=a_start, a_dur=a_dur,
                       a_launch=n32(a_launch), a_prev=n32(a_prev), a_cross=n32(a_cross),
                       a_lat=a_lat, a_gap=a_gap, a_cross_lat=a_cross_lat, a_dev=n32(a_dev),
                       a_dev_end=a_dev_end, a_floor=a_floor, a_fixed=a_fixed,
                       launch_latency_us=latency, stream_gap_us=gap,
                       order_device=is_dev, order_index=n32(order),
                       mark_start=n32(hp.mark_start), mark_end=n32(hp.mark_end)))


def _one_values(g: ReplayGraph) -> ReplayGraph:
    """``g`` with each column of one value kept as that value (``trace.columns.one_value``):
    a span without syncs, other threads or other streams holds no column of -1 per
    timepoint or activity through every replay."""
    return dataclasses.replace(g, **{f.name: one_value(getattr(g, f.name))
                                     for f in dataclasses.fields(g)
                                     if isinstance(getattr(g, f.name), np.ndarray)})

