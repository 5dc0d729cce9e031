"""The binding edge of every event of the replay graph, and the time it puts on the path.

Every node of :func:`~tb_diagnostics.analysis.replay.graph.replay_graph` (a host
timepoint or a device activity) gets the one predecessor whose finish decided its start
in the recording, and up to three *pieces*: the stretches of time, latest first, that lie
between that predecessor's finish and the node's own finish. A piece is ``[t0, t1)`` where
``t1`` is the next piece's ``t0`` (or the node's finish for the first); the walk
(:mod:`.walk`) clips them to the step.

- **device activity**: the activity itself (``device``, or ``comm`` for a collective:
  :attr:`SpanAnalysis.comm_activity_mask`), then the wait before it (``latency``) back to
  the binding one of its launch call's start, its stream's previous activity's end, or
  the other stream's activity it waited for. Which one binds is the one whose time plus
  the device's own delay after it (the launch latency, the back-to-back gap, both
  measured on the trace by the graph) is latest: a kernel launched 3 µs after its
  stream's previous kernel ended, and started 8 µs after its launch, waited for its
  launch, not for the stream;
- **host timepoint** (a launch call's start, a sync's start or return, a step mark): the
  host time since the previous timepoint on its thread (``host``; split later into
  ``input`` inside the DataLoader and ``comm`` inside a collective). Time that ends at a
  launch or a sync call is the dispatch of the op that made the call from the op's start
  on, the time before it its caller's. A sync's return binds to the device activity that
  released it (the wait itself is not on the path: the device work it waited for is),
  with the call's return after it as ``host``; the first timepoint of a burst on another
  thread binds to its main-thread anchor, as the replay has it (a burst whose thread was
  still busy with its previous one has none: host order); and the main thread's first timepoint
  after it blocked on other threads (``backward()`` waiting for the autograd engine's
  thread) binds to the burst that ended last (:mod:`..replay.joins`), with that burst's
  tail and the main thread's time since as its pieces.

A node without a predecessor in the trace (a thread's first timepoint, an activity whose
launch was not recorded) ends the walk. Predecessors always come earlier in the graph's
visit order: an edge that would not (a kernel recorded starting before its launch call,
by clock skew) is dropped, so the walk can never loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tb_diagnostics.analysis.replay.graph import ReplayGraph, replay_graph
from tb_diagnostics.analysis.replay.host_points import LAUNCH, MARK, SYNC_END, SYNC_START
from tb_diagnostics.analysis.replay.joins import main_lane, thread_joins
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.columns import gather
from tb_diagnostics.trace.model import NO_ID

#: Segment kinds, as codes and as the JSON names them.
HOST, INPUT, DEVICE, COMM, LATENCY = 0, 1, 2, 3, 4
KIND_NAMES = ("host", "input", "device", "comm", "latency")
#: Pieces per node, at most.
PIECES = 3


#: Pieces every node has room for in the ``(2, nodes)`` arrays; the third is the few
#: nodes' that have one (a launch after a wait for another thread), kept apart: a third
#: row for every node was 68 MB of a 10⁶-step span's, all NaN.
DENSE = 2


@dataclass(frozen=True)
class PathEdges:
    """Per node (host timepoints, then device activities): the binding predecessor and
    the pieces of time back to it, latest first; an absent piece has ``t0`` NaN. The
    first :data:`DENSE` pieces are ``(DENSE, nodes)`` arrays, the third is ``third``'s:
    ``(nodes, t0, row, lane)``, its nodes ascending, its kind ``host``."""

    n_host: int
    pred: np.ndarray  # node index of the binding predecessor, or -1
    t0: np.ndarray  # (DENSE, nodes) start of each piece, µs
    kind: np.ndarray  # (DENSE, nodes) HOST / DEVICE / COMM / LATENCY
    row: np.ndarray  # (DENSE, nodes) model row the piece belongs to
    lane: np.ndarray  # (DENSE, nodes) host lane of a host piece (split by input/comm), or -1
    third: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    reach: np.ndarray  # per node: the earliest of its pieces' starts
    h_time: np.ndarray  # the graph's host timepoint times
    h_lane: np.ndarray
    main_lane: int

    def only(self, seen: np.ndarray) -> PathEdges:
        """The pieces of the nodes ``seen`` (a mask over the nodes) only, renumbered in
        order; no predecessors or reach (a walk's: what its segments are cut from)."""
        keep = np.flatnonzero(seen)
        x_node, x_t0, x_row, x_lane = self.third
        x_in = seen[x_node]
        # A node's new number: how many seen nodes come before it (a count over every
        # node: only where a node has a third piece).
        x_new = (np.cumsum(seen, dtype=np.int64)[x_node[x_in]] - 1 if x_node.size
                 else np.zeros(0, dtype=np.int64))
        return replace(self, pred=self.pred[:0].copy(), reach=self.reach[:0].copy(),
                       t0=self.t0[:, keep], kind=self.kind[:, keep], row=self.row[:, keep],
                       lane=self.lane[:, keep],
                       third=(x_new, x_t0[x_in], x_row[x_in], x_lane[x_in]))

    def pieces(self, nodes: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(t0, kind, row, lane)`` of ``nodes``' pieces, each ``(nodes, PIECES)``."""
        k = nodes.shape[0]
        t0 = np.full((k, PIECES), np.nan)
        kind = np.full((k, PIECES), HOST, dtype=self.kind.dtype)
        row = np.full((k, PIECES), NO_ID, dtype=self.row.dtype)
        lane = np.full((k, PIECES), NO_ID, dtype=self.lane.dtype)
        t0[:, :DENSE] = self.t0[:, nodes].T
        kind[:, :DENSE] = self.kind[:, nodes].T
        row[:, :DENSE] = self.row[:, nodes].T
        lane[:, :DENSE] = self.lane[:, nodes].T
        x_node, x_t0, x_row, x_lane = self.third
        if x_node.size and k:
            j = np.searchsorted(x_node, nodes).clip(max=x_node.size - 1)
            hit = np.flatnonzero(x_node[j] == nodes)
            j = j[hit]
            t0[hit, DENSE], row[hit, DENSE], lane[hit, DENSE] = x_t0[j], x_row[j], x_lane[j]
        return t0, kind, row, lane


def _clear_third(out: dict[str, object], nodes: np.ndarray | slice) -> None:
    """No third piece for ``nodes`` (a mask or indices of all nodes)."""
    x_node, x_t0, _, _ = out["third"]  # type: ignore[misc]
    if x_node.size:
        drop = np.zeros(out["pred"].shape[0], dtype=bool)  # type: ignore[attr-defined]
        drop[nodes] = True
        x_t0[drop[x_node]] = np.nan


def _owner(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """For calls (launches, syncs): the op whose dispatch made each call (the innermost op
    above it), else its enclosing event, else the call itself."""
    from tb_diagnostics.analysis.views.hierarchy import innermost_op

    m = analysis.model
    if not rows.size:
        return rows.copy()
    inner = innermost_op(analysis)[rows].astype(np.int64)
    par = m.parent[rows].astype(np.int64)
    return np.where(inner >= 0, inner, np.where(par >= 0, par, rows))


def _enclosing(analysis: SpanAnalysis, rows: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The innermost event at or above each row (on its thread) that started by ``t``:
    who the host time from ``t`` to the row's start belongs to. The outermost one when
    none did (the thread's time before any recorded event)."""
    m = analysis.model
    out = rows.astype(np.int64, copy=True)
    todo = np.flatnonzero(m.start[out] > t)
    while todo.size:  # one level per pass, only the rows still climbing
        up = m.parent[out[todo]].astype(np.int64)
        ok = up >= 0
        todo = todo[ok]
        out[todo] = up[ok]
        todo = todo[m.start[out[todo]] > t[todo]]
    return out


def _mark_owners(analysis: SpanAnalysis, g: ReplayGraph,
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The host timepoints that are step marks and the step row the time before each
    belongs to, as ``(timepoints, rows)`` to set in this order (a timepoint that both
    ends a step and starts the next is the start's): a step's end mark, that step; a
    step's start mark, the step before, if any."""
    rows = analysis.host_steps.rows.astype(np.int64)
    if not rows.size:
        return []
    ok = g.mark_end >= 0
    ends = (g.mark_end[ok], rows[ok])
    ok = g.mark_start >= 0
    before = np.concatenate([rows[:1], rows[:-1]])
    return [ends, (g.mark_start[ok], before[ok])]


def _host_pieces(analysis: SpanAnalysis, g: ReplayGraph, pos: np.ndarray,
                 out: dict[str, np.ndarray]) -> None:
    m = analysis.model
    n_h = g.h_time.shape[0]
    if not n_h:
        return
    t0, kind, row, lane, pred = out["t0"], out["kind"], out["row"], out["lane"], out["pred"]
    h_lane, h_time, h_row = g.h_lane, g.h_time, g.h_row
    kind[:, :n_h] = HOST
    # The previous timepoint on each thread (host order).
    prev = _previous_on_lane(h_lane, pred.dtype)
    has_prev = prev >= 0
    if h_lane.strides == (0,) and n_h:  # one thread (a constant column): the one before
        prev_t = np.empty(n_h)
        prev_t[0] = np.nan
        prev_t[1:] = h_time[:-1]
    else:
        prev_t = gather(h_time, prev, np.nan)

    # A main-thread timepoint after a wait for another thread: the time since that
    # thread's burst ended, then the burst's tail (below).
    joined, j_last, j_end = thread_joins(analysis)
    prev_t[joined] = j_end
    prev[joined] = j_last

    # Host order: the time since the previous timepoint on the thread.
    pred[:n_h] = prev
    calls = (g.h_kind == LAUNCH) | (g.h_kind == SYNC_START)
    at = np.flatnonzero(calls & has_prev)
    own = _owner(analysis, h_row[at])
    abv = _enclosing(analysis, own, prev_t[at])
    split = np.maximum(m.start[own], prev_t[at])
    t0[0, at], row[0, at], lane[0, at] = split, own, h_lane[at]
    t0[1, at], row[1, at], lane[1, at] = prev_t[at], abv, h_lane[at]
    del at, own, abv, split
    other = np.flatnonzero(has_prev & ~calls)
    # Named after their own row (a sync's return: the call), a step mark's after the step
    # its time belongs to: set where they are, no column of every timepoint's owner.
    t0[0, other], row[0, other], lane[0, other] = prev_t[other], h_row[other], h_lane[other]
    del other, prev_t
    marked = has_prev & ~calls & (g.h_kind == MARK)
    for at, owner in _mark_owners(analysis, g):
        sel = marked[at]
        row[0, at[sel]] = owner[sel]
    del marked
    if joined.size:  # the other thread's time from its last timepoint to its burst's end
        # (after a call's two pieces: the third)
        two = calls[joined]
        one, j1 = joined[~two], j_last[~two]
        t0[1, one], row[1, one], lane[1, one] = h_time[j1], _owner(analysis, h_row[j1]), h_lane[j1]
        x, jx = joined[two], j_last[two]
        out["third"] = (x.astype(np.int64), h_time[jx],
                        _owner(analysis, h_row[jx]).astype(row.dtype),
                        h_lane[jx].astype(lane.dtype))

    # A sync that waited returns after the activity that released it.
    rel = np.flatnonzero((g.h_kind == SYNC_END) & (g.h_release >= 0))
    if rel.size:
        r = g.h_release[rel]
        r_end = g.a_start[r] + g.a_dur[r]
        t0[:, rel] = np.nan
        _clear_third(out, rel)
        t0[0, rel], row[0, rel], lane[0, rel] = r_end, h_row[rel], h_lane[rel]
        pred[rel] = n_h + r
    # The first timepoint of a burst on another thread: its anchor on the main thread.
    burst = np.flatnonzero(g.h_anchor >= 0)
    if burst.size:
        from tb_diagnostics.analysis.views.hierarchy import nearest_marked

        k = g.h_anchor[burst]
        top = nearest_marked(m.parent, m.parent < 0)[h_row[burst]].astype(np.int64)
        bs = np.clip(m.start[top], h_time[k], h_time[burst])
        t0[:, burst] = np.nan
        _clear_third(out, burst)
        t0[0, burst], row[0, burst], lane[0, burst] = bs, top, h_lane[burst]
        anchor_owner = _owner(analysis, h_row[k])
        t0[1, burst], row[1, burst], lane[1, burst] = h_time[k], anchor_owner, h_lane[k]
        pred[burst] = k
    _keep_earlier(pred, pos, 0, n_h)


def _previous_on_lane(h_lane: np.ndarray, dtype: type) -> np.ndarray:
    """Per timepoint, the one before it on its thread, or -1; a span whose timepoints
    are all on one thread (the graph keeps its lanes as a constant) by position alone,
    no sort and scatter of 3 M timepoints."""
    n = h_lane.shape[0]
    if h_lane.strides == (0,) and n:
        return np.arange(-1, n - 1, dtype=dtype)
    by_lane = np.argsort(h_lane, kind="stable")
    prev = np.full(n, NO_ID, dtype=dtype)
    same = h_lane[by_lane[1:]] == h_lane[by_lane[:-1]]
    prev[by_lane[1:][same]] = by_lane[:-1][same]
    return prev


def _activity_pieces(analysis: SpanAnalysis, g: ReplayGraph, pos: np.ndarray,
                     out: dict[str, np.ndarray]) -> None:
    m = analysis.model
    n_h, n_a = g.h_time.shape[0], g.a_start.shape[0]
    if not n_a:
        return
    acts = m.device_activity_rows.astype(np.int64)
    sl = slice(n_h, n_h + n_a)
    t0, kind, row, pred = out["t0"], out["kind"], out["row"], out["pred"]
    a_start = g.a_start
    a_end = a_start + g.a_dur
    kind[0, sl] = np.where(analysis.comm_activity_mask, COMM, DEVICE)
    t0[0, sl], row[0, sl] = a_start, acts

    # The candidate edges: their time, and their time plus the device's own delay after.
    cands = []
    if g.a_launch.size:
        ok = g.a_launch >= 0
        t = gather(g.h_time, g.a_launch, -np.inf)
        cands.append((t, t + g.launch_latency_us, g.a_launch,
                      np.where(ok, m.launcher[acts], acts)))
    for other in (g.a_prev, g.a_cross):
        ok = other >= 0
        t = gather(a_end, other, -np.inf)
        cands.append((t, t + g.stream_gap_us, np.where(ok, n_h + other, NO_ID), acts))
    score = np.stack([c[1] for c in cands])
    best = np.argmax(score, axis=0)
    has = np.isfinite(np.take_along_axis(score, best[None], axis=0)[0])
    del score
    edge_t = _pick(best, [c[0] for c in cands])
    node = _pick(best, [c[2] for c in cands])
    wait_row = _pick(best, [c[3] for c in cands])
    del cands, best
    t0[1, sl] = np.where(has, np.minimum(edge_t, a_start), np.nan)
    kind[1, sl] = LATENCY
    row[1, sl] = wait_row
    pred[sl] = np.where(has, node, NO_ID)
    _keep_earlier(pred, pos, n_h, n_h + n_a)


def _pick(best: np.ndarray, columns: list[np.ndarray]) -> np.ndarray:
    """``np.stack(columns)[best, arange]``: each element from the column ``best`` names,
    without the stack of them all."""
    out = columns[0].astype(np.result_type(*columns), copy=True)
    for i, column in enumerate(columns[1:], 1):
        at = best == i
        out[at] = column[at]
    return out


def _keep_earlier(pred: np.ndarray, pos: np.ndarray, lo: int, hi: int) -> None:
    """Drop the edges of nodes ``lo:hi`` that do not point earlier in the visit order."""
    p = pred[lo:hi]
    ok = p >= 0
    bad = ok.copy()
    bad[ok] = pos[p[ok]] >= pos[lo:hi][ok]
    p[bad] = NO_ID


def path_edges(analysis: SpanAnalysis) -> PathEdges:
    """The graph's edges for the walk. Not memoized: ``critical_paths`` (memoized) is its
    one reader, and its arrays, PIECES per node, were 364 MB of a 10⁶-step span's peak,
    held to the end of the analysis for nothing."""
    g = replay_graph(analysis)
    n_h, n_a = g.h_time.shape[0], g.a_start.shape[0]
    n = n_h + n_a
    # Rows and lanes as int32 where the model's rows and lanes fit (every trace short of
    # 2^31 events): two (PIECES, nodes) arrays held through the walk, 96 MB of a 10⁶-step
    # span's peak as int64. The walk reads them into arrays of the wider dtype.
    m = analysis.model
    row_t = np.int32 if len(m) < np.iinfo(np.int32).max else np.int64
    lane_t = narrowest(len(m.lanes))
    node_t = narrowest(n + 1, np.int32)  # pred, and each node's position: n + 1 values
    out = {"t0": np.full((DENSE, n), np.nan), "kind": np.zeros((DENSE, n), np.int8),
           "row": np.full((DENSE, n), NO_ID, row_t),
           "lane": np.full((DENSE, n), NO_ID, lane_t), "pred": np.full(n, NO_ID, node_t),
           "third": (np.zeros(0, np.int64), np.zeros(0), np.zeros(0, row_t),
                     np.zeros(0, lane_t))}
    # Each node's position in the graph's visit order (host timepoints first, then
    # activities, as the node index is).
    pos = np.empty(n, dtype=node_t)
    pos[np.where(g.order_device, n_h + g.order_index, g.order_index)] = np.arange(n, dtype=node_t)
    main = main_lane(analysis, g)
    _host_pieces(analysis, g, pos, out)
    _activity_pieces(analysis, g, pos, out)
    del pos
    # A node without a predecessor keeps its own piece (an activity's run) only.
    t0 = out["t0"]
    lonely = out["pred"] < 0
    t0[1:, lonely] = np.nan
    _clear_third(out, lonely)
    # (a timepoint is an instant: nothing before it is known)
    t0[0, :n_h][lonely[:n_h]] = np.nan
    del lonely
    reach = np.fmin(t0[0], t0[1])
    x_node, x_t0, _, _ = out["third"]
    reach[x_node] = np.fmin(reach[x_node], x_t0)
    return PathEdges(n_host=n_h, pred=out["pred"], t0=t0, kind=out["kind"], row=out["row"],
                     lane=out["lane"], third=out["third"], reach=reach, h_time=g.h_time,
                     h_lane=g.h_lane, main_lane=main)


def narrowest(count: int, least: type = np.int16) -> type:
    """The narrowest of ``least``, int32, int64 that holds -1 and ids below ``count``."""
    for t in (np.int16, np.int32):
        if np.dtype(t).itemsize >= np.dtype(least).itemsize and count <= np.iinfo(t).max:
            return t
    return np.int64


__all__ = ["COMM", "DEVICE", "HOST", "INPUT", "KIND_NAMES", "LATENCY", "PathEdges",
           "path_edges"]
