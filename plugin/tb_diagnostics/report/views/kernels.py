"""The Kernels view's document (``/view?name=kernels``, ``tb-diagnostics kernels``).

``{group, step, sort, device: {name, compute_capability, sms, limits_from_trace} | null,
theoretical_note, totals: {calls, total_us, tensor_core_us}, groups, total_rows, offset,
rows}``; each row: ``name``, ``op`` (group=op: the launching op's name, null where the trace
has none), ``calls``, ``total_us``, ``mean_us``, ``min_us``, ``max_us``, ``share_pct`` (of
the selection's kernel time), ``streams``; the commonest launch configuration: ``grid``,
``block``, ``registers_per_thread``, ``shared_memory_bytes`` (static + dynamic, as the
trace records it), ``occupancy_pct`` (recorded: Kineto's estimate, capped by the grid),
``theoretical_occupancy_pct`` and ``occupancy_limited_by`` (the occupancy calculator's, for
the part), ``blocks_per_sm``, with ``configs`` (distinct configurations) and
``config_calls`` (the calls with the one shown); ``precision``, ``tensor_core`` (true,
false, or "some" when only part of the calls ran on Tensor Cores); ``ops`` (group=name:
the launching ops by calls, at most 3); ``rows``/``steps`` (the first kernels, to open in
the timeline) and ``op_rows``/``op_steps`` (their launching ops, for the dispatch chain).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.cost.occupancy import SmLimits
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.kernels import (
    GROUPINGS,
    ROWS_PER_GROUP,
    KernelCalls,
    KernelGroups,
    group_streams,
    kernel_calls,
    kernel_groups,
)
from tb_diagnostics.output import displayable
from tb_diagnostics.report.views import SpanView, ViewParamError, ViewParams, step_window

COLUMNS = ("name", "op", "calls", "total_us", "mean_us", "min_us", "max_us", "share_pct",
           "grid", "block", "registers_per_thread", "shared_memory_bytes", "occupancy_pct",
           "theoretical_occupancy_pct", "precision", "tensor_core", "configs")
_FIGURES = ("calls", "total_us", "mean_us", "min_us", "max_us", "share_pct",
            "registers_per_thread", "shared_memory_bytes", "occupancy_pct",
            "theoretical_occupancy_pct", "blocks_per_sm")


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


def _config_column(kc: KernelCalls, col: str) -> np.ndarray:
    """Per configuration, one figure (NaN where unknown)."""
    def value(c) -> float:
        v = {"registers_per_thread": c.registers_per_thread,
             "shared_memory_bytes": c.shared_memory_bytes,
             "occupancy_pct": c.occupancy_pct, "blocks_per_sm": c.blocks_per_sm,
             "theoretical_occupancy_pct": c.theoretical.pct if c.theoretical else None}[col]
        return np.nan if v is None else float(v)
    return np.asarray([value(c) for c in kc.configs] + [np.nan])


def _figure(kc: KernelCalls, g: KernelGroups, col: str) -> np.ndarray:
    if col == "calls":
        return g.calls.astype(np.float64)
    if col in ("total_us", "min_us", "max_us"):
        return getattr(g, col)
    if col == "mean_us":
        return g.total_us / np.maximum(g.calls, 1)
    if col == "share_pct":
        return 100.0 * g.total_us / g.selection_us if g.selection_us > 0 else g.total_us * 0
    return _config_column(kc, col)[g.config]


def _order(analysis: SpanAnalysis, kc: KernelCalls, g: KernelGroups, sort: str,
           cand: np.ndarray, stop: int) -> np.ndarray:
    """The groups ``cand`` (ascending indices) in the order ``sort`` asks, cut to the first
    ``stop``: what the page needs, never a sort of every group of a span of 10⁵ groups
    when the page shows 100 (the figures: a partition, then a sort of the kept)."""
    desc = sort.startswith("-")
    col = sort[1:] if desc else sort
    if col in ("name", "op"):
        ids = g.name_ids if col == "name" else g.op_name_ids
        text = np.asarray([analysis.model.string(int(i)) or "" for i in ids], dtype=object)
        order = np.argsort(text, kind="stable")
        order = order[::-1] if desc else order
        keep = np.zeros(len(g), dtype=bool)
        keep[cand] = True
        return order[keep[order]][:stop]
    if col not in _FIGURES:
        raise ViewParamError(f"sort: no column {col!r} (one of name, op, {', '.join(_FIGURES)})")
    v = _figure(kc, g, col)
    key = np.where(np.isnan(v), np.inf, -v if desc else v)[cand]  # unknown last either way
    if stop < cand.shape[0]:
        # Every group whose key is at most the stop-th smallest (ties at the cut kept, so
        # the sort below orders them by name as a sort of all would).
        within = key <= np.partition(key, stop - 1)[stop - 1]
        cand, key = cand[within], key[within]
    return cand[np.lexsort((g.name_ids[cand], key))][:stop]


def _device(limits: SmLimits | str, analysis: SpanAnalysis) -> dict[str, Any] | None:
    if isinstance(limits, str):
        return None
    props = analysis.model.used_device_properties or {}
    return {"name": analysis.model.device_name, "compute_capability": limits.cc_text,
            "sms": props.get("numSms"), "max_warps_per_sm": limits.max_warps,
            "max_blocks_per_sm": limits.max_blocks, "limits_from_trace": list(limits.from_trace)}


def _row(analysis: SpanAnalysis, kc: KernelCalls, g: KernelGroups, i: int, by: str,
         ) -> dict[str, Any]:
    m = analysis.model
    windows = analysis.windows
    members = g.members[g.starts[i]:g.starts[i + 1]]
    first = members[:ROWS_PER_GROUP]
    ops = kc.op[first]
    c = kc.configs[int(g.config[i])]
    calls = int(g.calls[i])
    tc = int(g.tensor_core_calls[i])
    row: dict[str, Any] = {"name": m.strings[int(g.name_ids[i])]}
    if by == "op":
        row["op"] = m.string(int(g.op_name_ids[i]))
    row.update({
        "calls": calls, "total_us": _r(g.total_us[i]), "mean_us": _r(g.total_us[i] / calls),
        "min_us": _r(g.min_us[i]), "max_us": _r(g.max_us[i]),
        "share_pct": _r(100.0 * g.total_us[i] / g.selection_us if g.selection_us else 0.0, 2),
        "streams": group_streams(analysis, g, i),
        "grid": c.grid, "block": c.block, "registers_per_thread": c.registers_per_thread,
        "shared_memory_bytes": c.shared_memory_bytes, "occupancy_pct": _r(c.occupancy_pct, 1),
        "theoretical_occupancy_pct": _r(c.theoretical.pct, 1) if c.theoretical else None,
        "occupancy_limited_by": list(c.theoretical.limited_by) if c.theoretical else None,
        "theoretical_blocks_per_sm": c.theoretical.blocks if c.theoretical else None,
        "theoretical_note": c.why_not, "blocks_per_sm": _r(c.blocks_per_sm, 2),
        "configs": int(g.configs[i]), "config_calls": int(g.config_calls[i]),
        "precision": kc.precisions[int(g.precision[i])] if g.precision[i] >= 0 else None,
        "tensor_core": tc == calls if tc in (0, calls) else "some",
        "rows": kc.rows[first].tolist(),
        "steps": [windows[w].step if w >= 0 else None for w in kc.window[first].tolist()],
        "op_rows": [int(r) for r in ops.tolist() if r >= 0],
        "op_steps": [windows[w].step if w >= 0 else None
                     for r, w in zip(ops.tolist(), kc.window[first].tolist(), strict=True)
                     if r >= 0],
    })
    if by == "name":
        launched = kc.op[members]
        launched = launched[launched >= 0]
        ids, counts = np.unique(m.name[launched], return_counts=True)
        top = np.argsort(-counts, kind="stable")[:3]
        row["ops"] = [{"name": m.strings[int(ids[k])], "calls": int(counts[k])} for k in top]
    return row


def kernels_document(analysis: SpanAnalysis, params: ViewParams) -> dict[str, Any]:
    by = params.group or "name"
    if by not in GROUPINGS:
        raise ViewParamError(f"group must be one of {', '.join(GROUPINGS)}, not {by!r}")
    window = step_window(analysis, params.step)
    kc = kernel_calls(analysis)
    g = kernel_groups(analysis, by, window)
    m = analysis.model
    cand = np.arange(len(g))
    if params.q:
        needle = params.q.casefold()
        ids = sorted_sets.unique(g.name_ids)
        hit = np.asarray([int(i) for i in ids if needle in m.strings[int(i)].casefold()],
                         dtype=np.int64)
        cand = cand[np.isin(g.name_ids, hit)]
    stop = params.offset + params.limit
    page = _order(analysis, kc, g, params.sort or "-total_us", cand, stop)[params.offset:]
    sel = np.flatnonzero(kc.window == window) if window is not None else slice(None)
    tc_us = float(m.dur[kc.rows[sel]][kc.tensor_core[sel]].sum()) if len(kc) else 0.0
    # The header says why only when no kernel has a figure (a row says why it has none).
    notes = [] if any(c.theoretical for c in kc.configs) else sorted(
        {c.why_not for c in kc.configs if c.why_not})
    return {
        "group": by, "step": None if window is None else analysis.windows[window].step,
        "sort": params.sort or "-total_us", "device": _device(kc.limits, analysis),
        "theoretical_note": notes[0] if notes else None,
        "totals": {"calls": int(g.calls.sum()), "total_us": _r(g.selection_us),
                   "tensor_core_us": _r(tc_us)},
        "groups": len(g), "total_rows": int(cand.shape[0]), "offset": params.offset,
        "rows": [_row(analysis, kc, g, i, by) for i in page.tolist()],
    }


def _launch(r: dict[str, Any]) -> str:
    def dims(v: list[int] | None) -> str:
        return "?" if v is None else "×".join(map(str, v))
    def whole(v: float | None) -> str:  # half up, as the profiler rounds (12.5 → 13)
        return "-" if v is None else str(int(v + 0.5))
    occ, theo = whole(r["occupancy_pct"]), whole(r["theoretical_occupancy_pct"])
    return (f"{dims(r['grid']):>12} {dims(r['block']):>10} {r['registers_per_thread'] or '-':>4} "
            f"{r['shared_memory_bytes'] if r['shared_memory_bytes'] is not None else '-':>7} "
            f"{occ:>4}/{theo:<4}")


def _text(doc: dict[str, Any]) -> str:
    head = f"{doc['total_rows']} kernel groups by {doc['group']}"
    if doc["step"] is not None:
        head += f" · step {doc['step']}"
    dev = doc["device"]
    if dev:
        head += f" · {dev['name']} (cc {dev['compute_capability']}, {dev['sms']} SMs)"
    lines = [head]
    if doc["theoretical_note"]:
        lines.append(f"theoretical occupancy: {doc['theoretical_note']}")
    lines.append(f"{'calls':>7} {'total ms':>9} {'mean µs':>9} {'share':>6} {'grid':>12} "
                 f"{'block':>10} {'regs':>4} {'smem':>7} occ%/theo  prec TC  name")
    for r in doc["rows"]:
        name = r["name"] + (f"  ← {r['op']}" if r.get("op") else "")
        tc = {True: "yes", False: "no"}.get(r["tensor_core"], "some")
        lines.append(f"{r['calls']:>7} {r['total_us'] / 1e3:>9.3f} {r['mean_us']:>9.2f} "
                     f"{r['share_pct']:>5.1f}% {_launch(r)} {r['precision'] or '-':>5} "
                     f"{tc:>3}  {name}")
    if len(doc["rows"]) < doc["total_rows"]:
        lines.append(f"… {doc['total_rows'] - len(doc['rows'])} more (--limit)")
    return "\n".join(displayable(ln) for ln in lines)


VIEW = SpanView(name="kernels", title="Kernels", document=kernels_document, columns=COLUMNS,
                text=_text)
