"""Host threads that wait for another thread: the joins of the replay graph.

``loss.backward()`` on CUDA tensors runs the backward functions on the autograd engine's
device thread while the calling thread blocks and records nothing. The replay graph
(:mod:`.graph`) links the start of each burst on another thread to the main thread
(its *anchor*); this module links the other way: the main thread's first timepoint after
such a wait to the burst it waited for. The replay (:mod:`.engine`) times the main
thread's return from the burst's replayed end, and the critical path
(:mod:`tb_diagnostics.analysis.critpath`) runs through the burst, not through the silence.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics.analysis.replay.graph import SYNC_END, ReplayGraph, replay_graph
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.trace.columns import gather
from tb_diagnostics.trace.model import NO_ID


def top_level(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """The outermost host row enclosing each row (itself when it has none)."""
    from tb_diagnostics.analysis.views.hierarchy import nearest_marked

    m = analysis.model
    return nearest_marked(m.parent, m.parent < 0)[rows].astype(np.int64)


def main_lane(analysis: SpanAnalysis, g: ReplayGraph) -> int:
    """The main thread: the steps' (the busiest thread with timepoints, without steps)."""
    m = analysis.model
    hs = analysis.host_steps
    if len(hs):
        return int(m.lane[hs.rows[0]])
    if g.h_time.shape[0]:
        return int(np.bincount(g.h_lane).argmax())
    host_rows = m.host_rows
    return int(np.bincount(m.lane[host_rows]).argmax()) if host_rows.size else NO_ID


@computed
def thread_joins(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The main thread's timepoints that waited for another thread: ``(nodes, the other
    thread's last timepoint before each, the end of that timepoint's burst)``.

    ``loss.backward()`` on CUDA tensors runs the backward functions on the autograd
    engine's device thread while the calling thread blocks, recording nothing (a label
    such as ``## backward ##`` around the call only grows). So a main-thread timepoint
    whose previous one on its thread anchors bursts on other threads (they started after
    it: :attr:`ReplayGraph.h_anchor`), with nothing recorded on the main thread from that
    timepoint to the bursts' end, and the bursts ending before it, waited for them: the
    latest-ending one binds, not the host order across the silence. A thread that keeps
    recording while another runs (a pin-memory thread, a logger) joins nothing."""
    m = analysis.model
    g = replay_graph(analysis)
    none = np.zeros(0, dtype=np.int64)
    h_lane, h_time = g.h_lane, g.h_time
    main = main_lane(analysis, g)
    others = np.flatnonzero(h_lane != main)
    on_main = np.flatnonzero(h_lane == main)
    if not others.size or on_main.size < 2:
        return none, none, np.zeros(0)
    # Bursts: runs of one top-level row on one thread (nodes are in time order).
    others = others[np.argsort(h_lane[others], kind="stable")]
    top = top_level(analysis, g.h_row[others])
    last = np.ones(others.size, dtype=bool)
    last[:-1] = (top[1:] != top[:-1]) | (h_lane[others][1:] != h_lane[others][:-1])
    first = np.ones(others.size, dtype=bool)
    first[1:] = last[:-1]
    anchor = g.h_anchor[others[first]]
    # A burst that follows its thread's previous one (no anchor of its own: graph) is part
    # of the same wait: the last anchor before it on its thread.
    b_lane = h_lane[others[first]]
    idx = np.where(anchor >= 0, np.arange(anchor.size), -1)
    np.maximum.accumulate(idx, out=idx)
    new_lane = np.ones(anchor.size, dtype=bool)
    new_lane[1:] = b_lane[1:] != b_lane[:-1]
    lane_first = np.maximum.accumulate(np.where(new_lane, np.arange(anchor.size), 0))
    anchor = np.where(idx >= lane_first, anchor[np.maximum(idx, 0)], NO_ID)
    b_last, b_end = others[last], m.end[top[last]]
    ok = anchor >= 0
    anchor, b_last, b_end = anchor[ok], b_last[ok], b_end[ok]
    # The main timepoint after each anchor, which the burst must end before.
    pos = np.searchsorted(on_main, anchor)
    nxt = gather(on_main, pos + 1, NO_ID).astype(np.int64)
    ok = (nxt >= 0) & (b_end <= gather(h_time, nxt, -np.inf)) & (b_end > h_time[anchor])
    # Nothing recorded on the main thread from the anchor to the burst's end.
    host = m.host_rows
    starts = np.sort(m.start[host[m.lane[host] == main]])
    busy = (np.searchsorted(starts, b_end, side="left")
            > np.searchsorted(starts, h_time[anchor], side="right"))
    ok &= ~busy
    nxt, b_last, b_end = nxt[ok], b_last[ok], b_end[ok]
    if not nxt.size:
        return none, none, np.zeros(0)
    # Per waiting timepoint, the burst that ended last (its previous timepoint is the anchor).
    order = np.lexsort((b_end, nxt))
    nxt, b_last, b_end = nxt[order], b_last[order], b_end[order]
    tail = np.ones(nxt.size, dtype=bool)
    tail[:-1] = nxt[1:] != nxt[:-1]
    nodes = nxt[tail]
    # A sync's return binds to the device work that released it instead.
    keep = ~((g.h_kind[nodes] == SYNC_END) & (g.h_release[nodes] >= 0))
    return nodes[keep], b_last[tail][keep], b_end[tail][keep]


__all__ = ["main_lane", "thread_joins", "top_level"]
