"""Child-dominated op: an op whose CPU total is far above its self time.

What it detects
    Op names whose CPU total (recursion counted once) is at least
    ``min_step_share`` of a warm step while their self CPU time is at most
    ``max_self_share`` of that total: the cost is in what they call. The
    children (ops and runtime calls) that take the time are named, and the chain
    is followed down while one child holds most of the time (``aten::to →
    aten::_to_copy → aten::copy_ → cudaMemcpyAsync``). An op on a reported
    chain is not reported again; at most ``max_findings``.

Why it matters
    The guide's table reading: "CPU total ≫ Self CPU for a row: most of the cost
    is in child operations — inspect the nested events". Optimising the parent
    (e.g. ``aten::linear``) means optimising the child that does the work
    (``aten::addmm`` and its launch), so look there.

How to fix
    Follow the named children: a runtime call (``cudaLaunchKernel``,
    ``cudaMemcpyAsync``) means launch overhead or a copy; a chain of small ops
    means a fusion candidate (``torch.compile``); a single heavy child is the
    real hotspot (see ``hotspot-op``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import innermost_op
from tb_diagnostics.analysis.views.launch import module_loads
from tb_diagnostics.analysis.views.tables import OpTable, op_table, window_of_rows
from tb_diagnostics.rules._util import evidence_rows, fmt_pct, fmt_us, top_by, warm_steps
from tb_diagnostics.rules.base import Finding, Rule

#: The autograd engine's wrapper around each backward node: always child-dominated;
#: the node it wraps is reported instead.
_ENGINE = "autograd::engine::evaluate_function"


@dataclass(frozen=True)
class Thresholds:
    #: CPU total of the op per step, as a share of a warm step (``_util.WarmSteps``).
    min_step_share: float = 0.10
    #: Self CPU time at most this share of the op's CPU total.
    max_self_share: float = 0.10
    #: Report at most this many ops.
    max_findings: int = 3
    #: Name this many children per op.
    children: int = 3


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    table = op_table(analysis)
    windows = analysis.windows
    if not len(table) or not windows:
        return []
    warm = warm_steps(analysis)
    loads = module_loads(analysis).rows
    # A module load under an op (a first launch of hundreds of ms) is one-time, reported
    # by module-load: it is not the cost of the op's children.
    total_step = warm.per_window(table.total_cpu_per_window
                                 - _load_time_per_window(analysis, table, loads))
    self_share = (warm.per_window(table.self_cpu_per_window)
                  / np.maximum(total_step, 1e-9))
    cand = np.flatnonzero((warm.share(total_step) >= th.min_step_share)
                          & (self_share <= th.max_self_share))
    cand = cand[np.argsort(-total_step[cand], kind="stable")]
    reported: set[int] = set()  # name ids with a finding
    on_paths: set[int] = set()  # name ids on a reported op's chain
    out = []
    inner = innermost_op(analysis)
    for i in cand.tolist():
        if len(out) >= th.max_findings:
            break
        sid = int(table.name_ids[i])
        if sid in on_paths or m.strings[sid].startswith(_ENGINE):
            continue
        rows = warm.host_rows(analysis, table.rows_of(analysis, i))
        path = _descend(analysis, rows, loads)
        path_ids = {m.name_index[n] for n, _ in path}
        if reported and (path_ids & reported or _mostly_inside(analysis, rows, inner, reported)):
            continue
        kids = [(n, t) for n, t in _children(analysis, rows, loads)
                if t >= 0.01 * total_step[i] * warm.n]
        reported.add(sid)
        on_paths.update(path_ids | {sid})
        total = float(total_step[i]) * warm.n
        named = ", ".join(f"{n} {fmt_us(t / warm.n)} ({fmt_pct(t / total)})"
                          for n, t in kids[: th.children])
        chain = (" — the time sits in " + " → ".join(n for n, _ in path)
                 if len(path) > 1 else "")
        name = m.strings[sid]
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title,
            subject=name,
            message=(f"{name}: {fmt_us(total_step[i])} of CPU total {warm.per} "
                     f"({warm.share_text(total_step[i])}) but only "
                     f"{fmt_pct(self_share[i])} self time; the cost is in its children: "
                     f"{named}{chain}."),
            steps=warm.steps(analysis),
            evidence=evidence_rows(analysis, top_by(rows, m.dur[rows], 6),
                                   "a call (its children hold the time)"),
            savings_us=None,
            confirm=("expand the op in the trace or in the profiler table grouped by stack: "
                     "its children's total time matches")))
    return out


def _load_time_per_window(analysis: SpanAnalysis, table: OpTable,
                          loads: np.ndarray) -> np.ndarray:
    """(names, windows) µs of module-load calls under each op name, counted once per name
    (as the table's CPU total counts recursion once)."""
    out = np.zeros_like(table.total_cpu_per_window, dtype=float)
    if not loads.size or not out.size:
        return out
    m = analysis.model
    entry_of = dict(zip(analysis.op_rows.tolist(), table.op_entry.tolist(), strict=True))
    windows = window_of_rows(analysis, loads)
    for r, w in zip(loads.tolist(), windows.tolist(), strict=True):
        if w < 0 or w >= out.shape[1]:
            continue
        seen: set[int] = set()
        p = int(m.parent[r])
        while p >= 0:
            e = entry_of.get(p)
            if e is not None and e not in seen:
                seen.add(e)
                out[e, w] += float(m.dur[r])
            p = int(m.parent[p])
    return out


def _without(rows: np.ndarray, loads: np.ndarray) -> np.ndarray:
    return rows[~np.isin(rows, loads)] if loads.size and rows.size else rows


def _descend(analysis: SpanAnalysis, rows: np.ndarray, loads: np.ndarray,
             depth: int = 6) -> list[tuple[str, float]]:
    """Follow the child holding most of the time while it holds at least half of it
    (module-load calls left out)."""
    m = analysis.model
    path: list[tuple[str, float]] = []
    total = float(m.dur[rows].sum())
    for _ in range(depth):
        kids = _without(_child_rows(analysis, rows), loads)
        if not kids.size or total <= 0:
            break
        names, inv = m.name_groups(kids)
        sums = np.bincount(inv, weights=m.dur[kids])
        k = int(np.argmax(sums))
        if sums[k] < 0.5 * total:
            break
        path.append((m.strings[int(names[k])], float(sums[k])))
        rows, total = kids[inv == k], float(sums[k])
    return path


def _child_rows(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    order, offsets = analysis.model.children_index
    counts = offsets[rows + 1] - offsets[rows]
    if not counts.sum():
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(offsets[rows], counts)
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return order[starts + within]


def _children(analysis: SpanAnalysis, rows: np.ndarray,
              loads: np.ndarray) -> list[tuple[str, float]]:
    """Children of ``rows`` aggregated by name, heaviest first (duration summed; module-load
    calls left out)."""
    m = analysis.model
    kids = _without(_child_rows(analysis, rows), loads)
    names, inv = m.name_groups(kids)
    sums = np.bincount(inv, weights=m.dur[kids])
    return sorted(((m.strings[n], t) for n, t in zip(names.tolist(), sums.tolist(), strict=True)),
                  key=lambda kv: -kv[1])


def _mostly_inside(analysis: SpanAnalysis, rows: np.ndarray, inner: np.ndarray,
                   reported: set[int]) -> bool:
    """Whether most of ``rows``' time runs inside an op of a reported name."""
    m = analysis.model
    anc = inner[rows]
    inside = np.zeros(rows.size, dtype=bool)
    live = np.flatnonzero(anc >= 0)
    targets = np.asarray(sorted(reported), dtype=np.int32)
    while live.size:
        inside[live] |= np.isin(m.name[anc[live]], targets)
        anc[live] = inner[anc[live]]
        live = live[(anc[live] >= 0) & ~inside[live]]
    return float(m.dur[rows][inside].sum()) > 0.5 * float(m.dur[rows].sum())


RULE = Rule(id="child-dominated-op", title="Op whose cost is in its children", severity="info",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving=("the time is in its children, and the findings on them say what removing it"
                       " saves"))
