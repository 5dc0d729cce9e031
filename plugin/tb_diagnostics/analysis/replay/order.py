"""The replay graph (:mod:`.graph`) in visit order, for the pass a stretch at a time
(:mod:`.stretches`): every node by its position in the order, every edge as the position
of the node it points to.

An edge into a node the order visits later (a kernel recorded a µs before its launch
call) points one slot past the end, which holds 0.0: the replay's loop read 0.0 there, the
slot it had not written yet, and so does every stretch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.replay.graph import SYNC_END, ReplayGraph
from tb_diagnostics.trace.columns import one_value


@dataclass(frozen=True)
class Positions:
    """The replay graph in visit order, as no change alters it: each node's position, and
    every edge as the position of the node it points to (-1: none; ``n``: a node visited
    later, read as 0.0, as the loop read a slot it had not written yet)."""

    n: int  # host timepoints and device activities together
    dev: np.ndarray  # per position: a device activity (else a host timepoint)
    node: np.ndarray  # per position: its index among its kind
    h_pos: np.ndarray  # position of each host timepoint
    a_pos: np.ndarray  # position of each device activity
    h_lane: np.ndarray
    h_pred: np.ndarray  # the previous timepoint on its thread
    h_pred_node: np.ndarray  # the same, as a timepoint index
    h_anchor: np.ndarray
    h_anchor_after: np.ndarray  # recorded time from the anchor to it
    h_release: np.ndarray  # a sync's return: the activity that released it
    h_tail: np.ndarray
    h_join: np.ndarray
    a_lane: np.ndarray
    a_launch: np.ndarray
    a_lat: np.ndarray
    a_prev: np.ndarray
    a_cross: np.ndarray
    a_cross_lat: np.ndarray
    a_dev: np.ndarray
    a_dev_end: np.ndarray  # bool
    a_floor: np.ndarray
    a_start: np.ndarray  # recorded: where an activity that waits for nothing stays
    a_any: np.ndarray  # bool: it has a launch, a predecessor or a cross-stream wait
    # Per position, the latest node on another chain it reads (its launch aside) that no
    # change frees, or -1; per host timepoint, the activity its sync waits for unless the
    # change frees it (:func:`_cut_edges`).
    cut_src: np.ndarray
    h_sync_src: np.ndarray
    #: Per host timepoint: its value is not the thread's previous one plus the time
    #: between (a thread's first, an anchor, a join, a sync's return).
    h_special: np.ndarray


@dataclass(frozen=True)
class Nodes:
    """A replay's inputs: the graph's positions and what the change makes of them."""

    p: Positions
    h_time: np.ndarray  # recorded
    #: Per host timepoint, the removed host time on its lane before it; None where the
    #: change removes none (the recorded times then stand, bit for bit).
    h_removed: np.ndarray | None
    h_since: np.ndarray  # removed host time since the anchor
    h_waits: np.ndarray  # bool: a sync still waits for the activity that released it
    h_join_after: np.ndarray
    a_gap: np.ndarray
    a_dur: np.ndarray

    # The two below are computed for the timepoints a stretch visits, not kept for all:
    # two arrays of every timepoint less per replay (10⁶ steps: 4 M timepoints, 32 MB each).

    def h_first(self, ix: np.ndarray) -> np.ndarray:
        """Timepoints ``ix``' recorded times less the removed (a thread's first stays
        there)."""
        t = self.h_time[ix]
        if self.h_removed is not None:
            t -= self.h_removed[ix]
        return t

    def h_delta(self, ix: np.ndarray) -> np.ndarray:
        """The host time of timepoints ``ix`` since their thread's previous one, less the
        removed (0.0 for a thread's first)."""
        pred = self.p.h_pred_node[ix]
        has = pred >= 0
        k = np.where(has, pred, 0)
        d = self.h_time[ix] - self.h_time[k]
        if self.h_removed is not None:
            r = self.h_removed
            d -= r[ix] - r[k]
        return np.where(has, d, 0.0)


def positions(g: ReplayGraph, a_lane: np.ndarray, join_node: np.ndarray,
              join_last: np.ndarray) -> Positions:
    """:class:`Positions` of graph ``g`` (``a_lane``: each activity's stream; the joins:
    :func:`.joins.thread_joins`'s nodes and the timepoints they wait for)."""
    dev, node = g.order_device, g.order_index
    n_h, n_a = g.h_time.shape[0], g.a_start.shape[0]
    n = n_h + n_a
    # Positions fit 32 bits but on spans of over 2**31 nodes: half the memory they keep.
    ix = np.int32 if n < 2**31 - 1 else np.int64
    at = np.arange(n, dtype=ix)
    h_pos = np.empty(n_h, dtype=ix)
    h_pos[node[~dev]] = at[~dev]
    a_pos = np.empty(n_a, dtype=ix)
    a_pos[node[dev]] = at[dev]
    # A thread's timepoints in visit order, one after another.
    hp = at[~dev]
    hid = node[~dev]
    by_lane = np.argsort(g.h_lane[hid], kind="stable")
    same = g.h_lane[hid[by_lane[1:]]] == g.h_lane[hid[by_lane[:-1]]]
    h_pred = np.full(n_h, -1, dtype=ix)
    h_pred[hid[by_lane[1:]][same]] = hp[by_lane[:-1]][same]
    h_pred_node = np.full(n_h, -1, dtype=ix)
    h_pred_node[hid[by_lane[1:]][same]] = hid[by_lane[:-1]][same]

    def edge(to_pos: np.ndarray, target: np.ndarray, own: np.ndarray) -> np.ndarray:
        r = np.full(target.shape[0], -1, dtype=ix)
        on = target >= 0
        r[on] = to_pos[target[on]]
        r[r > own] = n  # visited later: the loop read 0.0
        return r

    join = np.full(n_h, -1, dtype=ix)
    join[join_node] = join_last
    anchor = g.h_anchor
    after = np.zeros(n_h)
    on = anchor >= 0
    after[on] = g.h_time[on] - g.h_time[anchor[on]]
    release = np.where(g.h_kind == SYNC_END, g.h_release, -1)
    h_anchor, h_release = edge(h_pos, anchor, h_pos), edge(a_pos, release, h_pos)
    h_join = edge(h_pos, join, h_pos)
    a_cross, a_dev = edge(a_pos, g.a_cross, a_pos), edge(a_pos, g.a_dev, a_pos)
    a_any = (g.a_launch >= 0) | (g.a_prev >= 0) | (g.a_cross >= 0)

    def real(r: np.ndarray) -> np.ndarray:
        return np.where(r < n, r, -1)  # a node visited later is read as 0.0: no wait

    # The precedence of the replay's host rule: an anchor, a thread's first timepoint, a
    # join, a sync's return.
    later = (h_anchor < 0) & (h_pred >= 0)
    h_cut = np.where(later & (h_join >= 0), real(h_join), real(h_anchor))
    h_sync_src = np.where(later & (h_join < 0), real(h_release), -1)
    cut_src = np.full(n, -1, dtype=ix)
    cut_src[h_pos] = h_cut
    cut_src[a_pos] = np.maximum(real(a_cross), np.where(a_any, real(a_dev), -1))
    h_special = (h_anchor >= 0) | (h_pred < 0) | (h_join >= 0) | (h_release >= 0)
    own = dict(
        n=n, dev=dev, node=node, h_pos=h_pos, a_pos=a_pos, h_lane=g.h_lane, h_pred=h_pred,
        h_pred_node=h_pred_node, h_anchor=h_anchor, h_anchor_after=after,
        h_release=h_release, h_tail=g.h_tail, h_join=h_join, a_lane=a_lane,
        a_launch=edge(h_pos, g.a_launch, a_pos), a_lat=g.a_lat,
        a_prev=edge(a_pos, g.a_prev, a_pos), a_cross=a_cross,
        a_cross_lat=g.a_cross_lat, a_dev=a_dev, a_dev_end=g.a_dev_end,
        a_floor=g.a_floor, a_start=g.a_start, a_any=a_any, cut_src=cut_src,
        h_sync_src=h_sync_src, h_special=h_special)
    # A column of one value kept as that value (trace.columns.one_value): a span without
    # syncs, anchors, joins or waits across streams holds none of their edges per node
    # through every replay (10⁶ steps: 60 MB).
    return Positions(**{k: one_value(v) if isinstance(v, np.ndarray) else v
                        for k, v in own.items()})
