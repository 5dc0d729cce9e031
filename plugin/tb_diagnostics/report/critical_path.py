"""The critical path in the report: per step its split by kind, its longest segments and
the ops they belong to (``steps[].critical_path``), the whole path on request, and its
lines in the text report. The path itself is :mod:`tb_diagnostics.analysis.critpath`."""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.critpath import KIND_NAMES, critical_paths
from tb_diagnostics.analysis.critpath.names import op_above
from tb_diagnostics.analysis.critpath.walk import ENDED_BY
from tb_diagnostics.lazy_rows import ABSENT, dict_column, list_column
from tb_diagnostics.report.rounding import rounded_array
from tb_diagnostics.report.step_columns import (
    Layer,
    flat_offsets,
    labels_column,
    set_columns,
    strings_column,
    where,
)

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


def _segments(analysis: SpanAnalysis, idx: np.ndarray) -> list[dict[str, Any]]:
    """The segments ``idx`` of the span's paths as dicts (:func:`_segment_columns`)."""
    return _segment_columns(analysis, idx).take(0, idx.size)


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
        "ended_by": cp.ended_by_of(index),
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
    if top == 1:
        return _first_max(group, value)
    order = np.lexsort((-value, group))  # stable: equal values in index order
    g = group[order]
    first = np.ones(g.size, dtype=bool)
    first[1:] = g[1:] != g[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(g.size), 0))
    return order[np.arange(g.size) - start < top]


def _first_max(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """:func:`_ranked` with ``top`` 1 (every step past :data:`SPAN_SEGMENTS`): per group,
    the first index of its largest value (NaN below every number: the first of a group
    of NaNs), by a maximum per group and no sort."""
    if not group.size:
        return np.zeros(0, dtype=np.int64)
    first = np.ones(group.size, dtype=bool)
    np.not_equal(group[1:], group[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    best = np.fmax.reduceat(value, starts)  # NaN only where the group is all NaN
    of = np.cumsum(first) - 1
    target = best[of]
    hit = np.flatnonzero((value == target) | np.isnan(target))
    lead = np.ones(hit.size, dtype=bool)
    np.not_equal(of[hit[1:]], of[hit[:-1]], out=lead[1:])
    return hit[lead]


#: Steps whose segments and ops :func:`_step_tops` ranks at a time: its temporaries are
#: a few arrays of a block's segments (all of a 10⁶-step span's at once were 300 MB).
BLOCK_STEPS = 1 << 15


def _step_tops(analysis: SpanAnalysis, n_steps: int, top_segments: int, top_ops: int,
               ) -> tuple[np.ndarray, ...]:
    """For the first ``n_steps`` steps, by step: the indices of each one's longest
    ``top_segments`` segments (longest first) and the op above each; and its ``top_ops``
    (op name, kind) keys by time on the path (``step * names * kinds + name * kinds +
    kind``), with their time and segment counts. A block of steps at a time: every step's
    ranks and sums are its own, in the same order as over all steps at once."""
    cp = critical_paths(analysis)
    m = analysis.model
    n_k = len(KIND_NAMES)
    span = len(m.strings) * n_k
    parts = []
    for b0 in range(0, n_steps, BLOCK_STEPS):
        b1 = min(b0 + BLOCK_STEPS, n_steps)
        o0, o1 = int(cp.offsets[b0]), int(cp.offsets[b1])
        step_of = np.repeat(np.arange(b0, b1), np.diff(cp.offsets[b0:b1 + 1]))
        dur = cp.dur[o0:o1]
        top = _ranked(step_of, dur, top_segments)  # by step, longest first
        # The ops per step: time per (step, op name, kind), the most first.
        row = cp.row[o0:o1]
        ops = op_above(analysis, row)
        who = np.where(ops >= 0, ops, row)
        ok = np.flatnonzero(who >= 0)
        key = (step_of[ok] * span + m.name[who[ok]].astype(np.int64) * n_k
               + cp.kind[o0:o1][ok].astype(np.int64))
        # (a block's keys come by step: a stable sort merges their runs)
        uniq, inv = sorted_sets.unique_inverse(key)
        total = np.bincount(inv, weights=dur[ok])
        count = np.bincount(inv)
        best = _ranked(uniq // span, total, top_ops)
        parts.append((top + o0, ops[top], uniq[best], total[best], count[best]))
    if not parts:
        none = np.zeros(0, dtype=np.int64)
        return none, none, none, np.zeros(0), none
    return tuple(np.concatenate(c) for c in zip(*parts, strict=True))


def critical_path_columns(analysis: SpanAnalysis, n: int) -> Layer:
    """Per step of ``n`` (the span's windows): ``critical_path``, bounded, as
    :func:`critical_path_document` gives it (with fewer segments and ops a step where the
    span has more steps than :data:`SPAN_SEGMENTS` and :data:`SPAN_OPS` allow at the full
    count each); built for all steps at once as columns, no dict per step (a span of
    50,000 steps took 7.4 s one step at a time)."""
    cp = critical_paths(analysis)
    m = analysis.model
    n_steps = min(cp.offsets.size - 1, n)
    counts = np.diff(cp.offsets[:n_steps + 1])
    top_segments = per_step_limit(n_steps, TOP_SEGMENTS, SPAN_SEGMENTS)
    top, top_ops, best, total, count = _step_tops(
        analysis, n_steps, top_segments, per_step_limit(n_steps, TOP_OPS, SPAN_OPS))
    shown = np.minimum(counts, top_segments)
    segments = list_column(flat_offsets(shown), _segment_columns(analysis, top, top_ops))
    del top, top_ops
    n_k = len(KIND_NAMES)
    span = len(m.strings) * n_k
    rest = best % span
    by_op = list_column(
        flat_offsets(np.bincount(best // span, minlength=n_steps)),
        dict_column(("op", "kind", "us", "segments"),
                    [strings_column(rest // n_k, m.strings), labels_column(rest % n_k, KIND_NAMES),
                     rounded_array(total, 3), count], best.size))
    by_kind = dict_column(KIND_NAMES, [rounded_array(cp.by_kind[:n_steps, j], 3)
                                       for j in range(n_k)], n_steps)
    path = dict_column(
        ("whole_path", "total_us", "by_kind", "ended_by", "segments", "segments_total",
         "segments_omitted", "by_op"),
        [np.zeros(n_steps, dtype=bool), rounded_array(cp.by_kind[:n_steps].sum(axis=1), 3),
         by_kind, labels_column(cp.device_ended[:n_steps].view(np.int8), ENDED_BY), segments,
         counts, counts - shown, by_op], n_steps)
    # Steps past the path's (none in practice) have no key, as before.
    return (("critical_path",),
            [path if n_steps == n else where(np.arange(n) < n_steps, path, ABSENT)])


def _segment_columns(analysis: SpanAnalysis, idx: np.ndarray,
                     ops: np.ndarray | None = None) -> Any:
    """The segments ``idx`` of the span's paths (``cp.row`` etc.'s indices) as a column of
    dicts: kind, name, model row, start, duration, the op above (``ops``, where the caller
    has them: ``op_above`` of the rows), the lane; rounded as columns (a million steps
    list a segment each)."""
    cp = critical_paths(analysis)
    m = analysis.model
    rows = cp.row[idx]
    ok = rows >= 0
    names = np.where(ok, m.name[np.maximum(rows, 0)], -1)
    ops = op_above(analysis, rows) if ops is None else ops
    op_names = np.where(ops >= 0, m.name[np.maximum(ops, 0)], -1)
    # The row's lane, as the timeline labels it: the tab draws a segment whose event the
    # timeline left out (its cap, Python frames) on that lane.
    lane = m.lane[np.maximum(rows, 0)].astype(np.int64)
    lanes = np.where(ok, lane % max(len(m.lanes), 1), -1)  # a list's index, as it was
    return dict_column(
        ("kind", "name", "row", "start_us", "dur_us", "op", "lane"),
        [labels_column(cp.kind[idx], KIND_NAMES), strings_column(names, m.strings), rows,
         rounded_array(cp.start[idx], 3), rounded_array(cp.dur[idx], 3),
         strings_column(op_names, m.strings),
         strings_column(lanes, [ln.label for ln in m.lanes])], idx.size)


def add_critical_path(steps: list[dict[str, Any]], analysis: SpanAnalysis) -> None:
    """Set ``critical_path`` (:func:`critical_path_columns`) on every step document."""
    set_columns(steps, critical_path_columns(analysis, len(steps)))


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
