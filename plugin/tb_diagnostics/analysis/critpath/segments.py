"""The segments of a block of steps' paths, from the nodes their walks crossed.

:func:`~tb_diagnostics.analysis.critpath.walk.critical_paths` walks every step at once,
then turns the nodes into segments here a block of steps at a time: each node's pieces
(:mod:`.edges`), the remainder of each step down to its start, clipped to the window,
the host stretches split (:mod:`.labels`) and named (:mod:`.names`). Every stage is per
piece or per step, so a block's segments are those of the same steps cut all at once,
and the temporaries scale with the block, not the span (a 10⁶-step span's were 700 MB).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tb_diagnostics.analysis.critpath.edges import DENSE, HOST, PIECES, PathEdges
from tb_diagnostics.analysis.critpath.labels import Labels, other_threads_comm, split_host
from tb_diagnostics.analysis.critpath.names import LaneEvents, host_names
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.model import NO_ID


@dataclass
class PathContext:
    """What every block reads: the edges, the windows, the host's end per window (its
    virtual node's time and name), and what the host stretches are split and named by."""

    edges: PathEdges
    n_nodes: int  # real nodes; node ``n_nodes + k`` is window ``k``'s host end
    v_t0: np.ndarray  # per window: its host end's virtual node's time (NaN: none)
    step_rows: np.ndarray  # per window: the row its host time is named after
    lane: int  # the thread the host ends each window on
    lo: np.ndarray
    hi: np.ndarray
    #: Offsets the running minimum by, per step (the windows' longest span, + 1 µs).
    span: float
    labels: Labels  # :func:`.labels.host_labels`
    events: LaneEvents
    #: Per model row (and a last False for row -1): whether it is a step.
    is_step: np.ndarray
    #: :func:`.labels.other_threads_comm` by lane, for the lanes asked so far.
    other_comm: dict[int, Any] = field(default_factory=dict)

    def other_comm_labels(self, analysis: SpanAnalysis, lanes: np.ndarray) -> Labels:
        """:func:`other_threads_comm` of ``lanes``, each lane's found once for all blocks."""
        wanted = unique(lanes).tolist()
        new = [ln for ln in wanted if ln not in self.other_comm]
        if new:
            found = other_threads_comm(analysis, np.asarray(new, dtype=np.int64)).by_lane
            self.other_comm.update({ln: found.get(ln) for ln in new})
        # In ascending lane order, lanes without another thread's collective left out:
        # as other_threads_comm of them all gives them.
        return Labels({ln: self.other_comm[ln] for ln in wanted
                       if self.other_comm[ln] is not None})


def _node_pieces(e: PathEdges, nodes: np.ndarray, real: np.ndarray,
                 virtual: list[tuple[Any, Any]], dtypes: list[Any]) -> list[np.ndarray]:
    """The path's ``nodes``' pieces, node after node, as flat columns ``(t0, kind, row,
    lane)`` in ``dtypes``: the edges' for the real nodes (``e.pieces``); for the virtual
    ones past them, each column's ``virtual`` first piece, then its rest (each of the
    other pieces: a value, or one per virtual node). Each column is
    gathered straight into place, a piece at a time (no ``(nodes, PIECES)`` copy of the
    real nodes' to scatter)."""
    n = nodes.shape[0]
    n_edges = e.t0.shape[1]
    fake = np.flatnonzero(~real)
    # A virtual node reads node 0's pieces, overwritten below.
    safe = np.where(real, nodes, 0) if fake.size else nodes
    x_node, x_t0, x_row, x_lane = e.third
    x_at = x_of = np.zeros(0, dtype=np.int64)
    if x_node.size and n_edges:
        j = np.searchsorted(x_node, safe).clip(max=x_node.size - 1)
        x_at = np.flatnonzero((x_node[j] == safe) & real)
        x_of = j[x_at]
    out = []
    for dense, third, fill, (first, rest), dtype in zip(
            (e.t0, e.kind, e.row, e.lane), (x_t0, None, x_row, x_lane),
            (np.nan, HOST, NO_ID, NO_ID), virtual, dtypes, strict=True):
        col = np.empty((n, PIECES), dtype=dtype)
        if n_edges:
            for k in range(DENSE):
                col[:, k] = dense[k][safe]
        col[:, DENSE:] = fill
        if third is not None and x_at.size:
            col[x_at, DENSE] = third[x_of]
        col[fake, 0] = first
        for k in range(1, PIECES):  # a column at a time: a 2-D broadcast was 3x slower
            col[fake, k] = rest
        out.append(col.ravel())
    return out


def block_segments(analysis: SpanAnalysis, ctx: PathContext, nodes: np.ndarray,
                   steps: np.ndarray, todo: np.ndarray) -> tuple[np.ndarray, ...]:
    """The segments of a block of whole steps: ``nodes`` their walks crossed (by step,
    in walk order), ``steps`` each node's, ``todo`` the block's windows with a path.
    Returns ``(step, start, end, kind, row)``, by step and start."""
    e, n_nodes, lane, step_rows = ctx.edges, ctx.n_nodes, ctx.lane, ctx.step_rows
    lo, hi = ctx.lo, ctx.hi
    # The pieces in path order (node after node, each node's pieces latest first), then
    # per step the remainder down to its start. A virtual node's pieces: the host's, back
    # to the thread's last timepoint, named after the step.
    real = nodes < n_nodes
    virt = nodes[~real] - n_nodes
    v_rows = step_rows[virt]
    pt0, pk, pr, pl = _node_pieces(
        e, nodes, real,
        [(ctx.v_t0[virt], np.nan), (HOST, HOST), (v_rows, v_rows), (lane, lane)],
        [np.float64, np.result_type(e.kind, np.int8), np.result_type(e.row, step_rows),
         np.result_type(e.lane, np.int64)])
    ps = np.repeat(steps, PIECES)
    pt0 = np.concatenate([pt0, lo[todo]])
    pk = np.concatenate([pk, np.full(todo.size, HOST, np.int8)])
    pr = np.concatenate([pr, step_rows[todo]])
    pl = np.concatenate([pl, np.full(todo.size, lane)])
    ps = np.concatenate([ps, todo])
    # Both parts are in step order, so a stable sort by step (two sorted runs: one merge)
    # puts each step's remainder after its nodes' pieces.
    order = np.argsort(ps, kind="stable")
    order = order[~np.isnan(pt0[order])]
    pt0, pk, pr, pl, ps = pt0[order], pk[order], pr[order], pl[order], ps[order]
    del order, real, virt, v_rows

    # Clip to the window, and make each piece start no later than the one before it:
    # per step, a running minimum, with the steps offset so that they never mix (the
    # offset is the span's, whatever the block: the same floats as all steps at once).
    lo_s, hi_s = lo[ps], hi[ps]
    rel = np.clip(pt0, lo_s, hi_s) - lo_s
    cum = np.minimum.accumulate(rel - ctx.span * ps)
    bound = cum + ctx.span * ps + lo_s
    prev = np.empty_like(bound)
    if bound.size:
        prev[1:] = bound[:-1]
        first = np.ones(ps.size, dtype=bool)
        first[1:] = ps[1:] != ps[:-1]
        prev[first] = hi_s[first]
    keep = prev > bound
    del rel, cum, lo_s, hi_s, pt0  # each array a block's pieces long: gone once read
    s, en = bound[keep], prev[keep]
    del bound, prev
    pk, pr, pl, ps = pk[keep], pr[keep], pl[keep], ps[keep]
    del keep

    # Host stretches: the DataLoader's and collectives' parts.
    host = (pk == HOST) & (pl >= 0)
    hidx = np.flatnonzero(host)
    piece, hs_, he, hk, hr = split_host(s[hidx], en[hidx], pl[hidx], pr[hidx], ctx.labels)
    h_lane = pl[hidx][piece]
    plain = hk == HOST
    hr[plain] = host_names(analysis, hs_[plain], he[plain], h_lane[plain], hr[plain],
                           ctx.events)
    # A thread that records nothing but its step while another thread runs a collective
    # waits for it (as the step's idle split counts it): that time is comm.
    bare = np.flatnonzero(plain & ctx.is_step[hr]) if analysis.comm_rows.size else hidx[:0]
    if bare.size:
        sub, bs, be, bk, br = split_host(hs_[bare], he[bare], h_lane[bare], hr[bare],
                                         ctx.other_comm_labels(analysis, h_lane[bare]))
        mine = bk == HOST  # the thread's own time among the parts: named again
        br[mine] = host_names(analysis, bs[mine], be[mine], h_lane[bare][sub][mine],
                              br[mine], ctx.events)
        kept = np.ones(piece.size, dtype=bool)
        kept[bare] = False
        piece = np.concatenate([piece[kept], piece[bare][sub]])
        hs_, he = np.concatenate([hs_[kept], bs]), np.concatenate([he[kept], be])
        hk, hr = np.concatenate([hk[kept], bk]), np.concatenate([hr[kept], br])
    other = np.flatnonzero(~host)
    seg_step = np.concatenate([ps[other], ps[hidx][piece]])
    seg_s = np.concatenate([s[other], hs_])
    seg_e = np.concatenate([en[other], he])
    seg_k = np.concatenate([pk[other], hk]).astype(np.int8)
    seg_r = np.concatenate([pr[other], hr]).astype(np.int64)
    order = np.lexsort((seg_s, seg_step))
    return seg_step[order], seg_s[order], seg_e[order], seg_k[order], seg_r[order]
