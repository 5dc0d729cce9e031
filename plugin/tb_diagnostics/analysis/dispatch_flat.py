"""A step's dispatch tree as columns, and its chains, without a Python object per call.

:func:`~tb_diagnostics.analysis.dispatch.call_tree` builds one :class:`CallNode` per
merged call: right for the one step the tab opens, but the ``dispatch-chain`` rule reads
every step, and on a step of 20,000 kernels (each under its own op and launch) that is
tens of thousands of objects per step, each with a dict, a set and a list, which the
garbage collector then walks again and again. Here the same tree is numbered columns:
the nodes placed by the same rules (a host call under its parent's node where the parent
is one of the step's calls made before it, Python frames never; else under the step or
its thread's node; an activity under its launch call's node, else the step), merged by
``(parent node, kind, name)``, numbered in the order the tree creates them, so that a
node's children in number order are the tree's children in order, and every sum is
taken in the tree's order (the same floats). The placement runs one pass per level of
op-under-op nesting (Python frames are not in the tree), each pass over that level's
calls alone: linear in the calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.dispatch import KIND_LABEL, CallNode
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.hierarchy import count_above
from tb_diagnostics.trace.categories import DEVICE_ACTIVITY_KINDS, Kind

#: Kind codes of the nodes no call is merged into: the step and a thread's grouping node.
STEP, THREAD = -2, -1
_DEVICE_CODES = np.asarray(sorted(int(k) for k in DEVICE_ACTIVITY_KINDS), dtype=np.int64)
#: Whether a node's kind code (offset by 2: STEP and THREAD are -2 and -1) is a device
#: activity's: a lookup, where np.isin cost tens of µs per step on a span of tiny steps.
_IS_DEVICE = np.zeros(max(int(k) for k in Kind) + 3, dtype=bool)
_IS_DEVICE[_DEVICE_CODES + 2] = True


@dataclass
class FlatTree:
    """One step's call tree; node 0 is the step, the others in the tree's creation order
    (so a parent's number is below its children's)."""

    parent: np.ndarray  # int64; -1 for the step
    kind: np.ndarray  # int64: a Kind value, STEP or THREAD
    name: np.ndarray  # int64 string id; -1 for the step and thread nodes
    labels: dict[int, str]  # the names of the step and thread nodes
    depth: np.ndarray  # the step 0, its children 1, ...
    count: np.ndarray  # int64: the calls (activities) merged into the node
    total_us: np.ndarray  # their summed duration (a thread's: its children's)
    device_us: np.ndarray  # device time of the node's activities, or launched below it
    first_row: np.ndarray  # int64: the node's first row, -1 for a thread node
    rows: np.ndarray  # the step's rows that are in the tree, sorted
    row_node: np.ndarray  # the node of each of ``rows``

    def __len__(self) -> int:
        return int(self.parent.shape[0])

    @property
    def is_device(self) -> np.ndarray:
        return _IS_DEVICE[self.kind + 2]

    def levels(self) -> list[np.ndarray]:
        """The nodes of each depth, in number order (the tree's order within a parent)."""
        return depth_levels(self.depth)

    def name_text(self, node: int, model_strings: list[str]) -> str:
        n = int(self.name[node])
        return self.labels[node] if n < 0 else model_strings[n]

    def kind_label(self, node: int) -> str:
        k = int(self.kind[node])
        return "step" if k == STEP else "thread" if k == THREAD else KIND_LABEL[Kind(k)]

    def call_node(self, node: int, model_strings: list[str]) -> CallNode:
        """The node as a :class:`CallNode` without children (its first row as its row)."""
        first = int(self.first_row[node])
        return CallNode(name=self.name_text(node, model_strings), kind=self.kind_label(node),
                        count=int(self.count[node]), total_us=float(self.total_us[node]),
                        device_us=float(self.device_us[node]),
                        rows=[first] if first >= 0 else [])


def depth_levels(depth: np.ndarray) -> list[np.ndarray]:
    """The positions of each value 0..max of ``depth`` (non-negative ints), ascending:
    one stable argsort, on a narrow copy where the values fit (numpy sorts 8- and
    16-bit ints by radix, int64 by timsort: 4x slower on 10^5 nodes)."""
    if not depth.size:
        return []
    top = int(depth.max())
    narrow = depth.astype(np.int8) if top < 127 else (
        depth.astype(np.int16) if top < 32767 else depth)
    order = np.argsort(narrow, kind="stable")
    cut = np.searchsorted(narrow[order], np.arange(top + 2))
    return [order[cut[d]:cut[d + 1]] for d in range(top + 1)]


class _Nodes:
    """Node columns filled as the levels are placed (provisional numbers: by level)."""

    def __init__(self, cap: int) -> None:
        self.parent = np.full(cap, -1, dtype=np.int64)
        self.kind = np.full(cap, STEP, dtype=np.int64)
        self.name = np.full(cap, -1, dtype=np.int64)
        self.depth = np.zeros(cap, dtype=np.int64)
        self.order = np.full(cap, -1, dtype=np.int64)  # creation order: 2*position (+1)
        self.size = 1  # the step

    def add(self, parent: np.ndarray, kind: np.ndarray, name: np.ndarray,
            order: np.ndarray) -> np.ndarray:
        """Nodes for the calls ``(parent, kind, name)`` (``order`` ascending): the node of
        each, one per distinct triple, created at its first call."""
        if not parent.size:
            return np.zeros(0, dtype=np.int64)
        s = np.lexsort((name, kind, parent))  # stable: a group's first is its first call
        p, k, n = parent[s], kind[s], name[s]
        new = np.ones(s.shape[0], dtype=bool)
        new[1:] = (p[1:] != p[:-1]) | (k[1:] != k[:-1]) | (n[1:] != n[:-1])
        group = np.cumsum(new) - 1
        first = s[new]
        ids = self.size + np.arange(first.shape[0], dtype=np.int64)
        sl = slice(self.size, self.size + first.shape[0])
        self.parent[sl], self.kind[sl], self.name[sl] = parent[first], kind[first], name[first]
        self.depth[sl] = self.depth[parent[first]] + 1
        self.order[sl] = 2 * order[first] + 1
        self.size += first.shape[0]
        out = np.empty(s.shape[0], dtype=np.int64)
        out[s] = ids[group]
        return out


def roll_up(parent: np.ndarray, kind: np.ndarray, levels: list[np.ndarray],
            is_device: np.ndarray, count: np.ndarray, total: np.ndarray) -> np.ndarray:
    """The nodes' device time, each node's rolled up into its ancestors (children in
    order); and, in place, each thread node counted once and as long as its calls."""
    dev = np.where(is_device, total, 0.0)
    for lv in reversed(levels[1:]):
        np.add.at(dev, parent[lv], dev[lv])
    threads = np.flatnonzero(kind == THREAD)
    if threads.size:
        count[threads] = 1
        kids = levels[2] if len(levels) > 2 else np.zeros(0, dtype=np.int64)
        kids = kids[kind[parent[kids]] == THREAD]
        np.add.at(total, parent[kids], total[kids])
    return dev


def flat_tree(analysis: SpanAnalysis, index: int) -> FlatTree:
    """Window ``index``'s call tree as :class:`FlatTree` (the tree of ``call_tree``)."""
    m = analysis.model
    w = analysis.windows[index]
    step_row = int(w.row)
    host = _host_rows_between(analysis, w.host_start, w.host_end)
    host = host[(m.kind[host] != Kind.PYTHON) & (host != step_row)].astype(np.int64)
    acts = analysis.window_activity_rows(index).astype(np.int64)
    n = host.shape[0]
    pos = np.arange(n, dtype=np.int64)
    par = m.parent[host].astype(np.int64)
    at = np.searchsorted(host, par)
    placed = (par >= 0) & (at < n)
    placed[placed] = host[at[placed]] == par[placed]
    placed &= at < pos  # the tree places a call under a call it has already placed
    up = np.where(placed, at, -1)
    level = count_above(up, np.ones(n, dtype=bool)).astype(np.int64)

    nodes = _Nodes(1 + 2 * n + acts.shape[0])
    labels: dict[int, str] = {0: _root_name(analysis, index)}
    under = np.zeros(n, dtype=np.int64)  # the parent node of each top call
    top = np.flatnonzero(~placed)
    if step_row >= 0 and top.size:
        lane = m.lane[host[top]]
        other = top[lane != m.lane[step_row]]
        if other.size:  # calls on other threads: under a node per thread label
            lanes, inv = np.unique(m.lane[host[other]], return_inverse=True)
            by_label: dict[str, int] = {}
            thread_of = np.asarray([by_label.setdefault(m.lanes[ln].label, len(by_label))
                                    for ln in lanes.tolist()], dtype=np.int64)[inv.ravel()]
            first = np.full(len(by_label), n, dtype=np.int64)
            np.minimum.at(first, thread_of, other)
            ids = nodes.size + np.arange(len(by_label), dtype=np.int64)
            sl = slice(nodes.size, nodes.size + len(by_label))
            nodes.parent[sl], nodes.kind[sl], nodes.depth[sl] = 0, THREAD, 1
            nodes.order[sl] = 2 * first  # created just before its first call's node
            nodes.size += len(by_label)
            labels.update({int(ids[i]): s for s, i in by_label.items()})
            under[other] = ids[thread_of]
    node_of = np.full(n, -1, dtype=np.int64)
    kind = m.kind[host].astype(np.int64)
    name = m.name[host].astype(np.int64)
    order = np.argsort(level, kind="stable")
    cut = np.searchsorted(level[order], np.arange(int(level.max()) + 2 if n else 1))
    for d in range(cut.shape[0] - 1):  # one pass per nesting level, over its calls
        at_d = order[cut[d]:cut[d + 1]]
        pid = under[at_d] if d == 0 else node_of[up[at_d]]
        node_of[at_d] = nodes.add(pid, kind[at_d], name[at_d], at_d)

    launcher = m.launcher[acts].astype(np.int64)
    la = np.searchsorted(host, launcher)
    ok = (launcher >= 0) & (la < n)
    ok[ok] = host[la[ok]] == launcher[ok]
    a_pid = np.zeros(acts.shape[0], dtype=np.int64)
    a_pid[ok] = node_of[la[ok]]
    a_node = nodes.add(a_pid, m.kind[acts].astype(np.int64), m.name[acts].astype(np.int64),
                       n + np.arange(acts.shape[0], dtype=np.int64))
    return _finish(analysis, nodes, labels, host, acts, node_of, a_node, w)


@computed
def _host_starts(analysis: SpanAnalysis) -> np.ndarray | None:
    """The host rows' starts, when in order (the model is sorted by start: always), for
    a window's host rows by bisection; None otherwise."""
    m = analysis.model
    start = m.start[m.host_rows]
    return start if bool(np.all(start[1:] >= start[:-1])) else None


def _host_rows_between(analysis: SpanAnalysis, lo: float, hi: float) -> np.ndarray:
    """The host rows starting in ``[lo, hi)``, in row order: two bisections (a mask over
    every host row per window read every step's rows once per step: quadratic)."""
    m = analysis.model
    host, start = m.host_rows, _host_starts(analysis)
    if start is None:
        return host[(m.start[host] >= lo) & (m.start[host] < hi)]
    return host[np.searchsorted(start, lo, side="left"):np.searchsorted(start, hi, "left")]


def _finish(analysis: SpanAnalysis, nodes: _Nodes, labels: dict[int, str],
            host: np.ndarray, acts: np.ndarray, node_of: np.ndarray, a_node: np.ndarray,
            w: object) -> FlatTree:
    """Renumber the nodes in creation order and sum their calls in the tree's order."""
    m = analysis.model
    size = nodes.size
    creation = np.argsort(nodes.order[:size], kind="stable")  # the step's order: -1
    renum = np.empty(size, dtype=np.int64)
    renum[creation] = np.arange(size, dtype=np.int64)
    parent = nodes.parent[:size][creation]
    parent[1:] = renum[parent[1:]]
    row_node = renum[np.concatenate([node_of, a_node])]
    rows = np.concatenate([host, acts])
    count = np.bincount(row_node, minlength=size).astype(np.int64)
    # In row order: the tree's sums. (float: bincount of no rows gives integers)
    total = np.bincount(row_node, weights=m.dur[rows], minlength=size).astype(np.float64)
    first = np.full(size, -1, dtype=np.int64)
    # Each node's first row: the lowest position of its calls (rows in tree order).
    pos_first = np.full(size, rows.shape[0], dtype=np.int64)
    np.minimum.at(pos_first, row_node, np.arange(rows.shape[0], dtype=np.int64))
    has = pos_first < rows.shape[0]
    first[has] = rows[pos_first[has]]
    step_row = int(w.row)
    count[0] = 1
    total[0] = float(m.dur[step_row]) if step_row >= 0 else w.host_end - w.host_start
    first[0] = step_row
    kind = nodes.kind[:size][creation]
    tree = FlatTree(parent=parent, kind=kind, name=nodes.name[:size][creation],
                    labels={int(renum[k]): v for k, v in labels.items()},
                    depth=nodes.depth[:size][creation], count=count, total_us=total,
                    device_us=np.zeros(size), first_row=first, rows=rows,
                    row_node=row_node)
    tree.device_us = roll_up(parent, kind, tree.levels(), tree.is_device, count, total)
    order = np.argsort(rows, kind="stable")
    tree.rows, tree.row_node = rows[order], row_node[order]
    return tree


def _root_name(analysis: SpanAnalysis, index: int) -> str:
    """The step node's name, as :meth:`SpanAnalysis.call_tree` names it."""
    w = analysis.windows[index]
    if analysis.host_steps.inferred:
        return f"iteration {w.step} (inferred)"
    return analysis.model.name_of(w.row) if w.row >= 0 else "(whole span)"
