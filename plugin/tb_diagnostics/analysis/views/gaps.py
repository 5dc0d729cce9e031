"""Device idle gaps between kernels inside a step, and what the host did meanwhile.

A gap is the time between two consecutive busy periods of the device (any
stream), both inside one step window: the device had run work of this step and
had more to run, but nothing was ready. Gaps before a step's first activity are
not "between kernels" (the step's start-up: input, the first launches) and are
left to the input and launch rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import covered
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.trace.categories import Kind

#: Host kinds that say what the host was doing (not the step marker, not the
#: profiler, not Python frames, which wrap everything).
_TELLING = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER)


@dataclass(frozen=True)
class DeviceGaps:
    """Idle gaps between device activities of the same step, as columns."""

    start: np.ndarray
    end: np.ndarray
    window: np.ndarray  # index into analysis.windows
    before: np.ndarray  # device row that ended when the gap opened (-1 if unknown)
    after: np.ndarray  # device row that started when it closed (-1 if unknown)
    artefact: np.ndarray  # bool: mostly profiler time (a buffer request, the first launch)

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @property
    def dur(self) -> np.ndarray:
        return self.end - self.start


def _empty() -> DeviceGaps:
    f = np.zeros(0)
    i = np.zeros(0, dtype=np.int64)
    return DeviceGaps(f, f, i, i, i, np.zeros(0, dtype=bool))


@computed
def device_gaps(analysis: SpanAnalysis) -> DeviceGaps:
    if analysis.cpu_only:
        return _empty()
    busy = analysis.busy_intervals
    if len(busy) < 2:
        return _empty()
    gs, ge = busy.end[:-1], busy.start[1:]
    lo, hi = analysis.bounds
    k = np.searchsorted(lo, gs, side="right") - 1
    ok = (k >= 0) & (ge <= hi[np.maximum(k, 0)])
    gs, ge, k = gs[ok], ge[ok], k[ok]

    m = analysis.model
    acts = m.device_activity_rows
    by_end = acts[np.argsort(m.end[acts], kind="stable")]
    i = np.searchsorted(m.end[by_end], gs, side="right") - 1
    before = np.where(i >= 0, by_end[np.maximum(i, 0)], -1)
    by_start = acts  # model rows are already in start order
    j = np.searchsorted(m.start[by_start], ge, side="left")
    after = np.where(j < by_start.size, by_start[np.minimum(j, by_start.size - 1)], -1)

    art = profiler_artefacts(analysis).device_gaps
    artefact = covered(art, gs, ge) > 0.5 * (ge - gs)
    return DeviceGaps(start=gs, end=ge, window=k, before=before, after=after,
                      artefact=artefact)


def host_causes(analysis: SpanAnalysis, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """µs of each ``[lo[i], hi[i])`` the host spent in input, sync, comm, launch work or nothing.

    Same precedence as the step verdict: input first, then sync, comm, launch.
    """
    a = analysis
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    with_sync = a.input_intervals | a.sync_intervals
    with_comm = with_sync | a.comm_intervals
    c_in = covered(a.input_intervals, lo, hi)
    c_sync = covered(with_sync, lo, hi)
    c_comm = covered(with_comm, lo, hi)
    c_all = covered(with_comm | a.launch_intervals, lo, hi)
    return {"input": c_in, "sync": c_sync - c_in, "comm": c_comm - c_sync,
            "launch": c_all - c_comm, "other": np.maximum(hi - lo - c_all, 0.0)}


def host_rows_during(analysis: SpanAnalysis, lo: float, hi: float, limit: int = 2) -> list[int]:
    """The host rows that best say what the host did in ``[lo, hi)``.

    The deepest op/annotation/runtime call covering the most of the interval
    first; step markers, Python frames and profiler rows are never chosen.
    """
    m = analysis.model
    rows = _telling_rows(analysis)
    starts, reach, longest = _telling_reach(analysis)
    # Rows are in start order; only those starting before hi can overlap. Of the others
    # (all but the longest few), none before the first whose running latest end passes
    # lo: a caller asking once per step reads its step's rows, not every row before it.
    a = int(np.searchsorted(reach, lo, side="right"))
    k = int(np.searchsorted(starts, hi, side="left"))
    rows = rows[np.concatenate((longest[longest < min(a, k)], np.arange(a, k)))]
    rows = rows[m.end[rows] > lo]
    if not rows.size:
        return []
    overlap = np.minimum(m.end[rows], hi) - np.maximum(m.start[rows], lo)
    # Longest overlap first; among equals, the deeper (later-starting) row.
    order = np.lexsort((-m.start[rows], -np.round(overlap, 3)))
    return [int(r) for r in rows[order[:limit]]]


#: The longest telling rows kept apart from the running latest end (a "train" label over
#: the whole span would make every earlier row a candidate for every later step).
_LONGEST = 64


@computed
def _telling_reach(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The telling rows' starts; the latest end among the rows up to each one, the
    :data:`_LONGEST` longest left out; and those longest rows' positions, ascending."""
    m = analysis.model
    rows = _telling_rows(analysis)
    start, end = m.start[rows], m.end[rows]
    longest = np.zeros(0, dtype=np.int64)
    if rows.size > _LONGEST:
        longest = np.sort(np.argpartition(start - end, _LONGEST)[:_LONGEST]).astype(np.int64)
    elif rows.size:
        longest = np.arange(rows.size, dtype=np.int64)
    rest = end.copy()
    rest[longest] = -np.inf
    return start, np.maximum.accumulate(rest) if rows.size else rest, longest


@computed
def _telling_rows(analysis: SpanAnalysis) -> np.ndarray:
    m = analysis.model
    rows = m.rows_of(set(_TELLING))
    rows = sorted_sets.setdiff1d(rows, analysis.step_rows, assume_unique=True)
    return sorted_sets.setdiff1d(rows, profiler_artefacts(analysis).rows, assume_unique=True)
