"""The host's own work: the part of the "launch" idle cause that dispatches nothing.

The verdict's ``launch`` cause is every device-idle moment some host thread runs the
user's program (``SpanAnalysis.launch_intervals``). Two different things hide in it:

- **dispatch and launch work**: the host inside a torch op (``cpu_op``) or a runtime or
  driver call, or in the short Python between two consecutive such calls. Per-op dispatch
  costs µs to tens of µs (``../shared/docs/anchors.md``: a launch takes 5–20 µs on the
  CPU; HTA calls a kernel-kernel gap under 30 µs launch overhead); CUDA graphs and
  ``torch.compile`` remove it.
- **the host's own work**: a stretch of one thread that feeds the device, at least
  :data:`HOST_WORK_MIN_US` long, in which no torch op and no runtime call starts (video
  decoding, numpy preprocessing, tokenising, Python bookkeeping). Graphs and compile
  cannot remove it: no device work is issued there to capture. Only moving it off that
  thread (DataLoader workers, preprocessing ahead of time or on the device) does.

Per window, :attr:`HostWork.idle_us` is the part of ``idle["launch"]`` that is the
host's own work: the stretches' time on their thread that a recorded Python frame or
``record_function`` label covers (the launch cause's own host rows), where no feeding
thread dispatches, and that no earlier cause (busy, profiler, compile, module load,
input, sync, comm) takes (``verdict.idle_split``'s order). Every figure is a column over
all windows: no per-window Python loop (a span can hold 10⁶ steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.intervals import (
    Intervals,
    covered,
    intersect,
    subtract,
    union,
    union_of_rows,
)
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import row_indices

#: A thread that starts no torch op and no runtime call for at least this long (µs) runs
#: its own code, not dispatch: per-op dispatch overhead is µs to tens of µs (a launch
#: 5–20 µs on the CPU, HTA's launch-overhead gap < 30 µs; ``../shared/docs/anchors.md``),
#: so 1 ms between two calls is 30–200 ops' worth of dispatch that did not happen.
HOST_WORK_MIN_US = 1000.0

#: The row that names a stretch covers at least this share of it ("covers it", with room
#: for the µs of the caller a stretch starts or ends in): the innermost such frame.
HOLD_SHARE = 0.9
#: Host rows that may name a stretch: Python frames and ``record_function`` labels.
_LABEL_KINDS = (Kind.PYTHON, Kind.USER_ANNOTATION)
#: Calls that dispatch or launch: a stretch is the time between them.
_DISPATCH_KINDS = frozenset({Kind.RUNTIME, Kind.DRIVER})


@dataclass(frozen=True)
class HostWork:
    """The host's own work of a span, and its part of each window's idle time."""

    #: When a feeding thread runs its own code (no device-idle condition; per lane).
    by_lane: dict[int, Intervals]
    #: ``by_lane`` without the time an earlier idle cause names (the DataLoader's, a
    #: sync's, a collective's, compiling, the profiler's): what moving the host's own
    #: code off its thread removes (the ``host-work`` what-if card).
    movable_by_lane: dict[int, Intervals]
    #: The union of ``by_lane`` without what any earlier idle cause takes: the time the
    #: verdict's launch cause holds that is the host's own work.
    idle_intervals: Intervals
    #: Per window: µs of ``idle["launch"]`` that is the host's own work.
    idle_us: np.ndarray
    #: Per window, its longest stretch (by the idle µs it holds; 0 and -1 where none):
    #: that idle µs, its ``[start, end)`` inside the window, its lane, and the innermost
    #: Python frame or ``record_function`` row holding most of it (-1: none recorded).
    longest_us: np.ndarray
    longest_start: np.ndarray
    longest_end: np.ndarray
    longest_lane: np.ndarray
    longest_frame: np.ndarray


def _feeding_lanes(analysis: SpanAnalysis, dispatch: np.ndarray) -> np.ndarray:
    """Lanes whose host work the device waits for: the threads that launch device work;
    on a CPU-only trace (the CPU is the device) the threads that call ops. A thread that
    never dispatches (a progress bar's monitor waiting all span) feeds nothing."""
    m = analysis.model
    if analysis.cpu_only:
        return unique(m.lane[analysis.op_rows])
    launcher = m.launcher[m.device_activity_rows]
    launcher = launcher[launcher >= 0]
    return unique(m.lane[launcher]) if launcher.size else unique(m.lane[dispatch])


def _named(analysis: SpanAnalysis) -> Intervals:
    """The host time an earlier idle layer than ``launch`` names (``step_windows``'
    order, the device's busy time aside): the profiler's, compiling, module loads, the
    DataLoader, syncs, collectives."""
    parts = [analysis.profiler_intervals,
             analysis.compile_intervals, analysis.module_load_intervals,
             analysis.input_intervals, analysis.sync_intervals, analysis.comm_intervals]
    parts = [p for p in parts if len(p)]
    if not parts:
        return Intervals.empty()
    return union(np.concatenate([p.start for p in parts]),
                 np.concatenate([p.end for p in parts]))


@computed
def host_work(analysis: SpanAnalysis) -> HostWork:
    """The host's own work of ``analysis``, per lane and per window (see the module)."""
    m = analysis.model
    lo, hi = analysis.bounds
    # The rows of either, as a mask (a union1d sorts both: a tenth of the view on 10⁶ steps).
    is_dispatch = np.zeros(len(m), dtype=bool)
    is_dispatch[analysis.op_rows] = True
    is_dispatch[m.rows_of(_DISPATCH_KINDS)] = True
    dispatch = row_indices(is_dispatch)
    del is_dispatch
    program = analysis.launch_rows()
    lanes = _feeding_lanes(analysis, dispatch)
    program = program[np.isin(m.lane[program], lanes)]
    if not program.size:
        return _empty(lo.shape[0])
    # A stretch is a gap of every feeding thread's calls together: while the autograd
    # thread dispatches the backward, the main thread waiting in ``backward()`` holds
    # the device up no more than that dispatch does.
    d = union_of_rows(m.start, m.end, dispatch[np.isin(m.lane[dispatch], lanes)])
    p_lo, p_hi = float(m.start[program].min()), float(m.end[program].max())
    g_lo = np.concatenate([[p_lo], d.end])
    g_hi = np.concatenate([d.start, [p_hi]])
    long = (g_hi - g_lo) >= HOST_WORK_MIN_US
    if not long.any():
        return _empty(lo.shape[0])
    stretches = Intervals(g_lo[long], g_hi[long])
    by_lane: dict[int, Intervals] = {}
    for lane in unique(m.lane[program]).tolist():
        # The lane's recorded program inside the stretches: Python frames, labels.
        own = intersect(union_of_rows(m.start, m.end, program[m.lane[program] == lane]),
                        stretches)
        if len(own):
            by_lane[int(lane)] = own
    if not by_lane:
        return _empty(lo.shape[0])
    work = union(np.concatenate([iv.start for iv in by_lane.values()]),
                 np.concatenate([iv.end for iv in by_lane.values()]))
    named = _named(analysis)
    idle_iv = subtract(subtract(work, analysis.busy_intervals), named)
    longest = _longest(analysis, idle_iv, by_lane, stretches.start, stretches.end, lo, hi)
    movable = {lane: own for lane, iv in by_lane.items() if len(own := subtract(iv, named))}
    return HostWork(by_lane=by_lane, movable_by_lane=movable, idle_intervals=idle_iv,
                    idle_us=covered(idle_iv, lo, hi), **longest)


def _empty(n: int) -> HostWork:
    z, none = np.zeros(n), np.full(n, -1, dtype=np.int64)
    return HostWork(by_lane={}, movable_by_lane={}, idle_intervals=Intervals.empty(), idle_us=z,
                    longest_us=z, longest_start=z, longest_end=z, longest_lane=none,
                    longest_frame=none)


def _longest(analysis: SpanAnalysis, idle_iv: Intervals, by_lane: dict[int, Intervals],
             s_lo: np.ndarray, s_hi: np.ndarray, lo: np.ndarray,
             hi: np.ndarray) -> dict[str, np.ndarray]:
    """Per window, the stretch piece holding the most idle host-work µs, its thread (the
    one whose program covers most of it) and its frame.

    Each stretch is cut at the window bounds it crosses (``np.repeat`` over the windows
    it spans: linear in the pieces), then the pieces are sorted by window and µs once."""
    n = lo.shape[0]
    first = np.searchsorted(hi, s_lo, side="right")
    last = np.searchsorted(lo, s_hi, side="left") - 1
    count = np.maximum(last - first + 1, 0)
    which = np.repeat(np.arange(count.shape[0]), count)
    offset = np.arange(which.shape[0]) - np.repeat(np.cumsum(count) - count, count)
    win = first[which] + offset
    a = np.maximum(s_lo[which], lo[win])
    b = np.minimum(s_hi[which], hi[win])
    us = covered(idle_iv, a, b)
    out = {"longest_us": np.zeros(n), "longest_start": np.zeros(n), "longest_end": np.zeros(n),
           "longest_lane": np.full(n, -1, dtype=np.int64),
           "longest_frame": np.full(n, -1, dtype=np.int64)}
    has = us > 0
    if not has.any():
        return out
    win, a, b, us = win[has], a[has], b[has], us[has]
    order = np.lexsort((us, win))
    top = order[np.append(win[order][1:] != win[order][:-1], True)]  # each window's max
    k, a, b = win[top], a[top], b[top]
    lanes = np.asarray(list(by_lane), dtype=np.int64)
    cover = np.stack([covered(by_lane[x], a, b) for x in lanes.tolist()])
    lane = lanes[np.argmax(cover, axis=0)]
    out["longest_us"][k] = us[top]
    out["longest_start"][k] = a
    out["longest_end"][k] = b
    out["longest_lane"][k] = lane
    out["longest_frame"][k] = _holding_frame(analysis, lane, a, b)
    return out


def _holding_frame(analysis: SpanAnalysis, lane: np.ndarray, a: np.ndarray,
                   b: np.ndarray) -> np.ndarray:
    """Per stretch ``[a, b)`` on ``lane``: the innermost Python frame or record_function
    row of that thread that covers :data:`HOLD_SHARE` of it (-1 where none does).

    Rows of one thread nest, so the rows covering more than half of a stretch all contain
    its midpoint: start at the innermost row there (the last to start at or before it,
    then up its parents until one contains it) and walk up until a label row covers
    enough. The walk takes as many vectorised passes as the frames are deep."""
    m = analysis.model
    mid = (a + b) / 2
    cand = np.full(a.shape[0], -1, dtype=np.int64)
    labels = m.rows_of(frozenset(_LABEL_KINDS))
    labels = m.without(labels, analysis.step_rows)
    for x in unique(lane).tolist():
        on = np.flatnonzero(lane == x)
        rows = labels[m.lane[labels] == x]
        if not rows.size:
            continue
        at = np.searchsorted(m.start[rows], mid[on], side="right") - 1
        cand[on] = np.where(at >= 0, rows[np.maximum(at, 0)], -1)
    is_label = np.zeros(len(m), dtype=bool)
    is_label[labels] = True
    end = m.end
    need = HOLD_SHARE * (b - a)
    active = cand >= 0
    while active.any():
        r = cand[active]
        holds = is_label[r] & (np.minimum(end[r], b[active]) - np.maximum(m.start[r], a[active])
                               >= need[active])
        up = np.flatnonzero(active)[~holds]
        cand[up] = m.parent[cand[up]]
        active = np.zeros_like(active)
        active[up] = cand[up] >= 0
    return cand
