"""A whole span's drawn events laid out once, for the span timeline (:mod:`.span_timeline`).

Each event gets a display row (its lane's position times ``MAX_DEPTH`` plus its nesting
depth within the lane) and the rows are sorted by start, so a request for any range is
a binary search per row. The layout is built once per analysis (memoized) and can be
warmed in a background thread when a span's first step is asked for.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.timeline import _SKIP_KINDS, MAX_DEPTH, _lane_order
from tb_diagnostics.trace.categories import DEVICE_KINDS, Kind
from tb_diagnostics.trace.nesting import previous_greater


@dataclass(frozen=True)
class SpanRows:
    """Every drawn event of a span laid out once: lane rows, each sorted by start."""

    lanes: list[int]  # model lane ids, in display order
    lane_depth: np.ndarray  # rows used by each displayed lane
    order: np.ndarray  # model rows, sorted by (display row key, start)
    start: np.ndarray  # their start and end (µs since the model origin)
    end: np.ndarray
    keys: np.ndarray  # the display row keys present (lane position * MAX_DEPTH + depth)
    bounds: np.ndarray  # order[bounds[i]:bounds[i + 1]] is row keys[i]
    deep_start: np.ndarray  # events nested deeper than MAX_DEPTH: sorted starts
    deep_end: np.ndarray  # and, separately, sorted ends (counted, not drawn)
    extent: tuple[float, float]  # the span's first start and last end
    step_index: np.ndarray  # the step windows: index, number (-1: none), bounds
    step_number: np.ndarray
    step_start: np.ndarray
    step_end: np.ndarray
    step_host_start: np.ndarray
    step_host_end: np.ndarray


def chain_depth(parent: np.ndarray) -> np.ndarray:
    """Each element's number of ancestors along ``parent`` (-1: none), by pointer jumping:
    log2(deepest chain) whole-array passes instead of a walk per element."""
    depth = (parent >= 0).astype(np.int32)
    nxt = parent.astype(np.int64, copy=True)
    while True:
        live = np.flatnonzero(nxt >= 0)
        if not live.size:
            return depth
        p = nxt[live]
        depth[live] += depth[p]
        nxt[live] = nxt[p]


def _small(values: np.ndarray) -> np.ndarray:
    """Non-negative integers as int16 where they fit: numpy sorts those (stable) by radix."""
    if values.size and int(values.max()) <= np.iinfo(np.int16).max:
        return values.astype(np.int16)
    return values


def _previous_on_lane(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per position (lane by lane, each in start order), the latest earlier position on
    the same lane whose event ends after this one starts, else -1."""
    found = previous_greater(end, start).astype(np.int64)
    first = np.zeros(lane.shape[0], dtype=np.int64)  # each lane's first position
    if lane.size:
        changes = np.flatnonzero(lane[1:] != lane[:-1]) + 1
        first[changes] = changes
        np.maximum.accumulate(first, out=first)
    return np.where(found >= first, found, -1)


def _lane_parents(m: Any, rows: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """The parent position of each of ``rows`` (lane by lane, each in start order).

    Without Python frames the host rows drawn are exactly the ones the model nested at
    load (``parent``: the same rule on the same rows), so only the device rows are
    searched; with them (not drawn, but the model's parents), every row is.
    """
    if (m.kind == int(Kind.PYTHON)).any():
        return _previous_on_lane(lane, m.start[rows], m.end[rows])
    pos = np.full(len(m), -1, dtype=np.int64)
    pos[rows] = np.arange(rows.shape[0])
    parent = np.full(rows.shape[0], -1, dtype=np.int64)
    on_device = np.isin(m.kind[rows], np.asarray(sorted(DEVICE_KINDS), dtype=np.uint8))
    host = np.flatnonzero(~on_device)
    p = m.parent[rows[host]].astype(np.int64)
    parent[host] = np.where(p >= 0, pos[np.maximum(p, 0)], -1)
    dev = np.flatnonzero(on_device)  # a subsequence: still lane by lane, in start order
    if dev.size:
        r = rows[dev]
        found = _previous_on_lane(lane[dev], m.start[r], m.end[r])
        parent[dev] = np.where(found >= 0, dev[np.maximum(found, 0)], -1)
    return parent


@computed
def span_rows(analysis: SpanAnalysis) -> SpanRows:
    """The span's drawn events as lane rows (built once per span).

    Depth is the stack level of the step timeline's walk (:func:`.timeline._depths`)
    in closed form: an event's parent on its lane is the latest earlier event that
    ends after it starts (:func:`~tb_diagnostics.trace.nesting.previous_greater`),
    and its depth is the length of that chain. Events at the same depth of one lane
    never overlap, so within a row both starts and ends are sorted.
    """
    m = analysis.model
    rows = np.flatnonzero(~np.isin(m.kind, np.asarray(sorted(_SKIP_KINDS), dtype=np.uint8)))
    lane = m.lane[rows]
    # Lane by lane, each in start order (a stable sort of small integers: a radix sort).
    by_lane = np.argsort(_small(lane), kind="stable")
    rows, lane = rows[by_lane], lane[by_lane].astype(np.int64)
    start, end = m.start[rows], m.end[rows]
    depth = chain_depth(_lane_parents(m, rows, lane))

    deep = depth >= MAX_DEPTH
    keep = ~deep
    c = analysis.windows.columns  # every window's figures as columns, no view per window
    with_row = np.flatnonzero(c.row >= 0)
    step_lane = int(m.lane[c.row[with_row[0]]]) if with_row.size else -1
    present = np.bincount(lane[keep], minlength=len(m.lanes)) > 0
    used = _lane_order(analysis, np.flatnonzero(present).tolist(), step_lane)
    pos = np.full(len(m.lanes), -1, dtype=np.int64)
    pos[np.asarray(used, dtype=np.int64)] = np.arange(len(used))
    key = pos[lane[keep]] * MAX_DEPTH + depth[keep]
    o = np.argsort(_small(key), kind="stable")  # stable: each row stays in start order
    key = key[o]
    order = rows[keep][o]
    first_at = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else \
        np.zeros(0, dtype=np.int64)
    keys = key[first_at]
    lane_depth = np.zeros(len(used), dtype=np.int64)
    if keys.size:
        np.maximum.at(lane_depth, keys // MAX_DEPTH, keys % MAX_DEPTH + 1)

    kept_start, kept_end = m.start[order], m.end[order]
    n = len(c)
    extent = ((float(kept_start.min()), float(kept_end.max())) if order.size else
              (float(c.host_start.min()) if n else 0.0, float(c.host_end.max()) if n else 1.0))
    return SpanRows(
        lanes=used, lane_depth=lane_depth, order=order, start=kept_start, end=kept_end,
        keys=keys, bounds=np.append(first_at, order.shape[0]),
        deep_start=np.sort(start[deep]), deep_end=np.sort(end[deep]), extent=extent,
        step_index=np.arange(n, dtype=np.int64),
        step_number=c.step.astype(np.int64) if c.has_steps else np.full(n, -1, np.int64),
        step_start=c.start.astype(np.float64), step_end=c.end.astype(np.float64),
        step_host_start=c.host_start.astype(np.float64),
        step_host_end=c.host_end.astype(np.float64),
    )


_warming: weakref.WeakKeyDictionary[SpanAnalysis, threading.Thread] = \
    weakref.WeakKeyDictionary()
_warm_lock = threading.Lock()


def warm(analysis: SpanAnalysis) -> None:
    """Lay the span's rows out in a background thread, once per analysis: the server calls
    this when a span's first step is asked for, so the whole-span view's first answer
    pays only for its own range (the layout of a 500 MB trace takes about a second)."""
    with _warm_lock:
        if analysis in _warming:
            return
        t = _warming[analysis] = threading.Thread(target=span_rows, args=(analysis,),
                                                  daemon=True, name="tb-diagnostics-span-rows")
    t.start()


def laid_out(analysis: SpanAnalysis) -> SpanRows:
    """The span's layout, waiting for a :func:`warm` thread already building it rather
    than building it twice."""
    with _warm_lock:
        warming = _warming.get(analysis)
    if warming is not None and warming.is_alive():
        warming.join()
    return span_rows(analysis)
