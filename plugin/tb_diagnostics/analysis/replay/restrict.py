"""A change applied to some windows only: the warm steps a saving speaks for.

A cold step pays one-time costs (``views.warmth``) and the profiler's trailing stub holds
no work: no saving is read off them (``views.whatif.warm_windows``). The change must not
touch them either. Replayed over a cold first step, a fix that removes a long wait there
(a cold sync, the first batch's load) starts the next step with the device still running
the cold step's work: that step then overlaps it and looks shorter by time the fix does
not save in any step of a long run (a 0.6 ms sync change "saved" 70 ms of a warm step on
the 2021 autograd-API ResNet run). So outside the windows the change asks for, the host
keeps its time, the syncs wait, and the device activities run as recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, holds, intersect, union_sorted
from tb_diagnostics.analysis.replay.engine import Change
from tb_diagnostics.analysis.span import SpanAnalysis


def _host_ranges(analysis: SpanAnalysis, keep: np.ndarray) -> Intervals:
    """The host time of the kept windows: each from its host start to the next window's
    (the last one's to the end of time), merged."""
    hs = analysis.host_steps
    start = np.asarray(hs.host_start, dtype=float)
    nxt = np.concatenate([start[1:], [np.inf]])
    return union_sorted(start[keep], nxt[keep])


def within_windows(analysis: SpanAnalysis, change: Change,
                   windows: Sequence[int] | np.ndarray) -> Change:
    """``change`` acting only inside ``windows`` (all of them: the change itself)."""
    n = len(analysis.windows)
    if not len(analysis.host_steps) or len(windows) >= n or not len(windows):
        return change
    keep = np.zeros(n, dtype=bool)
    keep[windows] = True
    ranges = _host_ranges(analysis, keep)
    removed = {lane: intersect(iv, ranges) for lane, iv in change.removed_host.items()}
    m = analysis.model
    rows = np.fromiter(change.no_wait, dtype=np.int64, count=len(change.no_wait))
    no_wait = frozenset(rows[holds(ranges, m.start[rows])].tolist())
    step = analysis.activity_step
    kept_act = (step >= 0) & keep[np.maximum(step, 0)]
    scale = change.device_scale
    if scale is not None:
        scale = np.where(kept_act, scale, 1.0)
    gap = change.stream_gap
    if gap is not None:
        gap = np.where(kept_act, gap, np.nan)
    return Change(removed_host=removed, no_wait=no_wait, device_scale=scale, stream_gap=gap)


__all__ = ["within_windows"]
