"""The roofline's part of the report document: ``spans[].roofline`` and the step keys.

Shapes (keys only added, never renamed):

- ``roofline.device``: ``{name, peaks: {fp64, fp32, tf32, bf16, fp16, fp8, fp6, fp4, int8,
  hbm_gbps}, source}``: TFLOP/s, GB/s, null when unknown;
- ``roofline.ops``: one entry per op group (name, shapes, types), busiest first:
  ``{name, input_dims, input_types, concrete_inputs, family, calls, flops, bytes,
  device_us, precision, peak_precision, intensity, achieved_tflops, achieved_gbps,
  bound, roofline_pct, ideal_us, loss_us, rows, steps}``; ``flops``, ``bytes`` and
  ``device_us`` are summed over the calls; ``rows``/``steps`` are a few calls to open;
  a host↔device copy group (``bound`` ``"host-link"``) adds ``link_bytes``,
  ``achieved_link_gbps``, ``link_gbps`` and ``pageable``, its ``roofline_pct`` against
  the host link;
- ``roofline.host_link``: ``{name, gbps, source, by_capability}`` or null: the link
  host↔device copies are rated against (GB/s per direction);
- ``roofline.communication``: ``{activities, device_us}`` of collective kernels, which
  are communication and neither priced nor unmodelled;
- ``roofline.unmodelled``: ops whose device time has no cost model, with the reason
  (``calls`` counts the calls of a known op, the device activities of an unknown one);
  ``lower_bound_bytes`` and ``lower_bound_us`` (null when none) are the bytes such an
  op moves at the least and that bound's time at the memory bandwidth: a bound, never a
  modelled figure; ``roofline.lower_bound_device_us`` is the device time they cover;
- each step: ``flops``, ``achieved_tflops``, ``flop_utilisation``, ``flop_precision``,
  ``busy_compute_bound_us``, ``busy_memory_bound_us``, ``busy_unmodelled_us``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.cost.identify import why_no_peaks
from tb_diagnostics.analysis.cost.peaks import PRECISIONS
from tb_diagnostics.analysis.cost.shapes import parse_json
from tb_diagnostics.analysis.views.op_costs import op_costs
from tb_diagnostics.analysis.views.roofline import GroupFigures, roofline
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.report.rounding import rounded_array, significant
from tb_diagnostics.report.step_columns import Layer, set_columns, where

#: Op groups listed (the chart's points), busiest first; the rest are counted.
MAX_OPS = 300
MAX_UNMODELLED = 20
ROWS_PER_OP = 3

def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def _sig(x: float | None) -> float | None:
    """Four significant digits (FLOP counts and rates span many orders of magnitude)."""
    return None if x is None else float(f"{float(x):.4g}")


def _op_entry(f: GroupFigures, rows: list[int], steps: list[int | None],
              link_gbps: float | None = None) -> dict[str, Any]:
    g = f.group
    achieved = f.flops / (f.device_us * 1e6) if f.device_us > 0 else None
    gbps = f.bytes / (f.device_us * 1e3) if f.device_us > 0 else None
    pct = f.ideal_us / f.device_us if f.ideal_us is not None and f.device_us > 0 else None
    extra: dict[str, Any] = {}
    if f.bound == "host-link":
        extra = {"link_bytes": round(f.link_bytes), "link_gbps": link_gbps,
                 "achieved_link_gbps": _sig(f.link_bytes / (f.device_us * 1e3))
                 if f.device_us > 0 else None, "pageable": f.pageable}
    return {
        "name": g.name, "input_dims": parse_json(g.input_dims),
        "input_types": parse_json(g.input_types),
        "concrete_inputs": parse_json(g.concrete_inputs),
        "family": g.cost.family if g.cost else None,
        "calls": f.calls, "flops": round(f.flops), "bytes": round(f.bytes),
        "device_us": _r(f.device_us), "precision": f.precision,
        "peak_precision": f.peak_precision, "intensity": _sig(f.intensity),
        "achieved_tflops": _sig(achieved), "achieved_gbps": _sig(gbps), "bound": f.bound,
        "roofline_pct": _r(pct, 4), "ideal_us": _r(f.ideal_us), "loss_us": _r(f.loss_us),
        "rows": rows, "steps": steps, **extra,
    }


def _first_rows(group: np.ndarray, rows: np.ndarray, wanted: list[int]) -> dict[int, list[int]]:
    """A few rows of each wanted group, in time order (one stable sort, not a scan per group)."""
    order = np.argsort(group, kind="stable")
    sorted_groups = group[order]
    out = {}
    for g in wanted:
        at = int(np.searchsorted(sorted_groups, g))
        out[g] = rows[order[at:at + ROWS_PER_OP]].tolist()
    return out


def roofline_section(analysis: SpanAnalysis) -> dict[str, Any]:
    rf = roofline(analysis)
    oc = op_costs(analysis)
    peaks = rf.peaks
    if peaks is not None:
        device = peaks.to_dict()
    else:
        name = None if analysis.cpu_only else analysis.model.device_name
        device = {"name": analysis.model.device_name,
                  "peaks": dict.fromkeys((*PRECISIONS, "hbm_gbps")), "source": None,
                  # Why there are none: no row, and nothing in deviceProperties to go on.
                  "identified_by": None,
                  "identification": why_no_peaks(name, analysis.model.used_device_properties)}
    listed = [i for i, f in enumerate(rf.figures) if f.modelled and (f.device_us > 0 or f.flops)]
    listed.sort(key=lambda i: -rf.figures[i].device_us)
    shown = listed[:MAX_OPS]
    rows_of = _first_rows(oc.group, oc.rows, shown)
    windows = analysis.windows
    ops = []
    for i in shown:
        rows = rows_of[i]
        w = window_of_rows(analysis, np.asarray(rows, dtype=np.int64))
        ops.append(_op_entry(rf.figures[i], rows,
                             [windows[k].step if k >= 0 else None for k in w.tolist()],
                             rf.host_link.gbps if rf.host_link else None))
    unmodelled = sorted((f for f in rf.figures if not f.modelled and f.device_us > 0),
                        key=lambda f: -f.device_us)
    # (name, reason) → [calls, device µs, lower-bound bytes, lower-bound µs]
    by_name: dict[tuple[str, str], list[Any]] = {}
    for f in unmodelled:
        entry = by_name.setdefault((f.group.name, f.group.reason or ""), [0, 0.0, None, None])
        entry[0] += f.calls
        entry[1] += f.device_us
        if f.lower_bound:
            entry[2] = (entry[2] or 0.0) + f.bytes
            if f.bound_us is not None:
                entry[3] = (entry[3] or 0.0) + f.bound_us
    for name, count, us in rf.unowned:
        label, reason = _unowned_words(name)
        entry = by_name.setdefault((label, reason), [0, 0.0, None, None])
        entry[0] += count
        entry[1] += us
    return {
        "device": device,
        "shapes_recorded": rf.shapes_recorded,
        "ops": ops,
        "ops_total": len(listed),
        "modelled_device_us": _r(sum(f.device_us for f in rf.figures if f.modelled)),
        "unmodelled": [{"name": n, "reason": why, "calls": int(c), "device_us": _r(us),
                        "lower_bound_bytes": None if lb is None else round(lb),
                        "lower_bound_us": _r(lb_us)}
                       for (n, why), (c, us, lb, lb_us) in sorted(by_name.items(),
                                                                  key=lambda kv: -kv[1][1])
                       ][:MAX_UNMODELLED],
        "unmodelled_device_us": _r(sum(f.device_us for f in unmodelled)
                                   + sum(us for _, _, us in rf.unowned)),
        "lower_bound_device_us": _r(sum(f.device_us for f in unmodelled if f.lower_bound)),
        "notes": list(rf.notes),
        "host_link": rf.host_link.to_dict() if rf.host_link else None,
        "communication": {"activities": rf.communication[0],
                          "device_us": _r(rf.communication[1])},
    }


def _unowned_words(name: str | None) -> tuple[str, str]:
    """(the name shown, why it has no cost) of device work no counted op owns: an op with
    no model, a launch call inside no op (""), or a launch call not in the trace (None)."""
    if name:
        return name, "no cost model for this op"
    if name == "":
        return ("(launched outside any op)",
                "its launch call is inside no op, so no op's shapes say what it computes")
    return ("(launch not in the trace)",
            "the trace holds no launch call for it, so no op's shapes say what it computes")


def step_roofline_columns(analysis: SpanAnalysis, n: int) -> Layer:
    """Per step of ``n``: FLOPs, achieved TFLOP/s, FLOP utilisation, its precision and the
    split of busy time; from the window columns, every step at once as columns
    (``step_utilisation``'s figures)."""
    rf = roofline(analysis)
    cols = analysis.windows.columns
    wall = cols.wall_us[:n]
    flops = np.asarray(rf.step_flops[:n], dtype=np.float64)
    pos = wall > 0
    achieved = np.zeros(n)
    np.divide(flops, wall * 1e6, out=achieved, where=pos)
    # Four significant digits, as _sig's format gives them (a zero, most steps, is 0.0).
    achieved_c = np.where(achieved != 0, significant(achieved, 4), 0.0)
    precision = rf.step_precision[:n]
    # Each step's peak at its precision (0: none known): the few precisions looked up once.
    code = {p: i for i, p in enumerate(dict.fromkeys(precision))}
    at_code = np.fromiter(map(code.__getitem__, precision), dtype=np.int64, count=n)
    peak = np.asarray([rf.peak(p) or 0.0 for p in code], dtype=np.float64)[at_code] \
        if n else np.zeros(0)
    has_util = pos & (flops > 0) & (peak != 0)
    util = where(has_util, rounded_array(achieved[has_util] / peak[has_util], 6))
    huge = ~(np.abs(flops) < 2.0 ** 52)
    flops_c: Any = np.rint(flops).astype(np.int64)
    if huge.any():  # past int64's exact range: Python's round
        flops_c = flops_c.tolist()
        for k in np.flatnonzero(huge).tolist():
            flops_c[k] = round(float(flops[k]))
    if rf.step_busy_compute_us is None:
        none = [None] * n
        busy_c = busy_m = unmodelled = none
    else:
        c = np.asarray(rf.step_busy_compute_us[:n], dtype=np.float64)
        m_ = np.asarray(rf.step_busy_memory_us[:n], dtype=np.float64)
        rest = cols.device_busy_us[:n] - c - m_
        busy_c, busy_m = rounded_array(c, 3), rounded_array(m_, 3)
        unmodelled = rounded_array(np.where(rest < 0.0, 0.0, rest), 3)  # max(rest, 0.0)
    return (("flops", "achieved_tflops", "flop_utilisation", "flop_precision",
             "busy_compute_bound_us", "busy_memory_bound_us", "busy_unmodelled_us"),
            [flops_c, achieved_c, util, precision, busy_c, busy_m, unmodelled])


def add_step_roofline(steps: list[dict[str, Any]], analysis: SpanAnalysis) -> None:
    """Set :func:`step_roofline_columns`' keys on every step document."""
    set_columns(steps, step_roofline_columns(analysis, len(steps)))


def top_losses(span: dict[str, Any], n: int = 5) -> list[dict[str, Any]]:
    """The op groups of a span document that lose the most time against their roofline."""
    roof = span.get("roofline") or {}
    ops = [o for o in roof.get("ops", []) if (o.get("loss_us") or 0) > 0]
    return sorted(ops, key=lambda o: -o["loss_us"])[:n]


def op_shapes(op: dict[str, Any]) -> str:
    """``[64,64] [64,64]``: an op entry's tensor shapes, scalars left out."""
    dims = op.get("input_dims") or []
    return " ".join(str(d).replace(" ", "") for d in dims if isinstance(d, list) and d)


def roofline_summary(span: dict[str, Any]) -> str | None:
    """One line: the device's peaks and where the busy time goes (None without a roofline)."""
    roof = span.get("roofline")
    if not roof or not roof.get("ops"):
        return None
    dev = roof["device"]
    utils = [s["flop_utilisation"] for s in span["steps"] if s.get("flop_utilisation")]
    text = f"roofline on {dev['name'] or 'an unknown device'}"
    how = dev.get("identified_by")
    if how in ("properties", "estimate"):
        text += " (identified by its properties)" if how == "properties" else " (estimated)"
    if utils:
        utils.sort()
        text += f": FLOP utilisation {100 * utils[len(utils) // 2]:.1f}% (median step)"
    elif all(v is None for v in dev["peaks"].values()):
        text += ": no peak figures (give them with --peaks FILE.json)"
        if dev.get("identification"):
            text += f": {dev['identification']}"
    unmodelled = roof.get("unmodelled_device_us") or 0
    if unmodelled > 0:
        text += f"; {unmodelled / 1000:.2f} ms of device time has no cost model"
        bounded = roof.get("lower_bound_device_us") or 0
        if bounded > 0:  # µs where ms would read "0.00 ms"
            shown = f"{bounded / 1000:.2f} ms" if bounded >= 10 else f"{bounded:.1f} µs"
            text += f" ({shown} of it only a memory lower bound)"
    return text
