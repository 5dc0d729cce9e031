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

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tb_diagnostics.analysis.critpath.edges import KIND_NAMES, narrowest, path_edges
from tb_diagnostics.analysis.critpath.labels import host_labels
from tb_diagnostics.analysis.critpath.names import LaneEvents
from tb_diagnostics.analysis.critpath.segments import PathContext, block_segments
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.columns import gather
from tb_diagnostics.trace.model import NO_ID

#: ``CriticalPaths.ended_by`` of a path that the host ends (False) or the device (True).
ENDED_BY = ("host", "device")
_ENDED_BY_OBJECTS = np.asarray(ENDED_BY, dtype=object)


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
    #: Whether each step's last activity ends it (else the host: the main thread).
    device_ended: np.ndarray

    @property
    def ended_by(self) -> list[str]:
        """What ends each step, "device" or "host" (:data:`ENDED_BY`): the two strings
        themselves, not a str per step (numpy's tolist makes one each: 58 MB on a span of
        10⁶ steps), taken from an object array (a map over a list of bools: 5x slower)."""
        return _ENDED_BY_OBJECTS[self.device_ended.view(np.uint8)].tolist()

    def ended_by_of(self, k: int) -> str:
        """What ends step ``k`` (one of :attr:`ended_by`)."""
        return ENDED_BY[int(self.device_ended[k])]

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
    nodes, steps = [], []
    cur = ends[todo]
    step = todo[cur >= 0]
    cur = cur[cur >= 0]
    while cur.size >= LOCKSTEP_MIN:
        nodes.append(cur)
        steps.append(step)
        go = ~(reach[cur] <= lo[step])  # NaN bounds go on, as the comparison reads
        nxt = pred[cur[go]]
        step = step[go][nxt >= 0]
        cur = nxt[nxt >= 0]
    if cur.size:  # the few walks left, one node at a time
        t_nodes: list[int] = []
        t_steps: list[int] = []
        for n, k in zip(cur.tolist(), step.tolist(), strict=True):
            lo_k = float(lo[k])
            while n >= 0:
                t_nodes.append(n)
                t_steps.append(k)
                if reach.item(n) <= lo_k:
                    break
                n = pred.item(n)
        nodes.append(np.asarray(t_nodes, dtype=np.result_type(ends, pred)))
        steps.append(np.asarray(t_steps, dtype=todo.dtype))
    if not nodes:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    node, stp = np.concatenate(nodes), np.concatenate(steps)
    del nodes, steps
    # A step's nodes come depth after depth (each pass's, then its walk to the end, if it
    # is one of the last few), so a stable sort by step is the (step, depth) order.
    order = np.argsort(stp, kind="stable")
    return node[order], stp[order]


#: Steps whose segments are cut at a time (:mod:`.segments`): the temporaries of a block
#: are a few arrays of its pieces, whatever the span's length.
BLOCK_STEPS = 1 << 15


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
    # (every timepoint on that thread: their times themselves, no copy of them all)
    at = np.searchsorted(e.h_time if on.size == e.h_time.shape[0] else e.h_time[on], hi,
                         side="left") - 1
    # (a thread with no timepoint at all: nothing binds the host's end)
    v_pred = gather(on, at, NO_ID).astype(np.int64)
    del on, at
    v_t0 = gather(e.h_time, v_pred, np.nan)
    # In the edges' dtype (int32 below 2^31 nodes, with the virtual ones): 20 MB of a
    # 10⁶-step span's walk, not 40.
    pred = np.concatenate([e.pred, v_pred.astype(e.pred.dtype)])
    reach = np.concatenate([e.reach, v_t0])
    np.nan_to_num(reach, copy=False, nan=np.inf)
    del v_pred
    # The walk's copies are all it reads of them: the edges' own go now.
    e = replace(e, pred=np.zeros(0, e.pred.dtype), reach=np.zeros(0))
    end_node = np.where(device_ends, e.n_host + last_act, n_nodes + np.arange(n_steps))
    # Node and step numbers as int32 where they fit: the walk's lists of them, and its
    # nodes and steps held through the blocks, are half as big.
    todo_a = np.flatnonzero(hi > lo).astype(narrowest(n_steps, np.int32))
    nodes, steps = _walk(pred, reach, end_node.astype(narrowest(n_nodes + n_steps, np.int32)),
                         lo.astype(np.float64), todo_a)
    del pred, reach, end_node, last_act, last_end
    # Only the walked nodes' pieces are read from here on (half of a 10⁶-step span's
    # nodes: 60 MB less held through the blocks), renumbered, the virtual nodes after them.
    seen = np.zeros(n_nodes, dtype=bool)
    real = nodes < n_nodes
    seen[nodes[real]] = True
    rank = np.cumsum(seen, dtype=narrowest(n_nodes + n_steps, np.int32))
    n_walked = int(rank[-1]) if n_nodes else 0
    # (steps below 2^31: int32, as the node numbers below 2^31 nodes)
    nodes = np.where(real, rank[np.minimum(nodes, n_nodes - 1)] - 1 if n_nodes else nodes,
                     nodes - n_nodes + n_walked).astype(rank.dtype)
    del real, rank
    e = e.only(seen)
    n_nodes = n_walked
    del seen

    m = analysis.model
    is_step = np.zeros(len(m) + 1, dtype=bool)  # the last: row -1, no step
    is_step[analysis.host_steps.rows.astype(np.int64, copy=False)] = True
    ctx = PathContext(edges=e, n_nodes=n_nodes, v_t0=v_t0, step_rows=step_rows, lane=lane,
                      lo=lo, hi=hi,
                      span=float((hi - lo).max()) + 1.0 if n_steps else 1.0,
                      labels=host_labels(analysis), events=LaneEvents(analysis),
                      is_step=is_step)
    del e
    n_k = len(KIND_NAMES)
    by_kind = np.zeros((n_steps, n_k))
    counts = np.zeros(n_steps, dtype=np.int64)
    parts: list[tuple[np.ndarray, ...]] = []
    cuts = np.arange(0, n_steps + BLOCK_STEPS, BLOCK_STEPS).clip(max=n_steps)
    at_node = np.searchsorted(steps, cuts)
    at_todo = np.searchsorted(todo_a, cuts)
    for b in range(cuts.size - 1):
        b0, b1 = int(cuts[b]), int(cuts[b + 1])
        if b1 <= b0:
            continue
        seg_step, seg_s, seg_e, seg_k, seg_r = block_segments(
            analysis, ctx, nodes[at_node[b]:at_node[b + 1]],
            steps[at_node[b]:at_node[b + 1]], todo_a[at_todo[b]:at_todo[b + 1]])
        dur = seg_e - seg_s
        local = seg_step - b0
        # Per step the same additions in the same order as over all steps at once.
        by_kind[b0:b1] = np.bincount(local * n_k + seg_k, weights=dur,
                                     minlength=(b1 - b0) * n_k).reshape(b1 - b0, n_k)
        counts[b0:b1] = np.bincount(local, minlength=b1 - b0)
        parts.append((seg_k, seg_r, seg_s, dur))
    del ctx, nodes, steps
    kind, row, start, dur = (_joined(parts, i, dt) for i, dt in
                             enumerate((np.int8, np.int64, np.float64, np.float64)))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return CriticalPaths(offsets=offsets.astype(np.int64), kind=kind, row=row,
                         start=start, dur=dur, by_kind=by_kind,
                         device_ended=np.ascontiguousarray(device_ends, dtype=bool))


def _joined(parts: list[tuple[np.ndarray, ...]], i: int, dtype: Any) -> np.ndarray:
    """Column ``i`` of every block, as one array; each block's own is dropped once copied
    (the blocks and the whole are not held twice over, column after column)."""
    out = np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype=dtype)
    for k, p in enumerate(parts):
        parts[k] = (*p[:i], None, *p[i + 1:])
    return out
