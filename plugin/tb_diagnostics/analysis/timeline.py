"""One step's timeline: the events of its CPU threads and GPU streams, small enough to ship.

A ResNet-50 step holds ~8,000 events and a kernel name can be a kilobyte of
C++ template, so the tab never gets the raw rows. :func:`step_timeline`
clips events to the step's range, stacks each lane into rows (depth), keeps
at most ``max_events`` of them (the longest first, so the shape of the step
survives: steps, ``record_function`` ranges, big ops and kernels), always
keeps the rows a finding points at, and adds the launch → kernel links whose
two ends were both kept. The payload is columnar (one list per field) with
a de-duplicated name table, which keeps it around 100-200 kB before gzip.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.dispatch import KIND_LABEL
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.trace.categories import DEVICE_ACTIVITY_KINDS, Kind

#: Default cap on events per step payload; a browser canvas draws this many
#: rectangles per frame without stutter, and the JSON stays ~200 kB.
MAX_EVENTS = 5000
#: Names longer than this are cut (a hover shows the cut name; kernels'
#: template arguments beyond this are noise on a timeline).
MAX_NAME = 400
#: Deeper nesting than this is dropped (counted as ``dropped``): Python stacks
#: can go 60 frames deep and would push the GPU streams out of view.
MAX_DEPTH = 16

#: Share of ``max_events`` that device activities and their launches may take
#: before host calls compete; the rest keeps the host's structure visible.
DEVICE_SHARE = 0.7

#: Not drawn: the profiler's own whole-run span, and Python frames
#: (``with_stack=True``), which nest 20-60 deep above every op and would push
#: the ops and the GPU streams out of view (the dispatch tree skips them too).
#: A finding's evidence is drawn even when it is one of these.
_SKIP_KINDS = frozenset({int(Kind.TRACE), int(Kind.PYTHON)})
DEVICE_KINDS_U8 = frozenset(int(k) for k in DEVICE_ACTIVITY_KINDS)


@dataclass(frozen=True)
class TimelineLimits:
    max_events: int = MAX_EVENTS
    max_name: int = MAX_NAME
    max_depth: int = MAX_DEPTH


def step_range(analysis: SpanAnalysis, index: int) -> tuple[float, float]:
    """The time range a step's timeline shows: its host window and its device window."""
    w = analysis.windows[index]
    return min(w.host_start, w.start), max(w.host_end, w.end)


@computed
def _by_start(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by start (the model order) and a running max of their ends.

    ``prefix_max_end[i]`` lets :func:`_overlapping` find, by binary search, the
    first row that may still be running at a time ``lo`` without a scan.
    """
    m = analysis.model
    keep = ~np.isin(m.kind, np.asarray(sorted(_SKIP_KINDS), dtype=np.uint8))
    rows = np.flatnonzero(keep)
    return rows, np.maximum.accumulate(m.end[rows]) if rows.size else np.zeros(0)


def _overlapping(analysis: SpanAnalysis, lo: float, hi: float) -> np.ndarray:
    """Rows (excluding the profiler's own span) that overlap ``[lo, hi)``, in model order."""
    m = analysis.model
    rows, prefix_max_end = _by_start(analysis)
    first = int(np.searchsorted(prefix_max_end, lo, side="right"))
    last = int(np.searchsorted(m.start[rows], hi, side="left"))
    cand = rows[first:last]
    return cand[m.end[cand] > lo]


def _depths(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Stack level of each event within its lane (rows already in start order).

    A stack of open intervals per lane: nested host calls get their nesting
    depth, and device annotations that overlap kernels get a row of their own.
    """
    depth = np.zeros(lane.shape[0], dtype=np.int32)
    open_ends: dict[int, list[float]] = {}
    for i, (ln, s, e) in enumerate(zip(lane.tolist(), start.tolist(), end.tolist(),
                                       strict=True)):
        stack = open_ends.setdefault(ln, [])
        while stack and s >= stack[-1]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(e)
    return depth


def _lane_order(analysis: SpanAnalysis, lanes: Iterable[int], step_lane: int) -> list[int]:
    """The step's own thread, then the device streams by number, then the other threads.

    Streams sit right under the thread that launches most of their work, so
    the launch → kernel links are short and the GPU is in view without scrolling.
    """
    m = analysis.model

    def key(ln: int) -> tuple:
        lane = m.lanes[ln]
        if lane.is_device:
            return (1, _num(lane.pid), _num(lane.tid), lane.label)
        return (0 if ln == step_lane or step_lane < 0 else 2, 0.0, 0.0, lane.label)

    return sorted(lanes, key=key)


def _num(text: str) -> float:
    digits = "".join(ch for ch in text if ch in "0123456789")
    return float(digits) if digits else float("inf")


def step_timeline(analysis: SpanAnalysis, index: int, highlight: Iterable[int] = (),
                  limits: TimelineLimits | None = None) -> dict[str, Any]:
    """The timeline payload of window ``index``.

    ``highlight`` rows (a finding's evidence) are always kept, even if they lie
    outside the step's range (the range then widens to include them).
    """
    limits = limits or TimelineLimits()
    m = analysis.model
    w = analysis.windows[index]
    lo, hi = step_range(analysis, index)
    wanted = np.asarray(sorted({int(r) for r in highlight if 0 <= int(r) < len(m)}),
                        dtype=np.int64)
    if wanted.size:
        lo = min(lo, float(m.start[wanted].min()))
        hi = max(hi, float(m.end[wanted].max()))
    rows = _overlapping(analysis, lo, hi)
    if wanted.size:
        rows = sorted_sets.union1d(rows, wanted)
        rows = rows[np.argsort(m.start[rows], kind="stable")]
    total = int(rows.size)

    start = np.maximum(m.start[rows], lo)
    end = np.minimum(m.end[rows], hi)
    lane = m.lane[rows]
    depth = _depths(lane, m.start[rows], m.end[rows])
    keep = depth < limits.max_depth
    too_deep = int((~keep).sum())

    if int(keep.sum()) > limits.max_events:
        keep &= _select(analysis, rows, end - start, keep, wanted, limits.max_events)
    keep |= np.isin(rows, wanted)

    rows, start, end, lane, depth = rows[keep], start[keep], end[keep], lane[keep], depth[keep]
    return _payload(analysis, w, rows, start, end, lane, depth, (lo, hi), total,
                    too_deep, limits, wanted)


def _select(analysis: SpanAnalysis, rows: np.ndarray, length: np.ndarray, eligible: np.ndarray,
            wanted: np.ndarray, budget: int) -> np.ndarray:
    """Which of ``rows`` to keep when there are more than ``budget``.

    Device activities first (longest first, up to ``DEVICE_SHARE`` of the
    budget) with the calls that launched them, then host calls longest first:
    a parent is never shorter than its child, so nesting survives the cut.
    """
    m = analysis.model
    sel = np.isin(rows, wanted) & eligible
    left = budget - int(sel.sum())
    is_dev = np.isin(m.kind[rows], np.asarray(sorted(DEVICE_KINDS_U8), dtype=np.uint8))
    dev = np.flatnonzero(eligible & is_dev & ~sel)
    dev = dev[np.argsort(-length[dev], kind="stable")][: max(int(left * DEVICE_SHARE) // 2, 0)]
    sel[dev] = True
    launchers = m.launcher[rows[dev]]
    sel |= np.isin(rows, launchers[launchers >= 0]) & eligible
    left = budget - int(sel.sum())
    rest = np.flatnonzero(eligible & ~sel)
    if left > 0 and rest.size:
        sel[rest[np.argsort(-length[rest], kind="stable")][:left]] = True
    return sel


def _payload(analysis: SpanAnalysis, w: Any, rows: np.ndarray, start: np.ndarray,
             end: np.ndarray, lane: np.ndarray, depth: np.ndarray, rng: tuple[float, float],
             total: int, too_deep: int, limits: TimelineLimits,
             wanted: np.ndarray) -> dict[str, Any]:
    m = analysis.model
    names: list[str] = []
    name_ids: dict[int, int] = {}
    name_col = []
    for sid in m.name[rows].tolist():
        j = name_ids.get(sid)
        if j is None:
            j = name_ids[sid] = len(names)
            s = m.strings[sid]
            names.append(s if len(s) <= limits.max_name else s[: limits.max_name - 1] + "…")
        name_col.append(j)

    step_lane = int(m.lane[w.row]) if w.row >= 0 else -1
    used = _lane_order(analysis, set(lane.tolist()), step_lane)
    lane_pos = {ln: i for i, ln in enumerate(used)}
    lane_depth = np.zeros(len(used), dtype=np.int64)
    lane_idx = np.asarray([lane_pos[ln] for ln in lane.tolist()], dtype=np.int64)
    if lane_idx.size:
        np.maximum.at(lane_depth, lane_idx, depth.astype(np.int64) + 1)

    pos_of_row = {r: i for i, r in enumerate(rows.tolist())}
    links = []
    launcher = m.launcher[rows]
    for i in np.flatnonzero(launcher >= 0).tolist():
        j = pos_of_row.get(int(launcher[i]))
        if j is not None:
            links.append([j, i])

    kinds = [KIND_LABEL[Kind(k)] for k in m.kind[rows].tolist()]
    clipped = (m.start[rows] < start) | (m.end[rows] > end)
    return {
        "range": {"start_us": round(rng[0], 3), "end_us": round(rng[1], 3)},
        "step_window": {"start_us": round(w.start, 3), "end_us": round(w.end, 3),
                        "host_start_us": round(w.host_start, 3),
                        "host_end_us": round(w.host_end, 3)},
        "lanes": [
            {"label": m.lanes[ln].label, "device": m.lanes[ln].is_device,
             "depth": int(lane_depth[i])}
            for i, ln in enumerate(used)
        ],
        "names": names,
        "events": {
            "row": rows.tolist(),
            "lane": lane_idx.tolist(),
            "depth": depth.tolist(),
            "start_us": np.round(start, 3).tolist(),
            "dur_us": np.round(end - start, 3).tolist(),
            "name": name_col,
            "kind": kinds,
            "clipped": np.flatnonzero(clipped).tolist(),
        },
        "links": links,
        "highlight": [pos_of_row[r] for r in wanted.tolist() if r in pos_of_row],
        "shown": int(rows.size),
        "total": total,
        "dropped": {"too_deep": too_deep, "over_limit": max(total - too_deep - int(rows.size),
                                                            0)},
    }
