"""Every step's dispatch tree at once, as one set of columns (a forest, a tree per window).

:func:`~tb_diagnostics.analysis.dispatch_flat.flat_tree` builds one window's tree with a
fixed number of numpy calls; the ``dispatch-chain`` rule reads every window's, and on a
span of 10⁵ tiny steps those calls per step were most of the report's time. Here the
same trees are built for all the windows in one pass: each window's host calls and
activities concatenated (window after window, each in the order ``flat_tree`` reads
them), a call placed under its parent's node where the parent is one of the same
window's calls (keys ``window * R + row`` for the look-up), nodes merged by
``(parent node, kind, name)`` (a parent node belongs to one window, so the merge never
crosses windows), numbered within each window in the tree's creation order, and every
sum taken in the order of the window's rows: node for node, the same columns (the same
floats) as ``flat_tree``. Windows are contiguous ranges of nodes, each starting with its
step's node. A forest holds a range of windows (all of them by default): each window's
tree is its own, so a reader bounds its columns by taking the windows a range at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tb_diagnostics.analysis.dispatch import KIND_LABEL
from tb_diagnostics.analysis.dispatch_flat import (
    _IS_DEVICE,
    STEP,
    THREAD,
    _host_rows_between,
    _host_starts,
    _Nodes,
    _root_name,
    depth_levels,
    roll_up,
)
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import count_above
from tb_diagnostics.trace.categories import Kind


@dataclass
class FlatForest:
    """The :class:`~tb_diagnostics.analysis.dispatch_flat.FlatTree` of windows
    ``first_window + k``, stacked: window ``first_window + k``'s nodes are
    ``offsets[k]:offsets[k+1]`` (its step's node first), the columns as the tree's
    (``parent`` a forest-wide node number)."""

    offsets: np.ndarray  # int64, windows + 1
    window: np.ndarray  # int64: each node's window, less first_window
    parent: np.ndarray  # int64; -1 for a step's node
    kind: np.ndarray  # int64: a Kind value, STEP or THREAD
    name: np.ndarray  # int64 string id; -1 for step and thread nodes
    label: np.ndarray  # int64: a thread node's label (``labels``' index), else -1
    labels: list[str]  # the thread nodes' names
    depth: np.ndarray
    count: np.ndarray
    total_us: np.ndarray
    device_us: np.ndarray
    first_row: np.ndarray  # int64: -1 for a thread node (and a step without its event)
    row_key: np.ndarray  # the windows' rows in the trees, as ``window * stride + row``, sorted
    row_node: np.ndarray  # the node of each of ``row_key``
    stride: int
    first_window: int = 0
    #: :meth:`levels`, once found (the forest's own roll-up and the rule both read them).
    _levels: list[np.ndarray] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return int(self.parent.shape[0])

    @property
    def roots(self) -> np.ndarray:
        return self.offsets[:-1]

    @property
    def is_device(self) -> np.ndarray:
        return _IS_DEVICE[self.kind + 2]

    def levels(self) -> list[np.ndarray]:
        """The nodes of each depth, in number order (the trees' order within a parent)."""
        if self._levels is None:
            self._levels = depth_levels(self.depth)
        return self._levels

    def kind_label(self, node: int) -> str:
        k = int(self.kind[node])
        return "step" if k == STEP else "thread" if k == THREAD else KIND_LABEL[Kind(k)]

    def name_text(self, analysis: SpanAnalysis, node: int) -> str:
        """The node's name, as ``flat_tree`` names it (the step's as the call tree)."""
        k = int(self.kind[node])
        if k == STEP:
            return _root_name(analysis, self.first_window + int(self.window[node]))
        if k == THREAD:
            return self.labels[int(self.label[node])]
        return analysis.model.strings[int(self.name[node])]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The positions ``lo[k]:hi[k]`` of every ``k``, concatenated (one repeat + arange)."""
    sizes = np.maximum(hi - lo, 0)
    return np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))


def _window_bounds(analysis: SpanAnalysis, lo_w: int, hi_w: int,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Windows ``lo_w:hi_w``' host ranges and step rows (-1: none), from the windows'
    columns (a view per window was most of the forest's time on 10⁵ tiny steps)."""
    c = analysis.windows.columns
    return (c.host_start[lo_w:hi_w].astype(np.float64), c.host_end[lo_w:hi_w].astype(np.float64),
            c.row[lo_w:hi_w].astype(np.int64))


def _window_host_rows(analysis: SpanAnalysis, lo_w: int, hi_w: int,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The host rows of windows ``lo_w:hi_w`` (``flat_tree``'s: in its host range, no
    Python frame, not the step's own event), window after window in row order, and each
    one's window (less ``lo_w``)."""
    m = analysis.model
    lo, hi, step_row = _window_bounds(analysis, lo_w, hi_w)
    n_w = step_row.shape[0]
    host, start = m.host_rows, _host_starts(analysis)
    if start is not None:  # two bisections per window, as one search each
        a = np.searchsorted(start, lo, side="left")
        b = np.searchsorted(start, hi, side="left")
        rows = host[_ranges(a, b)].astype(np.int64)
        win = np.repeat(np.arange(n_w, dtype=np.int64), np.maximum(b - a, 0))
    else:  # host rows out of start order: the mask per window (never seen)
        parts = [_host_rows_between(analysis, float(x), float(y)) for x, y in zip(lo, hi,
                                                                               strict=True)]
        rows = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
        win = np.repeat(np.arange(n_w, dtype=np.int64), [p.shape[0] for p in parts])
    keep = (m.kind[rows] != Kind.PYTHON) & (rows != step_row[win])
    return rows[keep], win[keep]


def _window_activities(analysis: SpanAnalysis, lo_w: int, hi_w: int,
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The activity rows of windows ``lo_w:hi_w`` (``window_activity_rows``), window
    after window, and each one's window (less ``lo_w``)."""
    n_w = hi_w - lo_w
    acts = analysis.model.device_activity_rows
    if len(analysis.host_steps) and len(analysis.windows) == len(analysis.host_steps):
        order, cut = analysis._activities_by_window
        return (acts[order[cut[lo_w]:cut[hi_w]]].astype(np.int64),
                np.repeat(np.arange(n_w, dtype=np.int64), np.diff(cut[lo_w:hi_w + 1])))
    parts = [analysis.window_activity_rows(k) for k in range(lo_w, hi_w)]
    rows = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return rows, np.repeat(np.arange(n_w, dtype=np.int64), [p.shape[0] for p in parts])


def flat_forest(analysis: SpanAnalysis, lo_w: int = 0, hi_w: int | None = None,
                ) -> FlatForest:
    """The call trees (``flat_tree``'s) of windows ``lo_w:hi_w`` (None: to the last), as
    one :class:`FlatForest`. Not kept on the analysis: the rule reads it once, and on 10⁶
    steps at once it would be hundreds of MB."""
    m = analysis.model
    hi_w = len(analysis.windows) if hi_w is None else min(hi_w, len(analysis.windows))
    lo_w = min(lo_w, hi_w)
    lo, hi, step_row = _window_bounds(analysis, lo_w, hi_w)
    n_w = step_row.shape[0]
    host, h_win = _window_host_rows(analysis, lo_w, hi_w)
    acts, a_win = _window_activities(analysis, lo_w, hi_w)
    stride = len(m) + 1  # a key per (window, row); row -1 never matches
    n = host.shape[0]
    h_off = np.zeros(n_w + 1, dtype=np.int64)
    np.cumsum(np.bincount(h_win, minlength=n_w), out=h_off[1:])
    key = h_win * stride + host  # ascending: windows in order, rows in order within
    pos = np.arange(n, dtype=np.int64)
    par = m.parent[host].astype(np.int64)
    at = np.searchsorted(key, h_win * stride + par)
    placed = (par >= 0) & (at < n)
    placed[placed] = key[at[placed]] == (h_win * stride + par)[placed]
    placed &= at < pos  # under a call the tree has already placed
    up = np.where(placed, at, -1)
    level = count_above(up, np.ones(n, dtype=bool)).astype(np.int64)

    top = np.flatnonzero(~placed)
    with_step = step_row[h_win[top]] >= 0
    step_lane = m.lane[np.maximum(step_row, 0)]
    other = top[with_step & (m.lane[host[top]] != step_lane[h_win[top]])]
    # Room for every node: the steps, a thread node per other-thread call at most, a node
    # per call and per activity at most (no more: 10^6 steps' columns are large).
    nodes = _Nodes(n_w + other.shape[0] + n + acts.shape[0])
    nodes.size = n_w  # node k < n_w: window k's step
    node_win = np.full(nodes.parent.shape[0], -1, dtype=np.int64)
    node_win[:n_w] = np.arange(n_w)
    local = pos - h_off[h_win]  # a call's position within its window
    under = h_win.copy()  # the parent node of each top call: its step, or a thread node
    labels: list[str] = []
    thread_label = np.zeros(0, dtype=np.int64)
    if other.size:  # calls on other threads: a node per (window, thread label)
        lanes, inv = np.unique(m.lane[host[other]], return_inverse=True)
        by_label: dict[str, int] = {}
        code = np.asarray([by_label.setdefault(m.lanes[ln].label, len(by_label))
                           for ln in lanes.tolist()], dtype=np.int64)[inv.ravel()]
        labels = list(by_label)
        pair = h_win[other] * len(labels) + code
        uniq, g = np.unique(pair, return_inverse=True)
        g = g.ravel()
        first = np.full(uniq.shape[0], n, dtype=np.int64)
        np.minimum.at(first, g, local[other])
        ids = nodes.size + np.arange(uniq.shape[0], dtype=np.int64)
        sl = slice(nodes.size, nodes.size + uniq.shape[0])
        nodes.parent[sl] = uniq // len(labels)  # the window's step node
        nodes.kind[sl], nodes.depth[sl] = THREAD, 1
        nodes.order[sl] = 2 * first  # created just before its first call's node
        node_win[sl] = uniq // len(labels)
        thread_label = uniq % len(labels)
        nodes.size += uniq.shape[0]
        under[other] = ids[g]
    n_threads = thread_label.shape[0]
    node_of = np.full(n, -1, dtype=np.int64)
    kind = m.kind[host].astype(np.int64)
    name = m.name[host].astype(np.int64)
    for d, at_d in enumerate(depth_levels(level)):  # a pass per level, every window at once
        pid = under[at_d] if d == 0 else node_of[up[at_d]]
        was = nodes.size
        node_of[at_d] = nodes.add(pid, kind[at_d], name[at_d], local[at_d])
        node_win[was:nodes.size] = node_win[nodes.parent[was:nodes.size]]

    launcher = m.launcher[acts].astype(np.int64)
    a_key = a_win * stride + launcher
    la = np.searchsorted(key, a_key)
    ok = (launcher >= 0) & (la < n)
    ok[ok] = key[la[ok]] == a_key[ok]
    a_pid = a_win.copy()
    a_pid[ok] = node_of[la[ok]]
    a_off = np.zeros(n_w + 1, dtype=np.int64)
    np.cumsum(np.bincount(a_win, minlength=n_w), out=a_off[1:])
    a_local = (np.diff(h_off)[a_win] + np.arange(acts.shape[0], dtype=np.int64)
               - a_off[a_win])  # after the window's calls, as flat_tree numbers them
    was = nodes.size
    a_node = nodes.add(a_pid, m.kind[acts].astype(np.int64), m.name[acts].astype(np.int64),
                       a_local)
    node_win[was:nodes.size] = node_win[nodes.parent[was:nodes.size]]
    label = np.full(nodes.size, -1, dtype=np.int64)
    label[n_w:n_w + n_threads] = thread_label
    return _finish(analysis, hi - lo, nodes, node_win[:nodes.size], label, labels, host,
                   h_win, acts, a_win, node_of, a_node, step_row, stride, lo_w)


def _finish(analysis: SpanAnalysis, host_wall: np.ndarray, nodes: _Nodes, node_win: np.ndarray,
            label: np.ndarray, labels: list[str], host: np.ndarray, h_win: np.ndarray,
            acts: np.ndarray, a_win: np.ndarray, node_of: np.ndarray, a_node: np.ndarray,
            step_row: np.ndarray, stride: int, first_window: int) -> FlatForest:
    """Renumber the nodes window by window in creation order and sum their calls in the
    order of each window's rows (``dispatch_flat._finish``, every window at once)."""
    m = analysis.model
    n_w = step_row.shape[0]
    size = nodes.size
    creation = np.lexsort((nodes.order[:size], node_win))  # a window's step first (-1)
    renum = np.empty(size, dtype=np.int64)
    renum[creation] = np.arange(size, dtype=np.int64)
    parent = nodes.parent[:size][creation]
    is_root = parent < 0
    parent[~is_root] = renum[parent[~is_root]]
    win = node_win[creation]
    offsets = np.zeros(n_w + 1, dtype=np.int64)
    np.cumsum(np.bincount(win, minlength=n_w), out=offsets[1:])
    # Host rows then activities: within a node (all calls or all activities) its rows in
    # the order of the window's own concatenation, so every bincount sum is the same.
    row_node = renum[np.concatenate([node_of, a_node])]
    rows = np.concatenate([host, acts])
    rwin = np.concatenate([h_win, a_win])
    count = np.bincount(row_node, minlength=size).astype(np.int64)
    total = np.bincount(row_node, weights=m.dur[rows], minlength=size).astype(np.float64)
    pos_first = np.full(size, rows.shape[0], dtype=np.int64)
    np.minimum.at(pos_first, row_node, np.arange(rows.shape[0], dtype=np.int64))
    first = np.full(size, -1, dtype=np.int64)
    has = pos_first < rows.shape[0]
    first[has] = rows[pos_first[has]]
    roots = offsets[:-1]
    count[roots] = 1
    total[roots] = np.where(step_row >= 0, m.dur[np.maximum(step_row, 0)], host_wall)
    first[roots] = step_row
    kind = nodes.kind[:size][creation]
    depth = nodes.depth[:size][creation]
    forest = FlatForest(offsets=offsets, window=win, parent=parent, kind=kind,
                        name=nodes.name[:size][creation], label=label[creation],
                        labels=labels, depth=depth, count=count, total_us=total,
                        device_us=np.zeros(size), first_row=first, row_key=rows,
                        row_node=row_node, stride=stride, first_window=first_window)
    forest.device_us = roll_up(parent, kind, forest.levels(), forest.is_device, count, total)
    row_key = rwin * stride + rows
    order = np.argsort(row_key, kind="stable")
    forest.row_key, forest.row_node = row_key[order], row_node[order]
    return forest
