"""The Modules view: the ``nn.Module`` tree of a span, from the ``nn.Module: Name_N``
``python_function`` frames that ``with_stack`` / ``with_modules`` record.

A *node* is a module at one place of the tree: the path of module frames from the
outermost one (``BertModel_0 / BertEncoder_0 / BertLayer_3``), so a module called from
two places is two nodes and the calls of every step add up on the same node. A frame's
parent module is the nearest module frame enclosing it on its thread (the host nesting).

Per frame: host time is its duration; device time is that of the activities whose
launch call (runtime/driver) starts within the frame's interval on the frame's thread,
so a module's device time includes its sub-modules'. *Self* figures subtract the direct
sub-modules' frames. Frames on a lane of their own (no op on it; the profiler may put
Python frames there) enclose the calls of every host lane of their process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.hierarchy import count_above, nearest_marked
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.trace.categories import Kind

MODULE_FRAME = re.compile(r"^nn\.Module: ")
MODULE_PREFIX = "nn.Module: "


@dataclass(frozen=True)
class ModuleTree:
    """Module frames and the nodes they fall into (node ids: by first call, so a parent
    comes before its children)."""

    frames: np.ndarray  # module frame rows, in start order
    frame_node: np.ndarray  # node of each frame
    frame_window: np.ndarray  # step window of each frame, -1 outside steps
    host_us: np.ndarray  # per frame: duration
    host_self_us: np.ndarray  # per frame: minus the direct sub-module frames
    device_us: np.ndarray  # per frame: activities launched within it
    device_self_us: np.ndarray
    node_parent: np.ndarray  # per node: parent node, -1 for a root
    node_name: np.ndarray  # per node: string id of the frame name
    node_depth: np.ndarray

    def __len__(self) -> int:
        return int(self.node_parent.shape[0])

    @property
    def present(self) -> bool:
        return bool(self.frames.size)


def module_frame_rows(analysis: SpanAnalysis) -> np.ndarray:
    m = analysis.model
    rows = m.rows_matching(MODULE_FRAME)
    return rows[m.kind[rows] == Kind.PYTHON]


def work_lanes(analysis: SpanAnalysis, lane: int) -> np.ndarray:
    """The lanes whose calls a frame on ``lane`` encloses: its own, or, where Python frames
    sit on a lane of their own (no op on it), every host lane of the same process."""
    m = analysis.model
    ops = analysis.op_rows
    if (m.lane[ops] == lane).any() or not ops.size:
        return np.asarray([lane])
    pid = m.lanes[lane].pid
    return np.asarray([i for i, ln in enumerate(m.lanes) if ln.pid == pid and not ln.is_device])


def _launched_within(analysis: SpanAnalysis, frames: np.ndarray) -> np.ndarray:
    """Device µs of the activities whose launch call starts inside each frame, on the
    frame's thread: prefix sums over launches sorted by time, per lane."""
    m = analysis.model
    acts = m.device_activity_rows
    launcher = m.launcher[acts]
    has = launcher >= 0
    lrow = launcher[has]
    t, lane, dur = m.start[lrow], m.lane[lrow], m.dur[acts[has]]
    out = np.zeros(frames.shape[0])
    f_lane = m.lane[frames]
    for ln in sorted_sets.unique(f_lane).tolist():
        on = np.isin(lane, work_lanes(analysis, ln))
        order = np.argsort(t[on], kind="stable")
        ts = t[on][order]
        csum = np.concatenate([[0.0], np.cumsum(dur[on][order])])
        mine = np.flatnonzero(f_lane == ln)
        lo = np.searchsorted(ts, m.start[frames[mine]], side="left")
        hi = np.searchsorted(ts, m.end[frames[mine]], side="right")
        out[mine] = csum[hi] - csum[lo]
    return out


@computed
def module_tree(analysis: SpanAnalysis) -> ModuleTree:
    m = analysis.model
    frames = module_frame_rows(analysis).astype(np.int64)
    nf = frames.shape[0]
    if not nf:  # no module frames: no climb over every row of the span for nothing
        none, empty = np.zeros(0, dtype=np.int64), np.zeros(0)
        return ModuleTree(frames=none, frame_node=none, frame_window=none, host_us=empty,
                          host_self_us=empty, device_us=empty, device_self_us=empty,
                          node_parent=none, node_name=none, node_depth=none)
    marked = np.zeros(len(m), dtype=bool)
    marked[frames] = True
    # The nearest module frame strictly above each frame, as a frame index.
    above = nearest_marked(m.parent, marked)
    par = m.parent[frames]
    parent_row = np.where(par >= 0, above[np.maximum(par, 0)], -1)
    pos = np.full(len(m), -1, dtype=np.int64)
    pos[frames] = np.arange(nf)
    parent_frame = np.where(parent_row >= 0, pos[np.maximum(parent_row, 0)], -1)
    # Module depth by pointer jumping (log depth passes, not one per level).
    depth = count_above(parent_frame, np.ones(nf, dtype=bool))
    # The frames of each level, found once (a stable sort keeps each level in start
    # order), not by a scan of every frame per level.
    by_depth = np.argsort(depth, kind="stable")
    level_end = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 1), side="right")
    # Nodes level by level: (parent node, frame name) pairs, interned.
    frame_node = np.full(nf, -1, dtype=np.int64)
    names = m.name[frames].astype(np.int64)
    node_parent: list[np.ndarray] = []
    node_name: list[np.ndarray] = []
    node_depth: list[np.ndarray] = []
    count = 0
    for d in range(int(depth.max()) + 1 if nf else 0):
        at = by_depth[level_end[d - 1] if d else 0:level_end[d]]
        pnode = frame_node[parent_frame[at]] if d else np.full(at.size, -1)
        key = (pnode + 1) * (len(m.strings) + 1) + names[at]
        uniq, inv = np.unique(key, return_inverse=True)
        frame_node[at] = count + inv.reshape(-1)
        node_parent.append(uniq // (len(m.strings) + 1) - 1)
        node_name.append(uniq % (len(m.strings) + 1))
        node_depth.append(np.full(uniq.shape[0], d))
        count += uniq.shape[0]
    n_parent = np.concatenate(node_parent) if node_parent else np.zeros(0, np.int64)
    n_name = np.concatenate(node_name) if node_name else np.zeros(0, np.int64)
    n_depth = np.concatenate(node_depth) if node_depth else np.zeros(0, np.int64)
    # Renumber by first call (frames are in start order; a parent starts first).
    first = np.full(count, nf, dtype=np.int64)
    np.minimum.at(first, frame_node, np.arange(nf))
    order = np.lexsort((n_depth, first))
    new_id = np.empty(count, dtype=np.int64)
    new_id[order] = np.arange(count)
    n_parent = np.where(n_parent >= 0, new_id[np.maximum(n_parent, 0)], -1)[order]
    frame_node = new_id[frame_node] if nf else frame_node

    host = m.dur[frames]
    device = _launched_within(analysis, frames) if nf else np.zeros(0)
    child = parent_frame >= 0
    host_self = host - np.bincount(parent_frame[child], weights=host[child], minlength=nf)
    dev_self = device - np.bincount(parent_frame[child], weights=device[child], minlength=nf)
    return ModuleTree(frames=frames, frame_node=frame_node,
                      frame_window=window_of_rows(analysis, frames).astype(np.int64),
                      host_us=host, host_self_us=np.maximum(host_self, 0.0),
                      device_us=device, device_self_us=np.maximum(dev_self, 0.0),
                      node_parent=n_parent, node_name=n_name[order], node_depth=n_depth[order])


@dataclass(frozen=True)
class ModuleFigures:
    """Per node, over a selection of frames (the span or one step window)."""

    calls: np.ndarray
    host_us: np.ndarray
    host_self_us: np.ndarray
    device_us: np.ndarray
    device_self_us: np.ndarray


def module_figures(analysis: SpanAnalysis, window: int | None = None) -> ModuleFigures:
    t = module_tree(analysis)
    sel = np.ones(t.frames.shape[0], dtype=bool) if window is None else t.frame_window == window
    node = t.frame_node[sel]
    n = len(t)

    def s(v: np.ndarray) -> np.ndarray:
        return np.bincount(node, weights=v[sel], minlength=n)

    return ModuleFigures(calls=np.bincount(node, minlength=n), host_us=s(t.host_us),
                         host_self_us=s(t.host_self_us), device_us=s(t.device_us),
                         device_self_us=s(t.device_self_us))


def node_path(analysis: SpanAnalysis, node: int) -> list[str]:
    """The module names from the root to ``node``."""
    t = module_tree(analysis)
    out = []
    while node >= 0:
        out.append(analysis.model.strings[int(t.node_name[node])].removeprefix(MODULE_PREFIX))
        node = int(t.node_parent[node])
    return out[::-1]


def ops_within(analysis: SpanAnalysis, node: int, ops: np.ndarray) -> np.ndarray:
    """Over ``ops`` (host rows): which run inside a frame of ``node`` (or of a module
    under it) on the frame's thread."""
    m = analysis.model
    t = module_tree(analysis)
    frames = t.frames[t.frame_node == node]
    inside = np.zeros(ops.shape[0], dtype=bool)
    o_lane = m.lane[ops]
    for ln in sorted_sets.unique(m.lane[frames]).tolist():
        f = frames[m.lane[frames] == ln]
        lanes = work_lanes(analysis, ln)
        # Outermost frames only (a node does not nest in itself, but stay safe): the
        # running maximum of ends tells whether a frame is inside an earlier one.
        ends = np.maximum.accumulate(m.end[f])
        keep = np.ones(f.shape[0], dtype=bool)
        keep[1:] = m.start[f][1:] >= ends[:-1]
        f = f[keep]
        mine = np.flatnonzero(np.isin(o_lane, lanes))
        at = np.searchsorted(m.start[f], m.start[ops[mine]], side="right") - 1
        ok = at >= 0
        hit = np.zeros(mine.shape[0], dtype=bool)
        hit[ok] = m.end[ops[mine][ok]] <= m.end[f[at[ok]]] + 1e-3
        inside[mine] |= hit
    return inside
