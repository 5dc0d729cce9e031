"""The timeline across a whole span, with the level of detail decided on the server.

A 500 MB trace holds millions of events; a canvas draws a few thousand per frame.
:func:`span_timeline` answers "what is visible in ``[t0, t1]`` drawn ``width``
pixels wide" with at most ``max_items`` items, in the step timeline's columnar
payload (:mod:`.timeline`), so the same drawing code draws it:

- an event at least one bin wide (a bin starts as one pixel: ``(t1 - t0) /
  width``) is sent as itself;
- the narrower ones are merged, per lane row, into one item per bin: its start,
  its end, how many events it holds, their busy time, and the name with the most
  busy time in it (the "dominant" name). Their counts and busy times add up to
  the raw events in range, so nothing disappears, it only merges;
- when even that is more than ``max_items`` items (many rows, each busy in every
  pixel), the bin doubles until it fits.

The per-row layout (lane order, depth, rows sorted by start) is built once per span
(:func:`~tb_diagnostics.analysis.span_rows.span_rows`); a request is a binary search per
row and whole-array passes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tb_diagnostics.analysis.dispatch import KIND_LABEL
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.span_rows import SpanRows, laid_out
from tb_diagnostics.analysis.timeline import MAX_DEPTH, MAX_NAME, step_range
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.chrome_export import file_clock_offset

#: Items (single events plus merged bins) per response: what a canvas redraws
#: on every pan without stutter, and ~300 kB of JSON at most.
MAX_ITEMS = 5000
#: Step boundaries per response; a span of more steps in view gets every k-th.
MAX_STEPS = 1000
#: Widths a request may ask for (pixels): a phone's canvas to a 8K screen.
MIN_WIDTH, MAX_WIDTH = 50, 8000


class SpanTimelineError(ValueError):
    """A request this module cannot answer (a bad range or width)."""


def _in_range(sr: SpanRows, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``sr.order`` of the events overlapping ``(t0, t1)``, row by row, and
    the index into ``sr.keys`` of each one's row."""
    lo, hi = sr.bounds[:-1], sr.bounds[1:]
    a = np.empty(lo.shape[0], dtype=np.int64)
    b = np.empty(lo.shape[0], dtype=np.int64)
    for i, (x, y) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        # Sorted ends and starts within a row: the first that ends after t0, the
        # first that starts at or after t1.
        a[i] = x + int(np.searchsorted(sr.end[x:y], t0, side="right"))
        b[i] = x + int(np.searchsorted(sr.start[x:y], t1, side="left"))
    counts = np.maximum(b - a, 0)
    total = int(counts.sum())
    row_of = np.repeat(np.arange(lo.shape[0], dtype=np.int64), counts)
    base = np.repeat(a - (np.cumsum(counts) - counts), counts)
    return base + np.arange(total, dtype=np.int64), row_of


def _first_bin(counts: np.ndarray, span: float, px: float, budget: int) -> float:
    """The smallest bin (one pixel, doubled) at which the rows' bins could fit the
    budget: a row holds at most one item per bin and at most one per event."""
    b = px
    while b < span and int(np.minimum(counts, math.ceil(span / b) + 1).sum()) > budget:
        b *= 2
    return b


def _dominant(gid: np.ndarray, name: np.ndarray, busy: np.ndarray, n_groups: int
              ) -> np.ndarray:
    """Per group, the position of an element whose name has the most busy time in it."""
    code = gid * (int(name.max()) + 1 if name.size else 1) + name
    o = np.argsort(code, kind="stable")
    c = code[o]
    runs = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    run_busy = np.add.reduceat(busy[o], runs) if runs.size else np.zeros(0)
    run_gid = gid[o[runs]]
    # Per group, of the runs with its most busy time the last (the highest name): a
    # maximum per group over the runs, in their order, where a sort of every run (there
    # is one per distinct name in a bin: millions on a span of many kernel names) took
    # a third of the first response.
    first_run = np.flatnonzero(np.r_[True, run_gid[1:] != run_gid[:-1]])
    most = np.maximum.reduceat(run_busy, first_run)
    top = np.flatnonzero(run_busy == np.repeat(most, np.diff(np.r_[first_run, runs.shape[0]])))
    last = top[np.r_[run_gid[top][1:] != run_gid[top][:-1], True]]
    out = np.empty(n_groups, dtype=np.int64)
    out[run_gid[last]] = o[runs[last]]
    return out


def span_timeline(analysis: SpanAnalysis, t0: float | None = None, t1: float | None = None,
                  width: int = 1200, max_items: int = MAX_ITEMS,
                  max_name: int = MAX_NAME) -> dict[str, Any]:
    """The span's timeline in ``[t0, t1]`` (µs since the model origin; the span's extent
    where not given) for a canvas ``width`` pixels wide: at most ``max_items`` items."""
    sr = laid_out(analysis)
    lo = sr.extent[0] if t0 is None else float(t0)
    hi = sr.extent[1] if t1 is None else float(t1)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise SpanTimelineError("t0 and t1 must be finite numbers (µs)")
    if hi <= lo:
        if t0 is None and t1 is None:
            hi = lo + 1.0  # a span of zero-length events
        else:
            raise SpanTimelineError(f"t1 ({hi}) must be after t0 ({lo})")
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise SpanTimelineError(f"width must be {MIN_WIDTH}..{MAX_WIDTH} pixels, not {width}")
    m = analysis.model
    idx, row_of = _in_range(sr, lo, hi)
    total = int(idx.shape[0])
    cs = np.maximum(sr.start[idx], lo)
    ce = np.minimum(sr.end[idx], hi)
    vis = ce - cs
    span = hi - lo
    counts = np.bincount(row_of, minlength=sr.keys.shape[0])
    b = _first_bin(counts, span, span / width, max_items)
    while True:
        wide = vis >= b
        narrow = np.flatnonzero(~wide)
        n_bins = math.ceil(span / b) + 1
        bin_key = row_of[narrow] * n_bins + np.minimum(((cs[narrow] - lo) // b).astype(np.int64),
                                                       n_bins - 1)
        starts = np.flatnonzero(np.r_[True, bin_key[1:] != bin_key[:-1]]) if narrow.size \
            else np.zeros(0, dtype=np.int64)
        if int(wide.sum()) + starts.shape[0] <= max_items or b >= span:
            break
        b *= 2
    single = np.flatnonzero(wide)

    # The merged bins.
    n_groups = starts.shape[0]
    g_count = np.diff(np.append(starts, narrow.shape[0]))
    g_busy = np.add.reduceat(vis[narrow], starts) if n_groups else np.zeros(0)
    g_start = cs[narrow[starts]] if n_groups else np.zeros(0)
    g_end = np.maximum.reduceat(ce[narrow], starts) if n_groups else np.zeros(0)
    gid = np.repeat(np.arange(n_groups, dtype=np.int64), g_count)
    narrow_rows = sr.order[idx[narrow]]
    dom = _dominant(gid, m.name[narrow_rows].astype(np.int64), vis[narrow], n_groups) \
        if n_groups else np.zeros(0, dtype=np.int64)
    g_model = narrow_rows[dom]
    g_rowkey = row_of[narrow[starts]] if n_groups else np.zeros(0, dtype=np.int64)

    # Singles and bins in one list, each lane row in start order (the hit test's order).
    s_model = sr.order[idx[single]]
    item_rowkey = np.concatenate([row_of[single], g_rowkey])
    item_start = np.concatenate([cs[single], g_start])
    item_end = np.concatenate([ce[single], g_end])
    item_model = np.concatenate([s_model, g_model]).astype(np.int64)
    is_bin = np.r_[np.zeros(single.shape[0], dtype=bool), np.ones(n_groups, dtype=bool)]
    o = np.lexsort((item_start, item_rowkey))
    item_rowkey, item_start, item_end = item_rowkey[o], item_start[o], item_end[o]
    item_model, is_bin = item_model[o], is_bin[o]
    bin_pos = np.flatnonzero(is_bin)
    g_order = o[is_bin] - single.shape[0]  # which group each bin item is

    key = sr.keys[item_rowkey]
    return _payload(analysis, sr, (lo, hi), b, item_model, key // MAX_DEPTH,
                    key % MAX_DEPTH, item_start, item_end, is_bin, bin_pos,
                    g_count[g_order], g_busy[g_order], total, max_name)


def _payload(analysis: SpanAnalysis, sr: SpanRows, rng: tuple[float, float], bin_us: float,
             model_rows: np.ndarray, lane: np.ndarray, depth: np.ndarray, start: np.ndarray,
             end: np.ndarray, is_bin: np.ndarray, bin_pos: np.ndarray, bin_count: np.ndarray,
             bin_busy: np.ndarray, total: int, max_name: int) -> dict[str, Any]:
    m = analysis.model
    lo, hi = rng
    sids, name_col = np.unique(m.name[model_rows], return_inverse=True)
    names = [s if len(s) <= max_name else s[: max_name - 1] + "…"
             for s in (m.strings[i] for i in sids.tolist())]
    rows_out = np.where(is_bin, -1, model_rows)
    # Launch → kernel links between two single events both in the answer.
    pos_of = {r: i for i, r in enumerate(rows_out.tolist()) if r >= 0}
    launcher = m.launcher[np.where(is_bin, 0, model_rows)] if model_rows.size else \
        np.zeros(0, dtype=np.int64)
    links = [[pos_of[int(launcher[i])], i] for i in np.flatnonzero(~is_bin & (launcher >= 0))
             .tolist() if int(launcher[i]) in pos_of]
    clipped = ~is_bin & ((m.start[model_rows] < lo) | (m.end[model_rows] > hi))
    deep = int(np.searchsorted(sr.deep_start, hi, side="left")
               - np.searchsorted(sr.deep_end, lo, side="right"))
    return {
        "mode": "span",
        "range": {"start_us": round(lo, 3), "end_us": round(hi, 3)},
        "extent": {"start_us": round(sr.extent[0], 3), "end_us": round(sr.extent[1], 3)},
        # No one step's window: nothing is shaded as "outside the step".
        "step_window": {"start_us": round(lo, 3), "end_us": round(hi, 3),
                        "host_start_us": round(lo, 3), "host_end_us": round(hi, 3)},
        "lanes": [{"label": m.lanes[ln].label, "device": m.lanes[ln].is_device,
                   "depth": int(sr.lane_depth[i])} for i, ln in enumerate(sr.lanes)],
        "names": names,
        "events": {
            "row": rows_out.tolist(),
            "lane": lane.tolist(),
            "depth": depth.tolist(),
            "start_us": np.round(start, 3).tolist(),
            "dur_us": np.round(end - start, 3).tolist(),
            "name": name_col.tolist(),
            "kind": [KIND_LABEL[Kind(k)] for k in m.kind[model_rows].tolist()],
            "clipped": np.flatnonzero(clipped).tolist(),
        },
        "merged": {"index": bin_pos.tolist(), "count": bin_count.tolist(),
                   "busy_us": np.round(bin_busy, 3).tolist()},
        "bin_us": bin_us,
        "links": links,
        "highlight": [],
        "steps": _steps(sr, lo, hi),
        "shown": int(model_rows.shape[0]),
        "single": int(model_rows.shape[0] - bin_pos.shape[0]),
        "total": total,
        "dropped": {"too_deep": max(deep, 0), "over_limit": 0},
    }


def _steps(sr: SpanRows, lo: float, hi: float) -> list[dict[str, Any]]:
    """The step windows overlapping ``[lo, hi]`` (every k-th past MAX_STEPS)."""
    a = np.minimum(sr.step_start, sr.step_host_start)
    z = np.maximum(sr.step_end, sr.step_host_end)
    hit = np.flatnonzero((a < hi) & (z > lo))
    if hit.size > MAX_STEPS:
        hit = hit[:: math.ceil(hit.size / MAX_STEPS)]
    return [{"index": int(sr.step_index[i]),
             "step": None if sr.step_number[i] < 0 else int(sr.step_number[i]),
             "start_us": round(float(sr.step_start[i]), 3),
             "end_us": round(float(sr.step_end[i]), 3),
             "host_start_us": round(float(sr.step_host_start[i]), 3),
             "host_end_us": round(float(sr.step_host_end[i]), 3)} for i in hit.tolist()]


def file_range(analysis: SpanAnalysis, index: int | None) -> tuple[float, float] | None:
    """Step ``index``'s timeline range (:func:`.timeline.step_range`) in the trace file's
    own clock (what a Chrome-trace export cuts by); None for the whole span."""
    if index is None:
        return None
    lo, hi = step_range(analysis, index)
    off = file_clock_offset(analysis.model)
    return lo + off, hi + off
