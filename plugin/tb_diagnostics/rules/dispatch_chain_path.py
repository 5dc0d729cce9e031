"""Which dispatch chain of a step its critical path runs through (``dispatch-chain``).

A step's call tree (:mod:`tb_diagnostics.analysis.dispatch`) merges calls with one name
under one parent into a node; a chain is a root-to-activity path of nodes. A segment of
the step's critical path (:mod:`tb_diagnostics.analysis.critpath`) lies on a node when its
event is one of the calls (or activities) merged into it: an op's dispatch, a launch call,
the launch latency named after it, a kernel. A chain's **path time** is the path time on
its nodes below the step (the step's own time, outside any call, is every chain's and
no chain's). The chain the path runs through is found from the step down: at each level
the child with the most path time on and below it, so a label whose own time is on the
path (the main thread waiting inside ``## backward ##``) leads the way, and below it the
call holding most of the rest.

The nodes of a window's rows are found the way the tree places them: each host call under
its parent's node where the parent is one of the window's calls (Python frames are not),
else under the step (a call on another thread: under that thread's node); each activity
under its launch call's node, else under the step. Node identity is the path of
``(kind, name)`` from the root, so a chain of the tree names its nodes exactly.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.critpath import critical_paths
from tb_diagnostics.analysis.dispatch import KIND_LABEL, CallNode
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.categories import Kind

#: The step's node.
ROOT = 0


def _ids(ids: dict[tuple[int, str, str], int], analysis: SpanAnalysis, pid: np.ndarray,
         rows: np.ndarray) -> np.ndarray:
    """The node of each row under its parent node ``pid``: ``(pid, kind, name)``, numbered
    in ``ids`` as first seen."""
    m = analysis.model
    if not rows.size:
        return np.zeros(0, dtype=np.int64)
    key = np.stack([pid, m.kind[rows].astype(np.int64), m.name[rows].astype(np.int64)])
    uniq, inv = np.unique(key, axis=1, return_inverse=True)
    out = np.empty(uniq.shape[1], dtype=np.int64)
    for j, (p, k, n) in enumerate(uniq.T.tolist()):
        out[j] = ids.setdefault((p, KIND_LABEL[Kind(k)], m.strings[n]), len(ids) + 1)
    return out[inv.ravel()]


def _row_nodes(analysis: SpanAnalysis, index: int,
               ) -> tuple[dict[tuple[int, str, str], int], np.ndarray, np.ndarray]:
    """The numbered nodes of window ``index``, its rows (sorted) and each one's node."""
    m = analysis.model
    w = analysis.windows[index]
    host = m.host_rows
    host = host[(m.start[host] >= w.host_start) & (m.start[host] < w.host_end)]
    host = host[(m.kind[host] != Kind.PYTHON) & (host != w.row)]
    ids: dict[tuple[int, str, str], int] = {}
    node = np.full(host.size, -1, dtype=np.int64)
    par = m.parent[host].astype(np.int64)
    at = np.searchsorted(host, par)
    placed = (par >= 0) & (at < host.size)
    placed[placed] = host[at[placed]] == par[placed]
    # Calls whose parent is not one of the window's: under the step, or their thread's node.
    top = np.flatnonzero(~placed)
    step_lane = int(m.lane[w.row]) if w.row >= 0 else -1
    pid = np.full(top.size, ROOT, dtype=np.int64)
    other = (m.lane[host[top]] != step_lane) & (w.row >= 0)
    for lane in sorted_sets.unique(m.lane[host[top][other]]).tolist():
        tid = ids.setdefault((ROOT, "thread", m.lanes[lane].label), len(ids) + 1)
        pid[other & (m.lane[host[top]] == lane)] = tid
    node[top] = _ids(ids, analysis, pid, host[top])
    todo = np.flatnonzero(placed)
    while todo.size:  # one nesting level a pass
        ready = node[at[todo]] >= 0
        now = todo[ready]
        node[now] = _ids(ids, analysis, node[at[now]], host[now])
        todo = todo[~ready]
        if not now.size:
            break
    acts = analysis.window_activity_rows(index)
    launcher = m.launcher[acts].astype(np.int64)
    la = np.searchsorted(host, launcher)
    ok = (launcher >= 0) & (la < host.size)
    ok[ok] = host[la[ok]] == launcher[ok]
    a_pid = np.full(acts.size, ROOT, dtype=np.int64)
    a_pid[ok] = node[la[ok]]
    a_node = _ids(ids, analysis, a_pid, acts)
    rows = np.concatenate([host, acts]).astype(np.int64)
    order = np.argsort(rows, kind="stable")
    return ids, rows[order], np.concatenate([node, a_node])[order]


def _path_per_node(analysis: SpanAnalysis, index: int,
                   ) -> tuple[dict[tuple[int, str, str], int], np.ndarray]:
    """The window's numbered nodes and the critical-path time on each (by number)."""
    cp = critical_paths(analysis)
    sl = cp.step(index)
    ids, rows, nodes = _row_nodes(analysis, index)
    seg = cp.row[sl]
    at = np.searchsorted(rows, seg)
    hit = at < rows.size
    hit[hit] = rows[at[hit]] == seg[hit]
    per_node = np.bincount(nodes[at[hit]], weights=cp.dur[sl][hit],
                           minlength=len(ids) + 1) if rows.size else np.zeros(len(ids) + 1)
    return ids, per_node


def chain_path_us(analysis: SpanAnalysis, index: int,
                  paths: list[list[CallNode]]) -> list[float]:
    """Per chain of window ``index``'s call tree: the step's critical-path time on its
    nodes below the step."""
    if not paths:
        return []
    ids, per_node = _path_per_node(analysis, index)
    out = []
    for chain in paths:
        pid, us = ROOT, 0.0
        for c in chain[1:]:
            key = (pid, c.kind, c.name)
            if key not in ids:
                break
            pid = ids[key]
            us += float(per_node[pid])
        out.append(us)
    return out


_DEVICE = ("kernel", "memcpy", "memset")


def heaviest_path_chain(analysis: SpanAnalysis, index: int,
                        root: CallNode) -> tuple[list[CallNode], float]:
    """The chain the step's critical path runs through most: from the step down, at each
    level the child (leading to device work) with the most path time on it and below it,
    ties to the one with more device time, then more host time. Returns the chain and the
    path time on its nodes; an empty chain where the path is on none of the tree's nodes
    below the step."""
    ids, per_node = _path_per_node(analysis, index)
    below: dict[int, float] = {}
    leads: dict[int, bool] = {}

    def visit(node: CallNode, nid: int) -> tuple[float, bool]:
        """Path time on and below ``node``, and whether device work is below it."""
        total = float(per_node[nid]) if nid > ROOT else 0.0
        device = node.kind in _DEVICE
        for c in node.children.values():
            cid = ids.get((nid, c.kind, c.name), -1)
            t, d = visit(c, cid) if cid >= 0 else (0.0, _has_device(c))
            total += t
            device = device or d
            below[id(c)], leads[id(c)] = t, d
        return total, device

    visit(root, ROOT)
    chain, node, on = [root], root, 0.0
    nid = ROOT
    while node.kind not in _DEVICE:
        kids = [c for c in node.children.values() if leads.get(id(c))]
        if not kids:
            return [], 0.0
        node = max(kids, key=lambda c: (below[id(c)], c.device_us, c.total_us))
        nid = ids.get((nid, node.kind, node.name), -1)
        on += float(per_node[nid]) if nid >= 0 else 0.0
        chain.append(node)
    return (chain, on) if on > 0 else ([], 0.0)


def _has_device(node: CallNode) -> bool:
    return node.kind in _DEVICE or any(_has_device(c) for c in node.children.values())
