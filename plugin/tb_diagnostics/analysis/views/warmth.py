"""Cold start: step walls without profiler time, record_function dead windows, and
which step ran cold: decided here, once, for every reader.

The Hugging Face guide's "why does ProfilerStep#2 take so long?": the first
profiled step pays one-time costs (cuBLAS handle and workspace, kernel
selection, lazy module loading, allocator growth), visible as a step much wider
than the rest and as a *dead window* between a ``record_function`` label's start
and the first ``aten::`` op it dispatches (≈228 µs cold vs ≈5 µs warm there).

**A step is cold** when it is the first of at least two profiled steps (or
inferred iterations) and either

- its wall, without the profiler's own device gaps, is at least
  :data:`COLD_RATIO` × the median of the later steps and :data:`COLD_MIN_EXCESS_US`
  longer (a *cold wall*), or
- a ``record_function`` label in it waits at least :data:`COLD_DEAD_RATIO` × longer
  for its first op than the same label's median in the later steps, and at least
  :data:`COLD_MIN_DEAD_US` (a *cold dead window*).

Only the first step can be cold; a span without steps has one window, never cold.
``StepWalls.cold`` is that decision; the step documents' ``cold`` field, the
``cold-start-step`` finding, the rules' warm steps (``rules._util.warm_steps``), the
headline, the what-if section, the compare and the tab's step chart all read it.

**A trailing stub is no step to judge.** The profiler closes ``ProfilerStep#N`` and
opens N+1 at each ``prof.step()``; when it is stopped mid-cycle (the ``with`` block ends
before the schedule's active steps are done) the last ``prof.step()`` has opened a step
that the loop never ran: a few µs to the profiler's stop, with no op, no user
``record_function`` and no device work in it (a ``DataLoader`` call ending the loop, a
sync or Python frames may be). That last window (:func:`trailing_stub`; only the last of
two or more ``ProfilerStep#`` steps can be one) is neither warm nor cold: it is not the
median a first step is measured against, never the only real step's reason to be cold,
and no verdict or figure reads it (``StepWalls.warm``, ``StepWalls.judged``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import covered
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.trace.categories import Kind

#: A first step at least this many times the median of the later steps is cold.
COLD_RATIO = 1.5
#: ...and at least this much longer in absolute terms (µs), so that 40 µs steps
#: jittering by 30 µs are not "cold".
COLD_MIN_EXCESS_US = 100.0
#: A first-step dead window this many times the same label's warm median is cold...
COLD_DEAD_RATIO = 10.0
#: ...when it is at least this long (µs; the guide's cold window was 228 µs).
COLD_MIN_DEAD_US = 50.0


@dataclass(frozen=True)
class StepWalls:
    """Per step window: the wall time without the profiler's own device gaps."""

    wall: np.ndarray  # µs, wall minus artefact device gaps
    artefact_us: np.ndarray  # µs removed per window
    cold: np.ndarray  # bool per window: the cold first step (see the module doc)
    rest_median: float  # median wall of windows 1.. but the stub (NaN with fewer than 2)
    cold_wall: bool  # the first step's wall made it cold
    #: The first step's coldest dead window: (label row, its µs, the label's warm median
    #: µs), the row -1 when none is cold.
    cold_dead: tuple[int, float, float]
    #: bool per window: the trailing stub the profiler's last step() opened (at most one,
    #: the last window; see the module doc)
    stub: np.ndarray

    @property
    def warm(self) -> np.ndarray:
        """The warm steps: neither cold nor the stub."""
        return ~self.cold & ~self.stub

    @property
    def judged(self) -> np.ndarray:
        """The windows a span's verdict and figures speak for: the warm ones; where every
        one ran cold, every step but the stub; all of them where none is left."""
        for mask in (self.warm, ~self.stub):
            if mask.any():
                return mask
        return np.ones(self.cold.shape[0], dtype=bool)


@computed
def step_walls(analysis: SpanAnalysis) -> StepWalls:
    # The windows' bounds, not the windows: the windows' verdict reads which step is cold.
    lo, hi = (np.asarray(b, dtype=np.float64) for b in analysis.bounds)
    art = covered(profiler_artefacts(analysis).device_gaps, lo, hi)
    wall = np.maximum(hi - lo - art, 0.0)
    n = wall.shape[0]
    cold = np.zeros(n, dtype=bool)
    stub = np.zeros(n, dtype=bool)
    k = trailing_stub(analysis)
    if k >= 0:
        stub[k] = True
    # The steps the first is measured against: the later ones but the stub (a 27 µs stub
    # would make any real step "1,000× the median").
    later = wall[1:][~stub[1:]]
    rest = float(np.median(later)) if later.size else float("nan")
    cold_wall, dead = False, (-1, 0.0, 0.0)
    if len(analysis.host_steps) and later.size and not stub[0]:
        cold_wall = bool(wall[0] >= COLD_RATIO * rest and wall[0] - rest >= COLD_MIN_EXCESS_US)
        dead = cold_dead_window(analysis)  # a stub holds no label: it has no dead window
        cold[0] = cold_wall or dead[0] >= 0
    return StepWalls(wall=wall, artefact_us=art, cold=cold, rest_median=rest,
                     cold_wall=cold_wall, cold_dead=dead, stub=stub)


@computed
def trailing_stub(analysis: SpanAnalysis) -> int:
    """The window of the stub step the profiler's last ``step()`` opened, or -1.

    The last of two or more ``ProfilerStep#`` steps (inferred iterations are no
    ``step()``'s) is a stub when nothing of the user's program runs in its host window:
    no op starts in it on any thread, nor a ``record_function`` label other than a
    ``DataLoader`` call (the loop's last ``next()`` may run there), and it launches no
    device work. Reads the host steps, ops and launches only, never the windows (whose
    verdicts read which step is cold).
    """
    hs = analysis.host_steps
    n = len(hs)
    if n < 2 or hs.inferred:
        return -1
    m = analysis.model
    k = n - 1
    if analysis.activity_step.size and bool(np.any(analysis.activity_step == k)):
        return -1
    labels = m.rows_of({Kind.USER_ANNOTATION})
    labels = sorted_sets.setdiff1d(
        labels, sorted_sets.union1d(analysis.step_rows, analysis.input_rows))
    lo, hi = float(hs.host_start[k]), float(hs.host_end[k])
    for rows in (analysis.op_rows, labels):
        t = m.start[rows]
        if bool(np.any((t >= lo) & (t < hi))):
            return -1
    return k


def stub_note(analysis: SpanAnalysis) -> str | None:
    """The span's note on its trailing stub, in words; None without one."""
    k = trailing_stub(analysis)
    if k < 0:
        return None
    number = int(analysis.host_steps.numbers[k])
    wall = float(analysis.host_steps.host_end[k] - analysis.host_steps.host_start[k])
    return (f"step {number} ({wall:.0f} µs) is the stub the profiler's last step() opened "
            "before it stopped: no op, no record_function and no device work run in it, so "
            "it is flagged 'artefact', is neither warm nor cold, and no verdict or figure "
            "reads it")


def cold_dead_window(analysis: SpanAnalysis, dead_ratio: float = COLD_DEAD_RATIO,
                     min_dead_us: float = COLD_MIN_DEAD_US) -> tuple[int, float, float]:
    """(label row, its dead µs, the label's warm median µs) of the first step's label whose
    dead window is cold and exceeds its warm median the most; the row is -1 when none is."""
    m = analysis.model
    dw = dead_windows(analysis)
    best = (-1, 0.0, 0.0)
    timed = ~np.isnan(dw.dead_us)
    first = np.flatnonzero((dw.window == 0) & timed)
    if not first.size:
        return best
    names = m.name[dw.annotation]
    # Each label name's median over the warm steps, for the first step's names at once (a
    # mask over every label per first-step label was quadratic in the labels).
    warm = np.flatnonzero((dw.window > 0) & timed & np.isin(names, names[first]))
    medians = _medians_by(names[warm], dw.dead_us[warm])
    for i in first.tolist():
        med = medians.get(int(names[i]))
        if med is None:
            continue
        d = float(dw.dead_us[i])
        if d >= min_dead_us and d >= dead_ratio * max(med, 1e-3) and \
                d - med > best[1] - best[2]:
            best = (int(dw.annotation[i]), d, med)
    return best


def _medians_by(key: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """``float(np.median(values[key == k]))`` for every ``k`` in ``key``, by one sort: the
    middle value, or the two middle ones' mean (``(a + b) / 2``, as ``np.median``)."""
    if not key.size:
        return {}
    order = np.lexsort((values, key))
    k, v = key[order], values[order]
    cut = np.flatnonzero(np.r_[True, k[1:] != k[:-1], True])
    lo, n = cut[:-1], np.diff(cut)
    a = v[lo + (n - 1) // 2]
    b = v[lo + n // 2]
    med = np.where(n % 2 == 1, a, (a + b) / 2)
    return dict(zip(k[lo].tolist(), med.tolist(), strict=True))


@dataclass(frozen=True)
class DeadWindows:
    """For each record_function label: the time before its first op."""

    annotation: np.ndarray  # user annotation rows (not steps, not DataLoader)
    first_op: np.ndarray  # first op row dispatched inside it, -1 when none
    dead_us: np.ndarray  # µs from the label's start to that op (NaN when none)
    artefact_us: np.ndarray  # profiler time inside the dead window (already removed)
    window: np.ndarray  # step window index, -1 outside steps

    def __len__(self) -> int:
        return int(self.annotation.shape[0])


@computed
def dead_windows(analysis: SpanAnalysis) -> DeadWindows:
    m = analysis.model
    ann = m.rows_of({Kind.USER_ANNOTATION})
    ann = m.without(ann, analysis.step_rows, analysis.input_rows)  # a mask, not two sorts
    ops = analysis.op_rows
    first = np.full(ann.shape[0], -1, dtype=np.int64)
    for lane in unique(m.lane[ann]).tolist():
        sel = np.flatnonzero(m.lane[ann] == lane)
        lane_ops = ops[m.lane[ops] == lane]
        if not lane_ops.size:
            continue
        rows = ann[sel]
        # The first op starting at or after the label's start, if still inside it.
        j = np.searchsorted(m.start[lane_ops], m.start[rows], side="left")
        cand = lane_ops[np.minimum(j, lane_ops.size - 1)]
        ok = (j < lane_ops.size) & (m.start[cand] < m.end[rows])
        first[sel[ok]] = cand[ok]
    has = first >= 0
    dead = np.full(ann.shape[0], np.nan)
    art_us = np.zeros(ann.shape[0])
    if has.any():
        lo = m.start[ann[has]]
        hi = m.start[first[has]]
        art_us[has] = covered(profiler_artefacts(analysis).host, lo, hi)
        dead[has] = np.maximum(hi - lo - art_us[has], 0.0)
    return DeadWindows(annotation=ann, first_op=first, dead_us=dead, artefact_us=art_us,
                       window=window_of_rows(analysis, ann))
