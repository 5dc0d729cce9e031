"""Replay the span's dependency graph (:mod:`.graph`), unchanged or with a change applied.

One pass over the graph in recorded order computes every event's replayed time: each
edge points at an event the recording shows earlier, so the pass never waits for one it
has not seen. A change says which host time goes away (a DataLoader wait, the profiler's
own work), which syncs no longer wait, how much faster device activities run, and which
activities follow their stream's predecessor at another gap (a CUDA graph's).

**No free overlap.** A change that leaves every device activity's duration as it was
(host time removed, syncs freed, gaps closed) cannot make a step shorter than the device's
busy time in it: it saves at most the step's device idle time. The replay's streams keep
the overlap the recording shows (:mod:`.graph`); the step's wall is held to that bound
too, so work of another step moved into this one's idle time is not counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, length_before
from tb_diagnostics.analysis.replay.graph import SYNC_END, ReplayGraph, replay_graph
from tb_diagnostics.analysis.replay.joins import thread_joins
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.steps import device_partition
from tb_diagnostics.trace.model import NO_ID


@dataclass(frozen=True)
class Change:
    """What a fix changes, in terms the replay understands."""

    #: Host time that disappears, per host lane (e.g. the DataLoader's wait).
    removed_host: dict[int, Intervals] = field(default_factory=dict)
    #: Sync calls (model rows) that no longer wait for the device.
    no_wait: frozenset[int] = frozenset()
    #: Per device activity (``model.device_activity_rows`` order): duration factor.
    device_scale: np.ndarray | None = None
    #: Per device activity: the gap after its stream's previous activity (a CUDA graph's
    #: inter-kernel gap), NaN where the recorded one stays.
    stream_gap: np.ndarray | None = None


@dataclass(frozen=True)
class Replayed:
    """Replayed times: per window its device-side bounds, and every activity's end."""

    lo: np.ndarray
    hi: np.ndarray
    a_end: np.ndarray
    h_time: np.ndarray  # replayed time of every host timepoint

    @property
    def wall_us(self) -> np.ndarray:
        return self.hi - self.lo


def _removed_before(g: ReplayGraph, change: Change) -> tuple[np.ndarray, np.ndarray]:
    """Per host timepoint: the removed host time on its lane before it; and, for the first
    timepoint of a burst on another thread, the removed time on its lane and on the main
    thread's between its anchor and it (the host time that burst no longer waits for)."""
    out = np.zeros(g.h_time.shape[0])
    for lane, iv in change.removed_host.items():
        on = np.flatnonzero(g.h_lane == lane)
        if on.size and len(iv):
            out[on] = length_before(iv, g.h_time[on])
    since_anchor = np.zeros(g.h_time.shape[0])
    burst = np.flatnonzero(g.h_anchor >= 0)
    if burst.size and change.removed_host:
        k = g.h_anchor[burst]
        main = int(g.h_lane[k[0]])
        for lane in np.unique(g.h_lane[burst]).tolist():
            ivs = [iv for x, iv in change.removed_host.items() if x in (lane, main) and len(iv)]
            if not ivs:
                continue
            both = ivs[0] if len(ivs) == 1 else ivs[0] | ivs[1]
            on = g.h_lane[burst] == lane
            at, t0 = g.h_time[burst[on]], g.h_time[k[on]]
            since_anchor[burst[on]] = length_before(both, at) - length_before(both, t0)
    return out, since_anchor


def _joins(analysis: SpanAnalysis, g: ReplayGraph, change: Change
           ) -> tuple[list[int], list[float]]:
    """Per host timepoint: the other thread's timepoint it waited for (:mod:`.joins`), or
    -1; and the time from that timepoint to it, less the host time the change removes
    there (the rest of the burst on its thread, then the main thread's own time)."""
    n = g.h_time.shape[0]
    last = np.full(n, NO_ID, dtype=np.int64)
    after = np.zeros(n)
    nodes, j_last, j_end = thread_joins(analysis)
    if nodes.size:
        last[nodes] = j_last
        t_l, t_i = g.h_time[j_last], g.h_time[nodes]
        after[nodes] = t_i - t_l
        for lane, iv in change.removed_host.items():
            if not len(iv):
                continue
            on_l = g.h_lane[j_last] == lane
            after[nodes[on_l]] -= (length_before(iv, j_end[on_l])
                                   - length_before(iv, t_l[on_l]))
            on_i = g.h_lane[nodes] == lane
            after[nodes[on_i]] -= (length_before(iv, t_i[on_i])
                                   - length_before(iv, j_end[on_i]))
    return last.tolist(), after.tolist()


def replay(analysis: SpanAnalysis, change: Change | None = None) -> Replayed:
    g = replay_graph(analysis)
    change = change or Change()
    removed_a, since_a = _removed_before(g, change)
    removed, since_anchor = removed_a.tolist(), since_a.tolist()
    scale = change.device_scale
    # Collectives wait on the other ranks: no change of this rank's work scales them.
    dur = g.a_dur if scale is None else np.where(g.a_fixed, g.a_dur, g.a_dur * scale)
    gap = g.a_gap
    if change.stream_gap is not None:
        gap = np.where(np.isnan(change.stream_gap), g.a_gap, change.stream_gap)
    h_time = g.h_time.tolist()
    h_lane = g.h_lane.tolist()
    is_end = (g.h_kind == SYNC_END).tolist()
    release = g.h_release.tolist()
    tail = g.h_tail.tolist()
    anchor = g.h_anchor.tolist()
    join, join_after = _joins(analysis, g, change)
    no_wait = [r in change.no_wait for r in g.h_row.tolist()] if change.no_wait else None
    a_start, a_launch = g.a_start.tolist(), g.a_launch.tolist()
    a_prev, a_cross = g.a_prev.tolist(), g.a_cross.tolist()
    a_lat, a_gap, a_cross_lat = g.a_lat.tolist(), gap.tolist(), g.a_cross_lat.tolist()
    a_dev, a_dev_end, a_floor = g.a_dev.tolist(), g.a_dev_end.tolist(), g.a_floor.tolist()
    dur_l = dur.tolist()
    h_out = [0.0] * len(h_time)
    a_out_start = [0.0] * len(a_start)
    a_out_end = [0.0] * len(a_start)
    lane_t: dict[int, float] = {}  # recorded time of each lane's last timepoint
    lane_T: dict[int, float] = {}  # its replayed time
    lane_r: dict[int, float] = {}  # removed host time before it
    neg_inf = -np.inf
    for dev, i in zip(g.order_device.tolist(), g.order_index.tolist(), strict=True):
        if dev:
            ready = neg_inf
            j = a_launch[i]
            if j >= 0:
                ready = h_out[j] + a_lat[i]
            p = a_prev[i]
            if p >= 0 and a_out_end[p] + a_gap[i] > ready:
                ready = a_out_end[p] + a_gap[i]
            c = a_cross[i]
            if c >= 0 and a_out_end[c] + a_cross_lat[i] > ready:
                ready = a_out_end[c] + a_cross_lat[i]
            if ready == neg_inf:  # nothing it waits for is in the trace: it stays
                s = a_start[i]
            else:
                d = a_dev[i]
                if d >= 0:  # no further into another stream's work than recorded
                    bound = a_out_end[d] if a_dev_end[i] else a_out_start[d]
                    if bound > ready:
                        ready = bound
                s = ready if ready > a_floor[i] else a_floor[i]
            a_out_start[i] = s
            a_out_end[i] = s + dur_l[i]
            continue
        lane = h_lane[i]
        t = h_time[i]
        k = anchor[i]
        if k >= 0:  # a burst on another thread: as long after the main thread's event
            T = h_out[k] + (t - h_time[k]) - since_anchor[i]
            if lane in lane_T and lane_T[lane] > T:
                T = lane_T[lane]
        elif lane not in lane_t:  # a lane's first timepoint stays where it was
            T = t - removed[i]
        else:
            delta = (t - lane_t[lane]) - (removed[i] - lane_r[lane])
            T = lane_T[lane] + delta
            if is_end[i] and release[i] >= 0:
                # A sync returns when the device work it waited for is done, plus the
                # call's own tail: its host part is at most that tail.
                T = lane_T[lane] + min(delta, tail[i])
                if not (no_wait and no_wait[i]):
                    T = max(T, a_out_end[release[i]] + tail[i])
            j = join[i]
            if j >= 0:  # it waited for another thread's burst: it returns after it
                T = max(lane_T[lane], h_out[j] + join_after[i])
        h_out[i] = T
        lane_t[lane], lane_T[lane], lane_r[lane] = t, T, removed[i]
    a_end = np.asarray(a_out_end)
    h = np.asarray(h_out)
    lo, hi = _windows(analysis, g, h, a_end)
    if scale is None or np.all(scale >= 1.0):
        # The device's work is what it was: no step gets shorter than its busy time.
        busy = np.asarray([w.device_busy_us for w in analysis.windows])
        if busy.shape == lo.shape:
            hi = np.maximum(hi, lo + busy)
    return Replayed(lo, hi, a_end=a_end, h_time=h)


def _windows(analysis: SpanAnalysis, g: ReplayGraph, h_out: np.ndarray,
             a_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The replayed windows, partitioned on the device side as the recorded ones are."""
    hs = analysis.host_steps
    if not len(hs):
        # One window: it starts where it did, and ends at the last replayed activity or
        # at the host's end (the time after its last timepoint kept as recorded).
        lo, hi = analysis.bounds
        end = float(a_end.max()) if a_end.size else -np.inf
        if g.h_time.size:
            last = int(np.argmax(g.h_time))
            end = max(end, float(h_out[last]) + float(hi[0]) - float(g.h_time[last]))
        elif not a_end.size:
            end = float(hi[0])
        return lo.copy(), np.asarray([max(end, float(lo[0]))])
    start = h_out[g.mark_start]
    end = h_out[g.mark_end]
    last = np.full(len(hs), np.nan)
    if a_end.size:
        steps = analysis.activity_step
        ok = steps >= 0
        np.fmax.at(last, steps[ok], a_end[ok])
    return device_partition(start, end, last)
