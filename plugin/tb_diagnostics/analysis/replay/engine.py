"""Replay the span's dependency graph (:mod:`.graph`), unchanged or with a change applied.

One pass over the graph in recorded order computes every event's replayed time: each
edge points at an event the recording shows earlier, so the pass never waits for one it
has not seen. A change says which host time goes away (a DataLoader wait, the profiler's
own work), which syncs no longer wait, and how much faster device activities run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, length_before
from tb_diagnostics.analysis.replay.graph import SYNC_END, ReplayGraph, replay_graph
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.steps import device_partition


@dataclass(frozen=True)
class Change:
    """What a fix changes, in terms the replay understands."""

    #: Host time that disappears, per host lane (e.g. the DataLoader's wait).
    removed_host: dict[int, Intervals] = field(default_factory=dict)
    #: Sync calls (model rows) that no longer wait for the device.
    no_wait: frozenset[int] = frozenset()
    #: Per device activity (``model.device_activity_rows`` order): duration factor.
    device_scale: np.ndarray | None = None


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


def _removed_before(g: ReplayGraph, change: Change) -> np.ndarray:
    """Per host timepoint: the removed host time on its lane before it."""
    out = np.zeros(g.h_time.shape[0])
    for lane, iv in change.removed_host.items():
        on = np.flatnonzero(g.h_lane == lane)
        if on.size and len(iv):
            out[on] = length_before(iv, g.h_time[on])
    return out


def replay(analysis: SpanAnalysis, change: Change | None = None) -> Replayed:
    g = replay_graph(analysis)
    change = change or Change()
    removed = _removed_before(g, change).tolist()
    dur = g.a_dur if change.device_scale is None else g.a_dur * change.device_scale
    h_time = g.h_time.tolist()
    h_lane = g.h_lane.tolist()
    is_end = (g.h_kind == SYNC_END).tolist()
    release = g.h_release.tolist()
    tail = g.h_tail.tolist()
    anchor = g.h_anchor.tolist()
    no_wait = [r in change.no_wait for r in g.h_row.tolist()] if change.no_wait else None
    a_start, a_launch = g.a_start.tolist(), g.a_launch.tolist()
    a_prev, a_cross, a_slack = g.a_prev.tolist(), g.a_cross.tolist(), g.a_slack.tolist()
    dur_l = dur.tolist()
    h_out = [0.0] * len(h_time)
    a_out_start = [0.0] * len(a_start)
    a_out_end = [0.0] * len(a_start)
    lane_t: dict[int, float] = {}  # recorded time of each lane's last timepoint
    lane_T: dict[int, float] = {}  # its replayed time
    lane_r: dict[int, float] = {}  # removed host time before it
    for dev, i in zip(g.order_device.tolist(), g.order_index.tolist(), strict=True):
        if dev:
            ready = -np.inf
            j = a_launch[i]
            if j >= 0:
                ready = h_out[j]
            p = a_prev[i]
            if p >= 0 and a_out_end[p] > ready:
                ready = a_out_end[p]
            c = a_cross[i]
            if c >= 0 and a_out_end[c] > ready:
                ready = a_out_end[c]
            s = a_start[i] if ready == -np.inf else ready + a_slack[i]
            a_out_start[i] = s
            a_out_end[i] = s + dur_l[i]
            continue
        lane = h_lane[i]
        t = h_time[i]
        k = anchor[i]
        if k >= 0:  # a burst on another thread: as long after the main thread's event
            T = h_out[k] + (t - h_time[k])
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
        h_out[i] = T
        lane_t[lane], lane_T[lane], lane_r[lane] = t, T, removed[i]
    a_end = np.asarray(a_out_end)
    h = np.asarray(h_out)
    return Replayed(*_windows(analysis, g, h, a_end), a_end=a_end, h_time=h)


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
