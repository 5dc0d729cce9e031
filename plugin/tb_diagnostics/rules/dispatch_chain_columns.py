"""The ``dispatch-chain`` rule's chain of every window at once, as columns.

:func:`~tb_diagnostics.rules.dispatch_chain.flat_path_chain` reads one window's tree and
walks its chain down a node at a time; the rule needs every window's chain (it groups the
steps by chain), and on a span of 10⁵ tiny steps those per-window calls were half the
report. Here the same choice is made for every window of
:func:`~tb_diagnostics.analysis.dispatch_forest.flat_forest` together, one depth per
pass:

- the path time on each node (the window's critical-path segments on its rows), rolled
  up to each node with the device work below it, children in order (the same floats);
- from each window's step down, the child leading to device work with the most path time
  on and below it, then the most device time, then the most host time, then the first
  (a sort by those keys per parent, the chosen one last);
- where a window's walk ends off the device or with no path time on it, the chain
  :func:`~tb_diagnostics.rules.dispatch_chain.best_chain` picks: among the device leaves
  below a GEMM (all of them where none is), the most device time, then the most host time
  summed from the step down, then the first chain in the tree's order (the leaf's
  pre-order rank, children in number order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.critpath import critical_paths
from tb_diagnostics.analysis.dispatch_flat import THREAD, _root_name
from tb_diagnostics.analysis.dispatch_forest import FlatForest, flat_forest
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.rules._util import name_ids_matched


@dataclass(frozen=True)
class PathChains:
    """Every window's chain: ``nodes[k, :length[k]]`` (forest node numbers, the step's
    first; -1 beyond), and the path time on its nodes below the step (0: the fallback)."""

    forest: FlatForest
    nodes: np.ndarray  # (windows, depth) int64
    length: np.ndarray  # int64, 0 where the window has no chain
    on_path: np.ndarray  # float64


def _path_per_node(analysis: SpanAnalysis, f: FlatForest) -> np.ndarray:
    """The critical-path time on each node: every window's segments on its rows, summed
    in the segments' order."""
    cp = critical_paths(analysis)
    n_w = f.offsets.shape[0] - 1
    bounds = cp.offsets[f.first_window:f.first_window + n_w + 1].astype(np.int64)
    sizes = np.diff(bounds)
    seg = np.arange(int(bounds[-1]) - int(bounds[0])) + int(bounds[0])
    key = np.repeat(np.arange(n_w, dtype=np.int64), sizes) * f.stride + cp.row[seg]
    at = np.searchsorted(f.row_key, key)
    hit = at < f.row_key.shape[0]
    hit[hit] = f.row_key[at[hit]] == key[hit]
    return np.bincount(f.row_node[at[hit]], weights=cp.dur[seg][hit],
                       minlength=len(f)).astype(np.float64)


def _pick(cand: np.ndarray, group: np.ndarray, keys: tuple[np.ndarray, ...],
          ) -> tuple[np.ndarray, np.ndarray]:
    """Per group of ``cand``: the one with the largest ``keys`` (compared in turn), ties
    to the lowest number. Returns the groups and their picks."""
    order = np.lexsort((-cand, *(k[cand] for k in reversed(keys)), group))
    g = group[order]
    last = np.ones(order.shape[0], dtype=bool)
    last[:-1] = g[1:] != g[:-1]
    return g[last], cand[order[last]]


def path_chains(analysis: SpanAnalysis, gemm: re.Pattern[str], lo_w: int = 0,
                hi_w: int | None = None) -> PathChains:
    """The chain on its critical path (``flat_path_chain``'s) of every window of
    ``lo_w:hi_w`` (None: to the last; row ``k`` is window ``lo_w + k``), with ``gemm``
    naming the GEMM calls of the fallback."""
    f = flat_forest(analysis, lo_w, hi_w)
    n_w = f.offsets.shape[0] - 1
    per_node = _path_per_node(analysis, f)
    levels = f.levels()
    is_dev = f.is_device
    roots = f.roots
    below, leads = per_node.copy(), is_dev.copy()
    below[roots] = 0.0  # the step's own time is every chain's and no chain's
    for lv in reversed(levels[1:]):  # path time on and below each node, children in order
        np.add.at(below, f.parent[lv], below[lv])
        leads[f.parent[lv][leads[lv]]] = True  # an OR: logical_or.at was 2x slower
    chain = np.full((n_w, max(len(levels), 1)), -1, dtype=np.int64)
    chain[:, 0] = roots
    cur, on = roots.copy(), np.zeros(n_w)
    length = np.ones(n_w, dtype=np.int64)
    walking = ~is_dev[cur]
    for d in range(1, len(levels)):  # one depth per pass, every window still walking
        kids = levels[d]
        kids = kids[leads[kids] & walking[f.window[kids]]]
        kids = kids[f.parent[kids] == cur[f.window[kids]]]
        won, pick = _pick(kids, f.window[kids], (below, f.device_us, f.total_us))
        stuck = walking.copy()
        stuck[won] = False
        walking &= ~stuck  # no child leads to device work: the walk stops there
        on[won] += per_node[pick]
        cur[won] = pick
        chain[won, d] = pick
        length[won] = d + 1
        walking[won] = ~is_dev[pick]
        if not walking.any():
            break
    bad = ~(is_dev[cur] & (on > 0))
    if bad.any():
        nodes, size = _best_chains(analysis, f, levels, gemm)
        chain[bad] = nodes[bad]
        length[bad] = size[bad]
        on[bad] = 0.0
    return PathChains(forest=f, nodes=chain, length=length, on_path=on)


def _gemm_nodes(analysis: SpanAnalysis, f: FlatForest, gemm: re.Pattern[str]) -> np.ndarray:
    """Whether each node's own name is a GEMM's (the step's and the threads' too)."""
    strings = analysis.model.strings
    sids = unique(f.name[f.name >= 0])
    by_sid = np.zeros(int(sids.max()) + 1 if sids.size else 1, dtype=bool)
    by_sid[sids] = [bool(gemm.match(strings[s])) for s in sids.tolist()]
    out = by_sid[np.maximum(f.name, 0)] & (f.name >= 0)
    threads = np.flatnonzero(f.kind == THREAD)
    by_label = np.asarray([bool(gemm.match(s)) for s in f.labels], dtype=bool)
    out[threads] = by_label[f.label[threads]] if by_label.size else False
    roots = f.roots
    rows = f.first_row[roots]
    if analysis.host_steps.inferred or not (rows >= 0).all():
        out[roots] = [bool(gemm.match(_root_name(analysis, f.first_window + k)))
                      for k in range(roots.size)]
    else:  # the step's event names it: the names the pattern matches, found once
        out[roots] = np.isin(analysis.model.name[rows], name_ids_matched(analysis, gemm))
    return out


def _best_chains(analysis: SpanAnalysis, f: FlatForest, levels: list[np.ndarray],
                 gemm: re.Pattern[str]) -> tuple[np.ndarray, np.ndarray]:
    """``best_chain`` of every window: its nodes (as :class:`PathChains`) and lengths."""
    n_w = f.offsets.shape[0] - 1
    is_gemm = _gemm_nodes(analysis, f, gemm)
    path_us = f.total_us.copy()  # the path's summed host time, from the step down
    path_us[f.roots] = 0 + f.total_us[f.roots]
    size = np.ones(len(f), dtype=np.int64)  # nodes in each subtree
    for lv in reversed(levels[1:]):
        np.add.at(size, f.parent[lv], size[lv])
    rank = np.zeros(len(f), dtype=np.int64)  # pre-order, children in number order
    for lv in levels[1:]:
        is_gemm[lv] |= is_gemm[f.parent[lv]]
        path_us[lv] = path_us[f.parent[lv]] + f.total_us[lv]
        by_parent = lv[np.argsort(f.parent[lv], kind="stable")]
        p = f.parent[by_parent]
        before = np.cumsum(size[by_parent]) - size[by_parent]  # earlier siblings' sizes
        new = np.ones(p.shape[0], dtype=bool)
        new[1:] = p[1:] != p[:-1]
        start = np.maximum.accumulate(np.where(new, np.arange(p.shape[0]), 0))
        rank[by_parent] = rank[p] + 1 + before - before[start]
    leaves = np.flatnonzero(f.is_device)
    win = f.window[leaves]
    has_gemm = np.zeros(n_w, dtype=bool)
    has_gemm[win[is_gemm[leaves]]] = True
    pool = leaves[is_gemm[leaves] | ~has_gemm[win]]
    won, pick = _pick(pool, f.window[pool], (f.device_us, path_us, -rank))
    depth = len(levels)
    nodes = np.full((n_w, max(depth, 1)), -1, dtype=np.int64)
    length = np.zeros(n_w, dtype=np.int64)
    length[won] = f.depth[pick] + 1
    at = pick.copy()
    for _ in range(depth):  # from each leaf up to its step
        ok = at >= 0
        nodes[won[ok], f.depth[at[ok]]] = at[ok]
        at[ok] = f.parent[at[ok]]
        if not (at >= 0).any():
            break
    return nodes, length
