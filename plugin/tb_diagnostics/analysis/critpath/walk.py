"""The critical path of every step: what the step's end waited on, back to its start.

Per step window ``[start, end)`` (:attr:`SpanAnalysis.bounds`), the walk starts at the
event that ends it: the step's last device activity when that ends the window, else the
host reaching the window's end on the main thread (the next step's start, or the last
step's end). From there it follows each event's binding edge (:mod:`.edges`) back until
it crosses the window's start, and clips what it crossed to the window: the path's
segments tile ``[start, end)`` exactly, so its length is the step's wall time and
``by_kind`` adds up to it.

**Where nothing binds.** A walk that reaches an event without a recorded predecessor
before the window's start (a thread's first timepoint in the trace, an activity whose
launch was not recorded) still has time to cross: it is the main thread's host time
(``host``, split into ``input``/``comm`` like the rest), named after the step, since the
host is what the trace shows running then. In the same way the host time between the
main thread's last timepoint and the window's end is host time of the step.

On a CPU-only trace there is no device activity: the path is the main thread's time, by
kind (the program's own, the DataLoader's, collectives').
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_diagnostics.analysis.critpath.edges import HOST, KIND_NAMES, path_edges
from tb_diagnostics.analysis.critpath.labels import host_labels, other_threads_comm, split_host
from tb_diagnostics.analysis.critpath.names import host_names
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.columns import gather
from tb_diagnostics.trace.model import NO_ID

#: ``CriticalPaths.ended_by`` of a path that the host ends (False) or the device (True).
_ENDED_BY = ("host", "device")


@dataclass(frozen=True)
class CriticalPaths:
    """Every step's path as flat arrays; step ``k``'s segments are
    ``offsets[k]:offsets[k+1]``, in time order."""

    offsets: np.ndarray
    kind: np.ndarray  # int8 codes of :data:`KIND_NAMES`
    row: np.ndarray  # the model row each segment belongs to
    start: np.ndarray  # µs
    dur: np.ndarray  # µs
    by_kind: np.ndarray  # (steps, kinds) µs
    #: What ends each step: "device" (its last activity) or "host" (the main thread).
    ended_by: list[str]

    @property
    def total_us(self) -> np.ndarray:
        return self.by_kind.sum(axis=1)

    def step(self, k: int) -> slice:
        return slice(int(self.offsets[k]), int(self.offsets[k + 1]))


def _end_activities(analysis: SpanAnalysis, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window: the activity that ends last among those charged to it (or -1), and its
    end (-inf)."""
    m = analysis.model
    acts = m.device_activity_rows
    last = np.full(n_steps, NO_ID, dtype=np.int64)
    end = np.full(n_steps, -np.inf)
    if not acts.size:
        return last, end
    step = analysis.activity_step if len(analysis.host_steps) else np.zeros(acts.size, np.int64)
    ok = np.flatnonzero(step >= 0)
    a_end = m.end[acts][ok]
    order = np.lexsort((a_end, step[ok]))
    s = step[ok][order]
    tail = np.ones(s.size, dtype=bool)
    tail[:-1] = s[1:] != s[:-1]
    last[s[tail]] = ok[order][tail]
    end[s[tail]] = a_end[order][tail]
    return last, end


def _host_end(analysis: SpanAnalysis, main: int, n_steps: int) -> tuple[int, np.ndarray]:
    """The thread the host ends each window on, and the row its last stretch is named
    after: the step (without steps, the outermost event of the host's last one)."""
    m = analysis.model
    hs = analysis.host_steps
    if len(hs):
        return main, hs.rows.astype(np.int64)
    host = m.host_rows
    host = host[m.kind[host] != Kind.TRACE]
    if not host.size:
        return main, np.full(n_steps, NO_ID, dtype=np.int64)
    from tb_diagnostics.analysis.views.hierarchy import nearest_marked

    last = int(host[np.argmax(m.end[host])])
    top = int(nearest_marked(m.parent, m.parent < 0)[last])
    return int(m.lane[last]), np.full(n_steps, top, dtype=np.int64)


#: Walks still going below which the rest are followed one node at a time: a numpy pass
#: per node of a few long walks (a long step's path) would cost more than the loop.
LOCKSTEP_MIN = 64


def _walk(pred: np.ndarray, reach: np.ndarray, ends: np.ndarray, lo: np.ndarray,
          todo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nodes of each step's path, from its end node back, step after step (``todo``,
    ascending) and in walk order within a step: each node's ``pred`` until one whose
    ``reach`` is at or before the step's ``lo`` (kept) or one without a predecessor.
    Every step's walk advances together, a node per numpy pass (10⁶ steps' paths were a
    Python loop per node), while at least :data:`LOCKSTEP_MIN` walks still go."""
    nodes, steps, depths = [], [], []
    cur = ends[todo]
    step = todo[cur >= 0]
    cur = cur[cur >= 0]
    depth = 0
    while cur.size >= LOCKSTEP_MIN:
        nodes.append(cur)
        steps.append(step)
        depths.append(np.full(cur.size, depth, dtype=np.int64))
        go = ~(reach[cur] <= lo[step])  # NaN bounds go on, as the comparison reads
        nxt = pred[cur[go]]
        step = step[go][nxt >= 0]
        cur = nxt[nxt >= 0]
        depth += 1
    if cur.size:  # the few walks left, one node at a time
        t_nodes: list[int] = []
        t_steps: list[int] = []
        t_depths: list[int] = []
        for n, k in zip(cur.tolist(), step.tolist(), strict=True):
            lo_k, d = float(lo[k]), depth
            while n >= 0:
                t_nodes.append(n)
                t_steps.append(k)
                t_depths.append(d)
                if reach.item(n) <= lo_k:
                    break
                n = pred.item(n)
                d += 1
        nodes.append(np.asarray(t_nodes, dtype=np.int64))
        steps.append(np.asarray(t_steps, dtype=np.int64))
        depths.append(np.asarray(t_depths, dtype=np.int64))
    if not nodes:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    node, stp, dep = np.concatenate(nodes), np.concatenate(steps), np.concatenate(depths)
    order = np.lexsort((dep, stp))
    return node[order], stp[order]


def _node_pieces(column: np.ndarray, nodes: np.ndarray, real: np.ndarray, dtype: Any,
                 virtual_first: Any, virtual_rest: Any) -> np.ndarray:
    """A ``(PIECES, nodes)`` column of the path's ``nodes``, node after node (``column``
    for the real ones; for the virtual ones past it, ``virtual_first`` then
    ``virtual_rest``), without a copy of the whole column with the virtual nodes."""
    out = np.empty((nodes.shape[0], column.shape[0]), dtype=dtype)
    out[real] = column[:, nodes[real]].T
    out[~real, 0] = virtual_first
    out[~real, 1:] = virtual_rest
    return out.ravel()


def _reindexed(cols: list[np.ndarray], index: np.ndarray) -> list[np.ndarray]:
    """``cols``, each indexed by ``index``, replaced in the list one after the other: with
    the list holding the only references, each old column is freed before the next new
    one is made (a 10⁶-step span's piece columns are 100 MB each)."""
    for i in range(len(cols)):
        cols[i] = cols[i][index]
    return cols


@computed
def critical_paths(analysis: SpanAnalysis) -> CriticalPaths:
    e = path_edges(analysis)
    lo, hi = analysis.bounds
    n_steps = lo.shape[0]
    n_nodes = e.pred.shape[0]
    last_act, last_end = _end_activities(analysis, n_steps)
    lane, step_rows = _host_end(analysis, e.main_lane, n_steps)
    device_ends = (last_act >= 0) & (last_end >= hi)
    # A virtual node per window for the host's end: back to the thread's last timepoint
    # before the window's end.
    on = np.flatnonzero(e.h_lane == lane)
    at = np.searchsorted(e.h_time[on], hi, side="left") - 1
    # (a thread with no timepoint at all: nothing binds the host's end)
    v_pred = gather(on, at, NO_ID).astype(np.int64)
    v_t0 = gather(e.h_time, v_pred, np.nan)
    pred = np.concatenate([e.pred, v_pred]).astype(np.int64, copy=False)
    reach = np.nan_to_num(np.concatenate([e.reach, v_t0]), nan=np.inf)
    end_node = np.where(device_ends, e.n_host + last_act, n_nodes + np.arange(n_steps))
    todo_a = np.flatnonzero(hi > lo).astype(np.int64)
    nodes, steps = _walk(pred, reach, end_node.astype(np.int64), lo.astype(np.float64),
                         todo_a)
    # Each big array is dropped once its last use is past: the walk of a 10⁶-step span
    # held 1.3 GB at once, its edges, its pieces and their sorted copies.
    del pred, reach

    # The pieces in path order (node after node, each node's pieces latest first), then
    # per step the remainder down to its start. A virtual node's pieces: the host's, back
    # to the thread's last timepoint, named after the step.
    p = e.t0.shape[0]
    real = nodes < n_nodes
    virt = nodes[~real] - n_nodes
    pt0 = _node_pieces(e.t0, nodes, real, np.float64, v_t0[virt], np.nan)
    pk = _node_pieces(e.kind, nodes, real, np.result_type(e.kind, np.int8), HOST, HOST)
    pr = _node_pieces(e.row, nodes, real, np.result_type(e.row, step_rows),
                      step_rows[virt], step_rows[virt][:, None])
    pl = _node_pieces(e.lane, nodes, real, np.result_type(e.lane, np.int64), lane, lane)
    del e, nodes, real, virt
    ps = np.repeat(steps, p)
    pt0 = np.concatenate([pt0, lo[todo_a]])
    pk = np.concatenate([pk, np.full(todo_a.size, HOST, np.int8)])
    pr = np.concatenate([pr, step_rows[todo_a]])
    pl = np.concatenate([pl, np.full(todo_a.size, lane)])
    ps = np.concatenate([ps, todo_a])
    # Both parts are in step order, so a stable sort by step (two sorted runs: one merge)
    # puts each step's remainder after its nodes' pieces.
    order = np.argsort(ps, kind="stable")
    ok = ~np.isnan(pt0[order])
    order = order[ok]
    cols = [pt0, pk, pr, pl, ps]
    del ok, pt0, pk, pr, pl, ps
    pt0, pk, pr, pl, ps = _reindexed(cols, order)
    del order, cols

    # Clip to the window, and make each piece start no later than the one before it:
    # per step, a running minimum, with the steps offset so that they never mix.
    lo_s, hi_s = lo[ps], hi[ps]
    rel = np.clip(pt0, lo_s, hi_s) - lo_s
    span = float((hi - lo).max()) + 1.0 if n_steps else 1.0
    cum = np.minimum.accumulate(rel - span * ps)
    bound = cum + span * ps + lo_s
    prev = np.empty_like(bound)
    if bound.size:
        prev[1:] = bound[:-1]
        first = np.ones(ps.size, dtype=bool)
        first[1:] = ps[1:] != ps[:-1]
        prev[first] = hi_s[first]
    keep = prev > bound
    del rel, cum, lo_s, hi_s, pt0
    s = bound[keep]
    del bound
    en = prev[keep]
    del prev
    cols = [pk, pr, pl, ps]
    del pk, pr, pl, ps
    pk, pr, pl, ps = _reindexed(cols, keep)
    del cols

    # Host stretches: the DataLoader's and collectives' parts.
    host = (pk == HOST) & (pl >= 0)
    hidx = np.flatnonzero(host)
    piece, hs_, he, hk, hr = split_host(s[hidx], en[hidx], pl[hidx], pr[hidx],
                                        host_labels(analysis))
    h_lane = pl[hidx][piece]
    plain = hk == HOST
    hr[plain] = host_names(analysis, hs_[plain], he[plain], h_lane[plain], hr[plain])
    # A thread that records nothing but its step while another thread runs a collective
    # waits for it (as the step's idle split counts it): that time is comm.
    bare = np.flatnonzero(plain & np.isin(hr, analysis.host_steps.rows))
    if bare.size and analysis.comm_rows.size:
        sub, bs, be, bk, br = split_host(hs_[bare], he[bare], h_lane[bare], hr[bare],
                                         other_threads_comm(analysis, h_lane[bare]))
        mine = bk == HOST  # the thread's own time among the parts: named again
        br[mine] = host_names(analysis, bs[mine], be[mine], h_lane[bare][sub][mine], br[mine])
        keep = np.ones(piece.size, dtype=bool)
        keep[bare] = False
        piece = np.concatenate([piece[keep], piece[bare][sub]])
        hs_, he = np.concatenate([hs_[keep], bs]), np.concatenate([he[keep], be])
        hk, hr = np.concatenate([hk[keep], bk]), np.concatenate([hr[keep], br])
    other = np.flatnonzero(~host)
    seg_step = np.concatenate([ps[other], ps[hidx][piece]])
    seg_s = np.concatenate([s[other], hs_])
    seg_e = np.concatenate([en[other], he])
    seg_k = np.concatenate([pk[other], hk]).astype(np.int8)
    seg_r = np.concatenate([pr[other], hr]).astype(np.int64)
    order = np.lexsort((seg_s, seg_step))
    seg_step, seg_s, seg_e = seg_step[order], seg_s[order], seg_e[order]
    seg_k, seg_r = seg_k[order], seg_r[order]
    dur = seg_e - seg_s
    n_k = len(KIND_NAMES)
    by_kind = np.bincount(seg_step * n_k + seg_k, weights=dur,
                          minlength=n_steps * n_k).reshape(n_steps, n_k)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(seg_step, minlength=n_steps))])
    return CriticalPaths(offsets=offsets.astype(np.int64), kind=seg_k, row=seg_r,
                         start=seg_s, dur=dur, by_kind=by_kind,
                         # The two strings themselves, not a str per step (numpy's
                         # tolist makes one each: 58 MB on a span of 10⁶ steps).
                         ended_by=list(map(_ENDED_BY.__getitem__, device_ends.tolist())))
