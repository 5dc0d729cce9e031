"""The replay graph's host timepoints, their step marks and the other threads' anchors
(:mod:`.graph` builds the rest)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.columns import constant
from tb_diagnostics.trace.model import NO_ID

#: Timepoint kinds on a host thread, in their order at equal times.
SYNC_START, LAUNCH, SYNC_END, MARK = 0, 1, 2, 3


@dataclass(frozen=True)
class HostPoints:
    """The host timepoints in time order (kinds in :data:`SYNC_START` ... order at equal
    times), the step rows, and per step its start and end mark's timepoint, or -1."""

    row: np.ndarray  # int32 (int64 past 2^31 rows)
    kind: np.ndarray  # int8
    time: np.ndarray
    steps: np.ndarray
    mark_start: np.ndarray  # int64
    mark_end: np.ndarray  # int64


def host_timepoints(analysis: SpanAnalysis, acts: np.ndarray) -> HostPoints:
    m = analysis.model
    launcher = m.launcher[acts]
    launchers = unique(launcher[launcher >= 0])  # by a sort: see distinct
    del launcher
    syncs = analysis.sync_rows
    hs = analysis.host_steps
    steps = hs.rows if len(hs) else np.zeros(0, np.int64)
    # Rows as int32 and kinds as int8 (as the graph keeps them), from the start: four
    # columns of 3 M timepoints at 10⁶ steps, each gathered in time order below.
    n = 2 * syncs.size + launchers.size + 2 * steps.size
    # (none at all: int64, as the graph's narrowing leaves an empty column)
    row_t = np.int32 if n > 0 and len(m) <= np.iinfo(np.int32).max else np.int64
    rows = np.concatenate([syncs, launchers, syncs, steps, steps], dtype=row_t)
    kind = np.concatenate([np.full(syncs.size, SYNC_START, np.int8),
                           np.full(launchers.size, LAUNCH, np.int8),
                           np.full(syncs.size, SYNC_END, np.int8),
                           np.full(2 * steps.size, MARK, np.int8)])
    # The windows' own times: an inferred step's row only starts its iteration.
    time = np.concatenate([m.start[syncs], m.start[launchers], m.end[syncs],
                           hs.host_start if len(hs) else np.zeros(0),
                           hs.host_end if len(hs) else np.zeros(0)])
    order = np.lexsort((kind, time))
    h_kind = kind[order]
    # The step marks are the last 2 * steps of the listing, the starts first.
    first_mark = rows.shape[0] - 2 * steps.size
    if steps.size < 2 or bool((steps[1:] > steps[:-1]).all()):
        mark_start, mark_end = _marks_by_position(order, first_mark, steps.size)
    else:  # a row that starts two steps: theirs, by row
        is_end = np.zeros(rows.shape[0], dtype=bool)
        is_end[first_mark + steps.size:] = True
        mark_start, mark_end = _marks_by_row(rows[order], h_kind, is_end[order], steps)
    return HostPoints(row=rows[order], kind=h_kind, time=time[order], steps=steps,
                      mark_start=mark_start, mark_end=mark_end)


def _marks_by_position(order: np.ndarray, first_mark: int, n_steps: int,
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per step (their rows distinct), the timepoints of its start and end mark: where the
    sort ``order`` put the listing's entries ``first_mark + k`` and ``first_mark + n_steps
    + k`` (no search of each mark's row among the steps')."""
    pos = np.flatnonzero(order >= first_mark)
    k = order[pos] - first_mark
    at = np.empty(2 * n_steps, dtype=np.int64)
    at[k] = pos
    return at[:n_steps], at[n_steps:]


def _marks_by_row(h_row: np.ndarray, h_kind: np.ndarray, h_is_end: np.ndarray,
                  steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step, the last start and end mark of its row (of equal rows, the last step has
    them: a dict by row kept that one)."""
    mark = np.flatnonzero(h_kind == MARK)
    by_row = np.argsort(steps, kind="stable")
    k = by_row[np.searchsorted(steps[by_row], h_row[mark], side="right") - 1]
    mark_start = np.full(steps.size, NO_ID, dtype=np.int64)
    mark_end = np.full(steps.size, NO_ID, dtype=np.int64)
    end = h_is_end[mark]
    np.maximum.at(mark_end, k[end], mark[end])
    np.maximum.at(mark_start, k[~end], mark[~end])
    return mark_start, mark_end


def top_level(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The outermost host row enclosing each row (itself when it has no parent): the
    nearest ancestor-or-self without a parent, by pointer jumping (log depth passes)."""
    from tb_diagnostics.analysis.views.hierarchy import nearest_marked

    return nearest_marked(parent, parent < 0)[rows].astype(np.int64)


def anchors(analysis: SpanAnalysis, h_row: np.ndarray, h_lane: np.ndarray,
            h_time: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Per timepoint, the main-thread timepoint the burst it starts on another thread is
    anchored to, or -1 (``ReplayGraph.h_anchor``); int32 where the timepoints fit. With
    no other thread, a constant -1 (no pass over the model for the bursts' tops)."""
    m = analysis.model
    n = h_row.shape[0]
    # (values -1 and below n: int32 up to 2^31 timepoints; past that, narrowed as read)
    dtype = np.int32 if n <= np.iinfo(np.int32).max + 1 else np.int64
    if not n:
        return np.full(0, NO_ID, dtype=dtype)
    main = int(m.lane[steps[0]]) if steps.size else int(np.bincount(h_lane).argmax())
    on_main_mask = h_lane == main
    others = np.flatnonzero(~on_main_mask)
    if not others.size or others.size == n:  # no other thread, or no main-thread anchor
        return constant(NO_ID, n, dtype) if n > 1 else np.full(n, NO_ID, dtype=dtype)
    on_main = np.flatnonzero(on_main_mask)
    del on_main_mask
    anchor = np.full(n, NO_ID, dtype=dtype)
    top = top_level(m.parent, h_row)
    # The first timepoint of each burst (top-level row) on the other threads: per lane in
    # time order, a burst's timepoints are contiguous.
    others = others[np.argsort(h_lane[others], kind="stable")]
    key = top[others]
    first = np.ones(others.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = others[first]
    burst_start = m.start[top[starts]]
    at = np.searchsorted(h_time[on_main], burst_start, side="right") - 1
    ok = at >= 0
    # A burst its thread starts while still busy with its previous one follows that one.
    idx = np.flatnonzero(first)
    prev = np.where(idx > 0, others[np.maximum(idx - 1, 0)], NO_ID)
    prev[(idx > 0) & (h_lane[prev] != h_lane[starts])] = NO_ID
    busy = m.end[top[np.maximum(prev, 0)]] > h_time[on_main[np.maximum(at, 0)]]
    ok &= ~((prev >= 0) & busy)
    anchor[starts[ok]] = on_main[at[ok]]
    return anchor
