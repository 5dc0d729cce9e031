"""The Memory view's document: per device the allocated and reserved curve (downsampled),
the peak, the allocations alive there by op, and per step what it left allocated.

``rows`` are the alive-at-peak groups of every device (a ``device`` column each), paged
and sorted like every view's rows; ``extra["device"]`` keeps one device's. With a step,
the curve, the peak and the rows are the step's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.memory_view import (
    DeviceView,
    OpGroup,
    alive_at,
    device_views,
    downsample,
    event_range,
    group_by_op,
    kept_at_end,
    peak_index,
    window_bounds,
)
from tb_diagnostics.report.views import SpanView, ViewParamError, ViewParams, page, step_window
from tb_diagnostics.rules import run_rules
from tb_diagnostics.rules.memory_growth import RULE as GROWTH
from tb_diagnostics.rules.memory_near_capacity import RULE as NEAR_CAPACITY

#: Steps listed per device (boundaries on the chart, rows of the per-step table).
MAX_STEPS = 200
#: Ops named per step (what the step left allocated).
OPS_PER_STEP = 5

EMPTY_REASON = (
    "This trace has no [memory] events: the profiler records them only when asked. "
    "Record with torch.profiler.profile(..., profile_memory=True); with with_stack=True "
    "the Python lines that made them are named too.")

NO_ADDRESSES = (
    "These [memory] events carry no Addr (older profilers did not write it): "
    "an allocation cannot be matched to its free, so what is alive at the peak is unknown.")

COLUMNS = ("device", "op", "bytes", "count", "largest_bytes", "stack")
#: The rules whose findings the card lists (and whose steps it shades).
MEMORY_RULES = (GROWTH, NEAR_CAPACITY)


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _spread(ks: list[int]) -> list[int]:
    """At most MAX_STEPS of ``ks``, evenly spread over them (first and last kept): a span of
    thousands of steps still shows boundaries and rows across its whole length."""
    if len(ks) <= MAX_STEPS:
        return ks
    return [ks[i] for i in np.linspace(0, len(ks) - 1, MAX_STEPS).round().astype(int).tolist()]


def _group_row(device: str, g: OpGroup) -> dict[str, Any]:
    return {"device": device, "op": g.op, "bytes": g.bytes, "count": g.count,
            "largest_bytes": g.largest_bytes, "stack": " > ".join(g.stack),
            "call_stack": g.call_stack}


def _steps(analysis: SpanAnalysis, win: int | None) -> list[dict[str, Any]]:
    lo, hi = window_bounds(analysis)
    ks = range(min(len(analysis.windows), lo.shape[0])) if win is None else [win]
    return [{"step": analysis.windows[k].step, "start_us": round(float(lo[k]), 3),
             "end_us": round(float(hi[k]), 3)} for k in _spread(list(ks))]


def _per_step(analysis: SpanAnalysis, dv: DeviceView, win: int | None,
              inner: bool) -> list[dict[str, Any]]:
    lo, hi = window_bounds(analysis)
    s = dv.series
    ks = [k for k in (range(lo.shape[0]) if win is None else [win]) if s.events[k]]
    out = []
    for k in _spread(ks):
        a, b = event_range(dv, float(lo[k]), float(hi[k]))
        kept = kept_at_end(dv, a, b)
        known = dv.addressed  # without addresses nothing is known to be kept
        out.append({
            "step": analysis.windows[k].step, "events": int(s.events[k]),
            "start_allocated_bytes": _num(s.start_alloc[k]),
            "end_allocated_bytes": _num(s.end_alloc[k]),
            "peak_allocated_bytes": _num(s.peak_alloc[k]),
            "peak_reserved_bytes": _num(s.peak_reserved[k]),
            "kept_bytes": float(dv.nbytes[kept].sum()) if known else None,
            "kept_count": int(kept.size) if known else None,
            "kept_by_op": [{"op": g.op, "bytes": g.bytes, "count": g.count}
                           for g in group_by_op(analysis, dv, kept, inner=inner)[:OPS_PER_STEP]],
        })
    return out


def _device(analysis: SpanAnalysis, dv: DeviceView, win: int | None,
            inner: bool) -> tuple[dict[str, Any], list[OpGroup]]:
    s = dv.series
    if win is None:
        a, b = 0, dv.ts.shape[0]
    else:
        lo, hi = window_bounds(analysis)
        a, b = event_range(dv, float(lo[win]), float(hi[win]))
    p = peak_index(dv, a, b)
    groups: list[OpGroup] = []
    doc: dict[str, Any] = {
        "device": dv.label, "device_type": s.device_type, "device_id": s.device_id,
        "relative": s.relative, "total_bytes": s.total_mem, "events": b - a,
        "peak_allocated_bytes": None, "peak_reserved_bytes": None, "peak_at_us": None,
        "peak_step": None, "peak_reserved_at_us": None,
    }
    if p is not None:
        res = dv.reserved[a:b]
        r = None if np.isnan(res).all() else a + int(np.nanargmax(res))
        doc.update({
            "peak_allocated_bytes": float(dv.allocated[p]),
            "peak_reserved_bytes": None if r is None else float(dv.reserved[r]),
            "peak_at_us": round(float(dv.ts[p]), 3),
            "peak_step": _step_at(analysis, float(dv.ts[p])),
            "peak_reserved_at_us": None if r is None else round(float(dv.ts[r]), 3),
        })
        if dv.addressed:
            alive = alive_at(dv, p)
            groups = group_by_op(analysis, dv, alive, inner=inner)
            alive_bytes = float(dv.nbytes[alive].sum())
            doc["alive_at_peak"] = {
                "matched": True, "bytes": alive_bytes, "count": int(alive.size),
                "ops": len(groups),
                # Alive at the peak but allocated before the first event: no op to name.
                "before_trace_bytes": (None if s.relative
                                       else max(float(dv.allocated[p]) - alive_bytes, 0.0)),
            }
        else:
            doc["alive_at_peak"] = {"matched": False, "bytes": None, "count": None, "ops": 0,
                                    "before_trace_bytes": None, "note": NO_ADDRESSES}
    pts = downsample(dv, a, b)
    doc["curve"] = {
        "ts_us": np.round(dv.ts[pts], 3).tolist(),
        "allocated_bytes": [_num(v) for v in dv.allocated[pts].tolist()],
        "reserved_bytes": [_num(v) for v in dv.reserved[pts].tolist()],
        "points": int(pts.size), "of_events": b - a,
    }
    doc["per_step"] = _per_step(analysis, dv, win, inner)
    return doc, groups


def _step_at(analysis: SpanAnalysis, ts: float) -> int | None:
    lo, hi = window_bounds(analysis)
    k = int(np.searchsorted(lo, ts, side="right")) - 1
    if 0 <= k < len(analysis.windows) and ts < hi[k]:
        return analysis.windows[k].step
    return None


def _findings(analysis: SpanAnalysis) -> list[dict[str, Any]]:
    """The memory rules' findings, with the device and steps the chart marks: run the way
    the span's report runs its rules (``run_rules``: the same thresholds, subjects and
    order, a rule that fails costs only its findings), so the card lists what the report
    and the tab's findings say."""
    return [{"rule": f.rule, "severity": f.severity, "title": f.title, "device": f.subject,
             "message": f.message, "steps": list(f.steps)}
            for f in run_rules(analysis, MEMORY_RULES)]


def document(analysis: SpanAnalysis, params: ViewParams) -> dict[str, Any]:
    group = params.group or "op"
    if group not in ("op", "inner"):
        raise ViewParamError(f"group must be op or inner, not {group!r}")
    win = step_window(analysis, params.step)
    dvs = device_views(analysis)
    want = (params.extra or {}).get("device") or None
    if want is not None and want not in {dv.label for dv in dvs}:
        raise ViewParamError(f"device: no {want!r} in this span "
                             f"({', '.join(dv.label for dv in dvs) or 'no memory events'})")
    base: dict[str, Any] = {"step": params.step if win is not None else None, "group": group,
                            "available": bool(dvs), "steps": _steps(analysis, win),
                            "steps_total": len(analysis.windows) if win is None else 1}
    if not dvs:
        return {**base, "empty_reason": EMPTY_REASON, "devices": [], "findings": [],
                "rows": [], "total_rows": 0, "offset": params.offset, "limit": params.limit}
    devices, rows = [], []
    for dv in sorted(dvs, key=lambda d: d.series.device_type == 0):
        doc, groups = _device(analysis, dv, win, group == "inner")
        devices.append(doc)
        if want is None or dv.label == want:
            rows.extend(_group_row(dv.label, g) for g in groups)
    got, total = page(rows, params, name_key="op", default_sort="-bytes")
    return {**base, "devices": devices, "findings": _findings(analysis), "rows": got,
            "total_rows": total, "offset": params.offset, "limit": params.limit}


def _text(doc: dict[str, Any]) -> str:
    from tb_diagnostics.output import displayable
    from tb_diagnostics.rules._util import fmt_bytes

    def b(x: float | None) -> str:
        return "—" if x is None else fmt_bytes(x)

    if not doc["available"]:
        return doc["empty_reason"]
    lines = []
    for d in doc["devices"]:
        where = f" at {d['peak_at_us']:.0f} µs" if d["peak_at_us"] is not None else ""
        step = f" (step {d['peak_step']})" if d["peak_step"] is not None else ""
        lines.append(f"{d['device']}: peak allocated {b(d['peak_allocated_bytes'])}{where}"
                     f"{step}, peak reserved {b(d['peak_reserved_bytes'])}, "
                     f"{d['events']} events" + (" (relative)" if d["relative"] else ""))
        alive = d.get("alive_at_peak") or {}
        if alive.get("matched"):
            lines.append(f"  alive at the peak: {b(alive['bytes'])} in {alive['count']} "
                         f"allocations; before the trace: {b(alive['before_trace_bytes'])}")
        elif alive:
            lines.append(f"  {alive['note']}")
        for st in d["per_step"][:20]:
            ops = ", ".join(f"{displayable(o['op'])} {b(o['bytes'])}"
                            for o in st["kept_by_op"][:3])
            kept = "" if st["kept_bytes"] is None else \
                f", kept {b(st['kept_bytes'])} ({st['kept_count']})" + (f": {ops}" if ops else "")
            lines.append(f"  step {st['step']}: end {b(st['end_allocated_bytes'])}{kept}")
    lines.append("alive at the peak, by op:")
    lines.append("  device | op | bytes | count | largest")
    lines.extend(f"  {r['device']} | {displayable(r['op'])} | {b(r['bytes'])} | {r['count']} | "
                 f"{b(r['largest_bytes'])}" for r in doc["rows"])
    lines.extend(f"finding [{f['severity']}] {f['rule']}: {displayable(f['message'])}"
                 for f in doc["findings"])
    return "\n".join(lines)


VIEW = SpanView(name="memory", title="Memory", document=document, rows_key="rows",
                columns=COLUMNS, text=_text)
