"""Replay the span's dependency graph (:mod:`.graph`), unchanged or with a change applied.

One pass over the graph in recorded order computes every event's replayed time: each
edge points at an event the recording shows earlier, so the pass never waits for one it
has not seen. The pass goes a stretch of the order at a time (:mod:`.stretches`): a long
stretch with numpy, each thread's and stream's times summed in the loop's order, so the
floats are the loop's; a short one node by node.

A change says which host time goes away (a DataLoader wait, the profiler's own work),
which syncs no longer wait, how much faster device activities run, and which activities
follow their stream's predecessor at another gap (a CUDA graph's).

**No free overlap.** A change that leaves every device activity's duration as it was
(host time removed, syncs freed, gaps closed) cannot make a step shorter than the device's
busy time in it: it saves at most the step's device idle time. The replay's streams keep
the overlap the recording shows (:mod:`.graph`); the step's wall is held to that bound
too, so work of another step moved into this one's idle time is not counted twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import Intervals, length_before
from tb_diagnostics.analysis.replay import grouped
from tb_diagnostics.analysis.replay.graph import ReplayGraph, replay_graph
from tb_diagnostics.analysis.replay.joins import thread_joins
from tb_diagnostics.analysis.replay.order import Nodes, Positions, positions
from tb_diagnostics.analysis.replay.stretches import MIN_VECTOR_NODES, run
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.steps import device_partition
from tb_diagnostics.trace.columns import bitwise_equal, constant


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


def same_change(a: Change, b: Change) -> bool:
    """Whether two changes are the same, bit for bit: one's replay is the other's (two
    cards may build one change, CUDA graphs and compile's graphs on a span with nothing
    to compile; a replay of a million steps is not made twice for it)."""
    if a is b:
        return True
    # The lanes in one order too: the replay takes each lane's removed time in turn.
    if a.no_wait != b.no_wait or list(a.removed_host) != list(b.removed_host):
        return False
    if not all(bitwise_equal(iv.start, b.removed_host[lane].start)
               and bitwise_equal(iv.end, b.removed_host[lane].end)
               for lane, iv in a.removed_host.items()):
        return False
    return bitwise_equal(a.device_scale, b.device_scale) and bitwise_equal(a.stream_gap,
                                                                     b.stream_gap)


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


def _zeros(n: int) -> np.ndarray:
    """``n`` zeros, read-only, in no memory: a change's per-timepoint figure that is the
    same everywhere (a change without removed host time or joins)."""
    return constant(0.0, n, np.float64)


def _removed_before(g: ReplayGraph, change: Change) -> tuple[np.ndarray | None, np.ndarray]:
    """Per host timepoint: the removed host time on its lane before it (None where the
    change removes none); and, for the first timepoint of a burst on another thread, the
    removed time on its lane and on the main thread's between its anchor and it (the host
    time that burst no longer waits for)."""
    n = g.h_time.shape[0]
    lanes = {lane: iv for lane, iv in change.removed_host.items() if len(iv)}
    out = None
    for lane, iv in lanes.items():
        on = np.flatnonzero(g.h_lane == lane)
        if on.size:
            if out is None:
                out = np.zeros(n)
            out[on] = length_before(iv, g.h_time[on])
    burst = np.flatnonzero(g.h_anchor >= 0)
    if not (burst.size and lanes):
        return out, _zeros(n)
    since_anchor = np.zeros(n)
    k = g.h_anchor[burst]
    main = int(g.h_lane[k[0]])
    for lane in sorted_sets.unique(g.h_lane[burst]).tolist():
        ivs = [iv for x, iv in lanes.items() if x in (lane, main)]
        if not ivs:
            continue
        both = ivs[0] if len(ivs) == 1 else ivs[0] | ivs[1]
        on = g.h_lane[burst] == lane
        at, t0 = g.h_time[burst[on]], g.h_time[k[on]]
        since_anchor[burst[on]] = length_before(both, at) - length_before(both, t0)
    return out, since_anchor


def _join_after(analysis: SpanAnalysis, g: ReplayGraph, change: Change) -> np.ndarray:
    """Per host timepoint that waited for another thread's burst (:mod:`.joins`): the time
    from the burst's last timepoint to it, less the host time the change removes there
    (the rest of the burst on its thread, then the main thread's own time); 0 elsewhere."""
    nodes, j_last, j_end = thread_joins(analysis)
    if not nodes.size:
        return _zeros(g.h_time.shape[0])
    after = np.zeros(g.h_time.shape[0])
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
    return after


@computed
def replay_positions(analysis: SpanAnalysis) -> Positions:
    """The span's replay graph in visit order (:mod:`.stretches`), shared by every change."""
    g = replay_graph(analysis)
    nodes, j_last, _ = thread_joins(analysis)
    a_lane = analysis.model.lane[analysis.model.device_activity_rows].astype(np.int64)
    return positions(g, a_lane, nodes, j_last)


def _run(analysis: SpanAnalysis, change: Change | None, min_vector: int) -> np.ndarray:
    """Every node's replayed value by position (:func:`.stretches.run`)."""
    g = replay_graph(analysis)
    pos = replay_positions(analysis)
    change = change or Change()
    removed, since_anchor = _removed_before(g, change)
    scale = change.device_scale
    # Collectives wait on the other ranks: no change of this rank's work scales them.
    dur = g.a_dur if scale is None else np.where(g.a_fixed, g.a_dur, g.a_dur * scale)
    gap = g.a_gap
    if change.stream_gap is not None:
        gap = np.where(np.isnan(change.stream_gap), g.a_gap, change.stream_gap)
    n_h = g.h_time.shape[0]
    waits = constant(True, n_h, bool)  # no sync freed
    if change.no_wait:
        # A table by model row (an inferred step's mark has row -1: never freed).
        rows = np.fromiter(change.no_wait, dtype=np.int64, count=len(change.no_wait))
        freed = np.zeros(len(analysis.model) + 1, dtype=bool)
        freed[rows[(rows >= 0) & (rows < len(analysis.model))]] = True
        waits = ~freed[g.h_row]
    # The host time since a thread's previous timepoint (less what the change removes) is
    # computed per stretch, from the recorded times (order.Nodes.h_delta).
    nodes = Nodes(p=pos, h_time=g.h_time, h_removed=removed, h_since=since_anchor,
                  h_waits=waits, h_join_after=_join_after(analysis, g, change),
                  a_gap=np.asarray(gap, dtype=np.float64),
                  a_dur=np.asarray(dur, dtype=np.float64))
    return run(nodes, min_vector)


def _device_bound(analysis: SpanAnalysis, change: Change | None, lo: np.ndarray,
                  hi: np.ndarray) -> np.ndarray:
    """``hi`` held to the bound on overlap (the module docstring)."""
    scale = None if change is None else change.device_scale
    if scale is None or np.all(scale >= 1.0):
        # The device's work is what it was: no step gets shorter than its busy time.
        busy = np.asarray(analysis.windows.columns.device_busy_us, dtype=np.float64)
        if busy.shape == lo.shape:
            np.maximum(hi, lo + busy, out=hi)
    return hi


def replay(analysis: SpanAnalysis, change: Change | None = None,
           min_vector: int = MIN_VECTOR_NODES) -> Replayed:
    """Every window's replayed bounds with ``change`` applied (none: the recording's own
    dependencies replayed). ``min_vector``: the shortest stretch of the order replayed with
    numpy (:mod:`.stretches`; the floats are the same either way)."""
    pos = replay_positions(analysis)
    v = _run(analysis, change, min_vector)
    a_end = v[pos.a_pos]
    h = v[pos.h_pos]
    del v
    lo, hi = _windows(analysis, replay_graph(analysis), h.__getitem__, a_end)
    return Replayed(lo, _device_bound(analysis, change, lo, hi), a_end=a_end, h_time=h)


def replay_wall_us(analysis: SpanAnalysis, change: Change | None = None) -> np.ndarray:
    """Every window's replayed wall: :func:`replay`'s ``wall_us``, the same floats, without
    the replayed times of every timepoint (the windows read their marks' only)."""
    pos = replay_positions(analysis)
    v = _run(analysis, change, MIN_VECTOR_NODES)
    a_end = v[pos.a_pos]

    def h_at(k: np.ndarray | int) -> np.ndarray:
        return v[pos.h_pos[k]]

    lo, hi = _windows(analysis, replay_graph(analysis), h_at, a_end)
    hi = _device_bound(analysis, change, lo, hi)
    return np.subtract(hi, lo, out=hi)


def _windows(analysis: SpanAnalysis, g: ReplayGraph, h_out: Callable[[Any], Any],
             a_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The replayed windows, partitioned on the device side as the recorded ones are
    (``h_out``: the replayed times of the timepoints it is given)."""
    hs = analysis.host_steps
    if not len(hs):
        # One window: it starts where it did, and ends at the last replayed activity or
        # at the host's end (the time after its last timepoint kept as recorded).
        lo, hi = analysis.bounds
        end = float(a_end.max()) if a_end.size else -np.inf
        if g.h_time.size:
            last = int(np.argmax(g.h_time))
            end = max(end, float(h_out(last)) + float(hi[0]) - float(g.h_time[last]))
        elif not a_end.size:
            end = float(hi[0])
        return lo.copy(), np.asarray([max(end, float(lo[0]))])
    start = h_out(g.mark_start)
    end = h_out(g.mark_end)
    last = np.full(len(hs), np.nan)
    if a_end.size:
        steps = analysis.activity_step
        ok = steps >= 0
        grouped.at(np.fmax, last, steps[ok], a_end[ok])
    return device_partition(start, end, last)
