"""Dispatch chain: the path from the step to the kernel, with the time at each level.

What it detects
    For each step, the chain ``ProfilerStep#N → record_function → aten::* →
    aten::mm|bmm|addmm → runtime call → kernel`` in the step's aggregated call
    tree (calls with the same name under the same parent merged) that the step's
    critical path runs through: from the step down, at each level the call with the
    most of the path's time on it and below it (``rules.dispatch_chain_path``), which
    is what the step's end waits on. Where the path touches no chain, the chain that
    leads to a GEMM
    (``mm``, ``bmm``, ``addmm``, ``matmul``, ``linear``, convolution) with the most
    device time, else the chain with the most device time. Steps with the same
    chain are reported together, with median times.

Why it matters
    It is the guide's "event chain" read for you: where the host time of each
    level goes, how many calls it fans out to, and which kernel finally does the
    work. A level whose host time is far above its children's is dispatcher
    or Python overhead; a chain ending in a copy instead of a GEMM is a
    surprise worth looking at.

How to fix
    Nothing to fix; information. The tab draws the chain; compare it with what
    the code was meant to run (e.g. ``aten::matmul → aten::bmm`` where you
    expected a 2-D ``aten::mm``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.critpath import critical_paths
from tb_diagnostics.analysis.dispatch import KIND_LABEL, CallNode, chains
from tb_diagnostics.analysis.dispatch_flat import THREAD, FlatTree, flat_tree
from tb_diagnostics.analysis.dispatch_forest import FlatForest
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.rules._util import MAX_EVIDENCE, fmt_us, short_name, steps_text
from tb_diagnostics.rules.base import Evidence, Finding, Rule, evidence
from tb_diagnostics.rules.dispatch_chain_columns import path_chains
from tb_diagnostics.rules.dispatch_chain_path import heaviest_path_chain
from tb_diagnostics.trace.categories import Kind

GEMM = re.compile(r"^aten::(?:mm|bmm|addmm|baddbmm|addbmm|matmul|linear|_?convolution"
                  r"|cudnn_convolution|conv\dd)$")
_DEVICE = ("kernel", "memcpy", "memset")


@dataclass(frozen=True)
class Thresholds:
    #: Report at most this many distinct chains per span.
    max_chains: int = 3


def best_chain(root: CallNode) -> list[CallNode]:
    """The GEMM chain with the most device time, else the chain with the most device time."""
    paths = chains(root)
    if not paths:
        return []
    gemm = [p for p in paths if any(GEMM.match(n.name) for n in p)]
    pool = gemm or paths
    return max(pool, key=lambda p: (p[-1].device_us, sum(n.total_us for n in p)))


def path_chain(analysis: SpanAnalysis, index: int,
               root: CallNode) -> tuple[list[CallNode], float]:
    """Window ``index``'s chain on its critical path, with the path time on its nodes (µs):
    from the step down, the child with the most path time on and below it
    (:func:`~tb_diagnostics.rules.dispatch_chain_path.heaviest_path_chain`); where the
    path runs through no chain, :func:`best_chain` and 0."""
    chain, on = heaviest_path_chain(analysis, index, root)
    return (chain, on) if chain else (best_chain(root), 0.0)


def flat_path_chain(analysis: SpanAnalysis, index: int) -> tuple[list[CallNode], float]:
    """:func:`path_chain` of window ``index`` from its :class:`FlatTree` (the same chain
    and path time, no tree of objects): the chain's nodes, childless, each with its
    first row."""
    t = flat_tree(analysis, index)
    strings = analysis.model.strings
    cp = critical_paths(analysis)
    sl = cp.step(index)
    seg = cp.row[sl]
    at = np.searchsorted(t.rows, seg)
    hit = at < t.rows.shape[0]
    hit[hit] = t.rows[at[hit]] == seg[hit]
    per_node = np.bincount(t.row_node[at[hit]], weights=cp.dur[sl][hit],
                           minlength=len(t)).astype(np.float64)
    levels = t.levels()
    is_dev = t.is_device
    below, leads = per_node.copy(), is_dev.copy()
    below[0] = 0.0  # the step's own time is every chain's and no chain's
    for lv in reversed(levels[1:]):  # path time on and below each node, children in order
        np.add.at(below, t.parent[lv], below[lv])
        leads[t.parent[lv][leads[lv]]] = True  # an OR: logical_or.at was 2x slower
    kids_of = np.argsort(t.parent[1:], kind="stable") + 1  # by parent, in the tree's order
    cut = np.searchsorted(t.parent[kids_of], np.arange(len(t) + 1))
    chain, node, on = [0], 0, 0.0
    while not is_dev[node]:
        kids = kids_of[cut[node]:cut[node + 1]]
        kids = kids[leads[kids]]
        if not kids.size:
            break
        # The most path time, then device time, then host time; ties: the first child.
        for col in (below, t.device_us):
            kids = kids[col[kids] == col[kids].max()]
        node = int(kids[int(np.argmax(t.total_us[kids]))])
        on += float(per_node[node])
        chain.append(node)
    if not (is_dev[node] and on > 0):
        chain, on = _best_flat_chain(t, strings, levels, is_dev), 0.0
    return [t.call_node(k, strings) for k in chain], on


def _best_flat_chain(t: FlatTree, strings: list[str], levels: list[np.ndarray],
                     is_dev: np.ndarray) -> list[int]:
    """:func:`best_chain` on the flat tree: its nodes from the step down, or []."""
    leaves = np.flatnonzero(is_dev)
    if not leaves.size:
        return []
    sids = sorted_sets.unique(t.name[t.name >= 0])
    by_sid = np.zeros(int(sids.max()) + 1 if sids.size else 1, dtype=bool)
    by_sid[sids] = [bool(GEMM.match(strings[sid])) for sid in sids.tolist()]
    gemm = by_sid[np.maximum(t.name, 0)] & (t.name >= 0)
    for i, text in t.labels.items():  # the step's and the threads' names
        gemm[i] = bool(GEMM.match(text))
    path_us = t.total_us.copy()  # the path's summed host time, from the step down
    path_us[0] = 0 + t.total_us[0]
    for lv in levels[1:]:
        gemm[lv] |= gemm[t.parent[lv]]
        path_us[lv] = path_us[t.parent[lv]] + t.total_us[lv]
    pool = leaves[gemm[leaves]] if gemm[leaves].any() else leaves
    for col in (t.device_us, path_us):
        pool = pool[col[pool] == col[pool].max()]

    def path(k: int) -> list[int]:
        out = [k]
        while out[-1] > 0:
            out.append(int(t.parent[out[-1]]))
        return out[::-1]

    # Ties: the first chain in the tree's order (children in number order).
    return min(path(int(k)) for k in pool.tolist())


def _label(node: CallNode, total: float) -> str:
    times = f"{fmt_us(total)}"
    if node.kind in _DEVICE:
        return f"{short_name(node.name)} ×{node.count} ({times} on the device)"
    name = short_name(node.name)
    return f"{name} ×{node.count} ({times})" if node.count > 1 else f"{name} ({times})"


#: Windows whose chains are found in one pass: a fixed number, so that the pass's columns
#: stay bounded whatever the steps (10^5 tiny steps at once took 115 MB of columns).
CHUNK_WINDOWS = 1 << 15
#: Kind codes whose node the rule times by its device time (``_DEVICE``'s labels).
_DEVICE_KINDS = np.asarray([int(k) for k, v in KIND_LABEL.items() if v in _DEVICE],
                           dtype=np.int64)
#: Whether a kind code (offset by 9: -9 pads a chain, STEP and THREAD are -2 and -1) is
#: one of ``_DEVICE_KINDS``: a lookup, where np.isin sorted the chains' kinds per pass.
_QUOTES_DEVICE = np.zeros(max(int(k) for k in Kind) + 10, dtype=bool)
_QUOTES_DEVICE[_DEVICE_KINDS + 9] = True


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    windows = analysis.windows
    if not windows or analysis.cpu_only:
        return []
    # Every window's chain as columns (flat_path_chain per window was half the report on
    # a span of 10^5 tiny steps), grouped by the chain's (kind, name) levels.
    chains = _all_chains(analysis)
    if chains is None:
        return []
    valid, key, value, on_path = chains
    first, inv = _row_groups(key)
    size = np.bincount(inv)
    # Groups in the order their first step comes, the largest first (a stable sort).
    ordered = np.lexsort((first, -size))[: th.max_chains]
    out = []
    for g in ordered.tolist():
        members = np.flatnonzero(inv == g)
        k0 = int(valid[members[0]])
        pc = path_chains(analysis, GEMM, k0, k0 + 1)
        chain0 = [_call_node(analysis, pc.forest, int(k))
                  for k in pc.nodes[0, :pc.length[0]].tolist()]
        levels = [_label(node, float(np.median(value[members, depth])))
                  for depth, node in enumerate(chain0)]
        steps = _steps_of(analysis, valid[members])
        path_us = float(np.median(on_path[members]))
        median = " (median per step)" if len(members) > 1 else ""
        where = (f"{median}, the one the critical path runs through ({fmt_us(path_us)} of the "
                 "path on its calls and kernels)" if path_us > 0 else median)
        ev: list[Evidence] = []
        for node in chain0:
            ev.extend(evidence(analysis, r, f"level: {node.name}") for r in node.rows[:1]
                      if r >= 0)
        steps_named = _steps_named(analysis, valid[members])  # once per group
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title,
            subject=(steps_named if len(ordered) > 1 else None),
            message=(f"Dispatch chain in {steps_named}{where}: "
                     + " → ".join(levels) + "."),
            steps=steps, evidence=ev[:MAX_EVIDENCE], savings_us=None,
            confirm="expand the step in the trace view: the same nesting appears"))
    return out


def _all_chains(analysis: SpanAnalysis,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The windows with a chain of two levels or more, :data:`CHUNK_WINDOWS` at a time:
    their indices; per chain, its ``(kind, name)`` key at every level (-9 padded) and
    each level's time as the rule quotes it (device time for device work, else host
    time); and its path time. None where no window has one."""
    text_code = TextCodes(analysis.model.strings)  # one code per text across the passes
    parts = []
    for lo in range(0, len(analysis.windows), CHUNK_WINDOWS):
        pc = path_chains(analysis, GEMM, lo, lo + CHUNK_WINDOWS)
        ok = np.flatnonzero(pc.length >= 2)
        if ok.size:
            kind, code, value = _chain_columns(analysis, pc.forest, pc.nodes[ok], text_code)
            parts.append((lo + ok, kind, code, value, pc.on_path[ok]))
    if not parts:
        return None
    key, value = _stacked([p[1:4] for p in parts])
    return (np.concatenate([p[0] for p in parts]), key, value,
            np.concatenate([p[4] for p in parts]))


def _stacked(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
             ) -> tuple[np.ndarray, np.ndarray]:
    """The passes' ``(kind, code, value)`` chains as one key (every level's kind, then
    every level's code, -9 past a chain) and one value array (NaN past it), the levels
    padded to the deepest. Filled in place, a pass at a time: padded copies of every
    pass's, joined by level and then by pass, were three copies of 10^6 chains' keys."""
    depth = max(p[0].shape[1] for p in parts)
    n = sum(p[0].shape[0] for p in parts)
    key = np.full((n, 2 * depth), -9, dtype=np.int64)
    value = np.full((n, depth), np.nan)
    at = 0
    for kind, code, val in parts:
        rows, width = slice(at, at + kind.shape[0]), kind.shape[1]
        key[rows, :width], key[rows, depth:depth + width] = kind, code
        value[rows, :width] = val
        at = rows.stop
    return key, value


def _row_groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``key`` grouped by equal rows: each group's first row and each row's
    group (one lexsort and runs of equal rows: ``np.unique(axis=0)`` sorts the rows as
    records, several times slower on 10⁶ chains)."""
    if not key.shape[0]:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(key.T[::-1])  # stable: a group's rows in their order
    ordered = key[order]
    new = np.ones(key.shape[0], dtype=bool)
    new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inv = np.empty(key.shape[0], dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    return order[new], inv


def _steps_named(analysis: SpanAnalysis, index: np.ndarray) -> str:
    """``steps_text`` of windows ``index``' steps, in that order: a run of consecutive
    steps found on the step column (its list compared with a list of the range was most
    of the text's time on 10⁶ steps)."""
    c = analysis.windows.columns
    if c.has_steps and index.size > 1:
        nums = c.step[index]
        if bool((np.diff(nums) == 1).all()):
            return f"steps {int(nums[0])}–{int(nums[-1])}"
    return steps_text(_steps_of(analysis, index))


def _steps_of(analysis: SpanAnalysis, index: np.ndarray) -> list[int | None]:
    """The step numbers of windows ``index`` (in that order), from the windows' column."""
    c = analysis.windows.columns
    return c.steps_at(index)


class TextCodes:
    """A code per distinct text, numbered as met (names compared as text, whatever their
    string ids), and the code of each string id met so far: a pass looks up the ids it
    has not met yet alone (a sort of every pass's names was most of the chains' codes)."""

    def __init__(self, strings: Sequence[str]) -> None:
        self.strings = strings
        self.by_text: dict[str, int] = {}
        self.by_sid = np.zeros(0, dtype=np.int32)  # -1: not met yet

    def of_text(self, text: str) -> int:
        return self.by_text.setdefault(text, len(self.by_text))

    def of_sids(self, sid: np.ndarray) -> np.ndarray:
        """The codes of string ids ``sid`` (>= 0); new texts coded in ascending id order."""
        if not sid.size:
            return np.zeros(0, dtype=np.int64)
        top = int(sid.max()) + 1
        if top > self.by_sid.shape[0]:
            grown = np.full(max(top, 2 * self.by_sid.shape[0]), -1, dtype=np.int32)
            grown[:self.by_sid.shape[0]] = self.by_sid
            self.by_sid = grown
        code = self.by_sid[sid]
        new = code < 0
        if new.any():
            ids = unique(sid[new])
            self.by_sid[ids] = [self.of_text(self.strings[i]) for i in ids.tolist()]
            code[new] = self.by_sid[sid[new]]
        return code.astype(np.int64)


def _chain_columns(analysis: SpanAnalysis, f: FlatForest, nodes: np.ndarray,
                   text_code: TextCodes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per chain (a row of ``nodes``, -1 padded) and level: its kind, its name's code
    in ``text_code`` (names compared as text, whatever their string ids; the step's
    left out: every chain starts at a step; -9 past the chain) and its time."""
    safe = np.maximum(nodes, 0)
    on = nodes >= 0
    kind = np.where(on, f.kind[safe], -9)
    sid = f.name[safe]
    named = on & (sid >= 0)
    code = np.full(nodes.shape, -9, dtype=np.int64)
    code[named] = text_code.of_sids(sid[named])
    thread = kind == THREAD
    labels = np.asarray([text_code.of_text(t) for t in f.labels], dtype=np.int64)
    code[thread] = labels[f.label[safe[thread]]]
    device = _QUOTES_DEVICE[kind + 9]  # -9 past the chain
    value = np.where(device, f.device_us[safe], f.total_us[safe])
    value[~on] = np.nan
    return kind, code, value


def _call_node(analysis: SpanAnalysis, f: FlatForest, node: int) -> CallNode:
    """Forest node ``node`` as a :class:`CallNode` without children (its first row)."""
    first = int(f.first_row[node])
    return CallNode(name=f.name_text(analysis, node), kind=f.kind_label(node),
                    count=int(f.count[node]), total_us=float(f.total_us[node]),
                    device_us=float(f.device_us[node]), rows=[first] if first >= 0 else [])


RULE = Rule(id="dispatch-chain", title="Dispatch chain", severity="info", check=check,
            thresholds=Thresholds(), doc=__doc__,
            no_saving="it explains how the step's time is dispatched")
