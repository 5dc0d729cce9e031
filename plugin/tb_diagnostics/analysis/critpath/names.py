"""Which event a stretch of host time on the path belongs to, and the op above an event.

A host stretch is named after the deepest event on its thread that covers at least half
of it: such an event contains the stretch's midpoint, so it is an ancestor-or-self of
the innermost event there, and coverage only grows up that chain. A stretch no event
covers half of (it spans several top-level calls) keeps the name its edge gave it.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique


class LaneEvents:
    """Per host lane: its host events' rows, sorted by start as the model is, and their
    starts; found once per lane for all the calls of one walk (a pass over the model
    each), in the parent column's dtype (int32 but past 2^31 rows)."""

    def __init__(self, analysis: SpanAnalysis) -> None:
        self._model = analysis.model
        self._by_lane: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def on(self, lane: int) -> tuple[np.ndarray, np.ndarray]:
        got = self._by_lane.get(lane)
        if got is None:
            m = self._model
            rows = np.flatnonzero(m.is_host & (m.lane == lane)).astype(m.parent.dtype)
            got = self._by_lane[lane] = (rows, m.start[rows])
        return got


def _innermost_at(analysis: SpanAnalysis, events: LaneEvents, lane: int,
                  t: np.ndarray) -> np.ndarray:
    """The innermost host event on ``lane`` containing each time, or -1."""
    m = analysis.model
    rows, starts = events.on(lane)
    # Rows in the parent column's dtype (int32 but past 2^31 rows): millions of stretches.
    out = np.full(t.shape[0], -1, dtype=m.parent.dtype)
    if not rows.size:
        return out
    k = np.searchsorted(starts, t, side="right") - 1
    ok = k >= 0
    out[ok] = rows[k[ok]]
    del k
    todo = np.flatnonzero(ok)
    todo = todo[m.end[out[todo]] < t[todo]]
    while todo.size:  # up to the first ancestor still open at t
        up = m.parent[out[todo]]
        out[todo] = up
        todo = todo[up >= 0]
        todo = todo[m.end[out[todo]] < t[todo]]
    return out


def host_names(analysis: SpanAnalysis, start: np.ndarray, end: np.ndarray,
               lane: np.ndarray, row: np.ndarray, events: LaneEvents | None = None,
               ) -> np.ndarray:
    """Per host stretch: the deepest event on its thread covering at least half of it,
    else ``row``. ``events``: the lanes' events, where the caller names many blocks."""
    m = analysis.model
    events = LaneEvents(analysis) if events is None else events
    out = row.astype(np.int64, copy=True)
    half = (end - start) / 2
    mid = start + half
    for ln in unique(lane[lane >= 0]).tolist():  # the sorting path: see distinct
        on = np.flatnonzero(lane == ln)
        # Every stretch on one thread (the usual case): the columns themselves, not copies.
        every = on.size == lane.shape[0]
        sel = slice(None) if every else on
        s, e, h = start[sel], end[sel], half[sel]
        cand = _innermost_at(analysis, events, ln, mid[sel])
        todo = np.flatnonzero(cand >= 0)
        while todo.size:  # up the chain until the event covers half of the stretch
            r = cand[todo]
            cov = np.minimum(m.end[r], e[todo]) - np.maximum(m.start[r], s[todo])
            todo = todo[cov < h[todo]]
            up = m.parent[cand[todo]]
            cand[todo] = up
            todo = todo[up >= 0]
        found = cand >= 0
        out[found if every else on[found]] = cand[found]
    return out


def op_above(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """The innermost operator at or above each row on its thread; for a device activity,
    the op that launched it; -1 where there is none."""
    from tb_diagnostics.analysis.views.hierarchy import innermost_op, is_op

    m = analysis.model
    out = rows.astype(np.int64, copy=True)
    ok = out >= 0
    dev = np.zeros(out.shape[0], dtype=bool)
    dev[ok] = ~m.is_host[out[ok]]
    out[dev] = m.launcher[out[dev]]
    # The row itself when it is an op, else the span's nearest op above it (found once
    # by pointer jumping): no climb per call, one Python frame at a time.
    ok = np.flatnonzero(out >= 0)
    r = out[ok]
    out[ok] = np.where(is_op(analysis)[r], r, innermost_op(analysis)[r])
    return out
