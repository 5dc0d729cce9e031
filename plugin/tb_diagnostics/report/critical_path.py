"""The critical path in the report: per step its split by kind, its longest segments and
the ops they belong to (``steps[].critical_path``), the whole path on request, and its
lines in the text report. The path itself is :mod:`tb_diagnostics.analysis.critpath`."""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.critpath import KIND_NAMES, critical_paths
from tb_diagnostics.analysis.critpath.names import op_above
from tb_diagnostics.report.rounding import rounded

#: Segments each step's document lists (the longest); the rest are counted. Few: the
#: tab's span document carries up to 2,000 steps.
TOP_SEGMENTS = 5
#: Ops each step's document lists by their time on the path.
TOP_OPS = 3
#: Segments and ops all the step documents of a span list at most, in all: a span of
#: more steps than this allows at TOP_SEGMENTS (TOP_OPS) each lists fewer per step, at
#: least one (issue 28: a million steps' five segments were 3 GB of dicts). Each step's
#: ``segments_total`` and ``segments_omitted`` still count them; ``report --step N``
#: gives the whole path of a step.
SPAN_SEGMENTS = 50_000
SPAN_OPS = 30_000


def per_step_limit(n_steps: int, top: int, span_budget: int) -> int:
    """How many of ``top`` each of ``n_steps`` step documents lists within ``span_budget``
    (never fewer than one)."""
    return max(1, min(top, span_budget // max(n_steps, 1)))
#: Segments the step route lists at most, in time order (the longest, where a step's
#: path has more: a host-bound step of 100,000 launches has 200,000).
ROUTE_SEGMENTS = 50_000
#: Segments per step in the text report.
TEXT_SEGMENTS = 3


def _us(x: float) -> float:
    return round(float(x), 3)


def _names(analysis: SpanAnalysis, rows: np.ndarray) -> list[str | None]:
    m = analysis.model
    return [m.name_of(r) if r >= 0 else None for r in rows.tolist()]


def _segments(analysis: SpanAnalysis, idx: np.ndarray) -> list[dict[str, Any]]:
    cp = critical_paths(analysis)
    rows = cp.row[idx]
    ops = op_above(analysis, rows)
    names, op_names = _names(analysis, rows), _names(analysis, ops)
    # The row's lane, as the timeline labels it: the tab draws a segment whose event the
    # timeline left out (its cap, Python frames) on that lane.
    m = analysis.model
    lanes = [m.lanes[int(m.lane[r])].label if r >= 0 else None for r in rows.tolist()]
    # Rounded as columns (report.rounding): a million steps list five segments each.
    return [{"kind": KIND_NAMES[k], "name": n, "row": r, "start_us": s, "dur_us": d,
             "op": o, "lane": ln}
            for k, n, r, s, d, o, ln in zip(cp.kind[idx].tolist(), names, rows.tolist(),
                                            rounded(cp.start[idx], 3), rounded(cp.dur[idx], 3),
                                            op_names, lanes, strict=True)]


def _by_op(analysis: SpanAnalysis, idx: np.ndarray) -> list[dict[str, Any]]:
    """The path's time per (op, kind), most first: a segment outside any op counts under
    its own event's name."""
    cp = critical_paths(analysis)
    m = analysis.model
    rows = cp.row[idx]
    ops = op_above(analysis, rows)
    who = np.where(ops >= 0, ops, rows)
    ok = who >= 0
    if not ok.any():
        return []
    key = m.name[who[ok]].astype(np.int64) * len(KIND_NAMES) + cp.kind[idx][ok]
    uniq, inv = np.unique(key, return_inverse=True)
    total = np.bincount(inv, weights=cp.dur[idx][ok])
    count = np.bincount(inv)
    top = np.argsort(-total, kind="stable")[:TOP_OPS]
    return [{"op": m.strings[int(uniq[t]) // len(KIND_NAMES)],
             "kind": KIND_NAMES[int(uniq[t]) % len(KIND_NAMES)],
             "us": _us(total[t]), "segments": int(count[t])} for t in top.tolist()]


def critical_path_document(analysis: SpanAnalysis, index: int,
                           limit: int | None = TOP_SEGMENTS,
                           in_time_order: bool = False) -> dict[str, Any]:
    """Window ``index``'s path: total, split by kind, what ended it, its longest ``limit``
    segments (None: all), longest first or ``in_time_order``, and the ops it spends most
    in. ``whole_path`` says the segments are the path in time order (the text report then
    lists them all)."""
    cp = critical_paths(analysis)
    sl = cp.step(index)
    idx = np.arange(sl.start, sl.stop)
    n = sl.stop - sl.start
    if limit is not None and n > limit:
        idx = idx[np.argsort(-cp.dur[idx], kind="stable")[:limit]]
        if in_time_order:
            idx.sort()
    elif not in_time_order:
        idx = idx[np.argsort(-cp.dur[idx], kind="stable")]
    return {
        "whole_path": in_time_order,
        "total_us": _us(cp.by_kind[index].sum()),
        "by_kind": {k: _us(v) for k, v in zip(KIND_NAMES, cp.by_kind[index].tolist(),
                                              strict=True)},
        "ended_by": cp.ended_by[index],
        "segments": _segments(analysis, idx),
        "segments_total": n,
        "segments_omitted": n - int(idx.size),
        "by_op": _by_op(analysis, np.arange(sl.start, sl.stop)),
    }


def whole_paths(analysis: SpanAnalysis, step: int) -> dict[int, dict[str, Any]]:
    """The whole path of every window numbered ``step`` (ProfilerStep#N's N; inferred
    iterations count from 0), by window index."""
    return {w.index: critical_path_document(analysis, w.index, limit=None, in_time_order=True)
            for w in analysis.windows if w.step == step}


def _ranked(group: np.ndarray, value: np.ndarray, top: int) -> np.ndarray:
    """Per group (``group`` ascending), the indices of its ``top`` largest values, largest
    first, equal values in index order: :func:`critical_path_document`'s order, for every
    step at once."""
    order = np.lexsort((np.arange(group.size), -value, group))
    g = group[order]
    first = np.ones(g.size, dtype=bool)
    first[1:] = g[1:] != g[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(g.size), 0))
    return order[np.arange(g.size) - start < top]


def add_critical_path(steps: list[dict[str, Any]], analysis: SpanAnalysis) -> None:
    """Per step: ``critical_path``, bounded, as :func:`critical_path_document` gives it
    (with fewer segments and ops a step where the span has more steps than
    :data:`SPAN_SEGMENTS` and :data:`SPAN_OPS` allow at the full count each); built for all
    steps at once (a span of 50,000 steps took 7.4 s one step at a time)."""
    cp = critical_paths(analysis)
    m = analysis.model
    n_steps = cp.offsets.size - 1
    counts = np.diff(cp.offsets)
    step_of = np.repeat(np.arange(n_steps), counts)
    top_segments = per_step_limit(n_steps, TOP_SEGMENTS, SPAN_SEGMENTS)
    top = _ranked(step_of, cp.dur, top_segments)
    segs = _segments(analysis, top)
    seg_at = np.concatenate([[0], np.cumsum(np.minimum(counts, top_segments))]).tolist()
    # The ops per step: time per (step, op name, kind), the most first.
    ops = op_above(analysis, cp.row)
    who = np.where(ops >= 0, ops, cp.row)
    ok = np.flatnonzero(who >= 0)
    n_k = len(KIND_NAMES)
    span = len(m.strings) * n_k
    key = (step_of[ok] * span + m.name[who[ok]].astype(np.int64) * n_k
           + cp.kind[ok].astype(np.int64))
    uniq, inv = np.unique(key, return_inverse=True)
    total = np.bincount(inv, weights=cp.dur[ok])
    count = np.bincount(inv)
    u_step = uniq // span
    best = _ranked(u_step, total, per_step_limit(n_steps, TOP_OPS, SPAN_OPS))
    by_op: list[list[dict[str, Any]]] = [[] for _ in range(n_steps)]
    rest_l = (uniq[best] % span).tolist()
    for k, rest, us, c in zip(u_step[best].tolist(), rest_l, rounded(total[best], 3),
                              count[best].tolist(), strict=True):
        by_op[k].append({"op": m.strings[rest // n_k], "kind": KIND_NAMES[rest % n_k],
                         "us": us, "segments": c})
    # Each kind's column rounded at once; a dict per step from them.
    by_kind = [dict(zip(KIND_NAMES, row, strict=True)) for row in
               zip(*(rounded(cp.by_kind[:, j], 3) for j in range(len(KIND_NAMES))),
                   strict=True)] if n_steps else []
    totals = rounded(cp.by_kind.sum(axis=1), 3)
    counts_l = counts.tolist()
    for k, s in enumerate(steps[:n_steps]):
        n = counts_l[k]
        shown = seg_at[k + 1] - seg_at[k]
        s["critical_path"] = {
            "whole_path": False,
            "total_us": totals[k],
            "by_kind": by_kind[k],
            "ended_by": cp.ended_by[k],
            "segments": segs[seg_at[k]:seg_at[k + 1]],
            "segments_total": n,
            "segments_omitted": n - shown,
            "by_op": by_op[k],
        }


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "0%"


def _dur(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def _short(name: str | None, width: int = 80) -> str:
    name = name or "?"
    return name if len(name) <= width else name[:width - 1] + "…"


def critical_path_lines(span: dict[str, Any]) -> list[str]:
    """The text report's lines: per step the path's split, the ops it spends most in and
    its longest segments (every segment, in time order, of a step whose whole path the
    document holds: ``report --step N``)."""
    steps = [s for s in span.get("steps") or [] if s.get("critical_path")]
    if not steps:
        return []
    lines = ["  critical path (what each step's end waits on, by kind; longest segments):"]
    for s in steps:
        cp = s["critical_path"]
        total = cp["total_us"]
        split = ", ".join(f"{k} {_pct(v, total)}" for k, v in
                          sorted(cp["by_kind"].items(), key=lambda kv: -kv[1]) if v > 0)
        label = "(all)" if s["step"] is None else f"#{s['step']}"
        lines.append(f"    {label} {_dur(total)}, ended by the {cp['ended_by']}: {split}")
        full = cp.get("whole_path", False)
        ops = ", ".join(f"{_short(o['op'], 60)} ({o['kind']}) {_pct(o['us'], total)}"
                        for o in cp.get("by_op") or [])
        if ops:
            lines.append(f"        mostly in: {ops}")
        segs = cp["segments"] if full else cp["segments"][:TEXT_SEGMENTS]
        for g in segs:
            op = f" in {_short(g['op'])}" if g.get("op") and g["op"] != g["name"] else ""
            lines.append(f"        {g['kind']:<7} {_dur(g['dur_us']):>9}  {_short(g['name'])}{op}")
        rest = cp["segments_total"] - len(segs)
        if rest > 0 and not full:
            lines.append(f"        … {rest} more segment(s)")
    return lines
