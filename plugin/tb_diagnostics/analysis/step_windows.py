"""Step-window construction: the per-step verdicts of one span.

:class:`~tb_diagnostics.analysis.span.SpanAnalysis` exposes these as its ``bounds`` and
``windows`` artifacts; this module holds how they are built from the span's host steps,
device busy/compute intervals and host activity by cause: each window's device-side
bounds, its idle time split by cause, its totals, and its verdict (with the launch-backlog
override for warm steps the host limits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from tb_diagnostics.analysis.intervals import covered
from tb_diagnostics.analysis.steps import device_partition
from tb_diagnostics.analysis.verdict import (
    CAUSE_CODES,
    CAUSE_VERDICT,
    COMPILE_BOUND_SHARE,
    COMPILING_MIN_US,
    IDLE_CAUSES,
    VERDICT_BY_CODES,
    VERDICTS,
    Thresholds,
    idle_split,
)
from tb_diagnostics.analysis.window_columns import StepWindows, WindowColumns
from tb_diagnostics.analysis.window_totals import per_window_totals
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.columns import constant, one_value

if TYPE_CHECKING:  # span.py imports this module: the type only, at run time nothing
    from tb_diagnostics.analysis.span import SpanAnalysis


class HostLimited(NamedTuple):
    """Per window: host-limited (a warm step on a draining backlog), the host's
    DataLoader time and its issue time (µs)."""

    host: np.ndarray  # bool
    input_us: np.ndarray
    issue_us: np.ndarray


def window_bounds(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """The device-side ``[start, end)`` of every window."""
    m = analysis.model
    hs = analysis.host_steps
    if not len(hs):
        rows = np.flatnonzero(m.kind != Kind.TRACE)
        if not rows.size:
            return np.zeros(1), np.zeros(1)
        return np.asarray([m.start[rows].min()]), np.asarray([m.end[rows].max()])
    return device_partition(hs.host_start, hs.host_end, last_device_ends(analysis))


def last_device_ends(analysis: SpanAnalysis) -> np.ndarray:
    """Per step, the latest end of its device activities (NaN ends ignored, as ``fmax``
    does; NaN for a step with none): a reduction per window over the activities grouped
    by window (``SpanAnalysis._activities_by_window``), not ``np.fmax.at`` per activity."""
    m = analysis.model
    n = len(analysis.host_steps)
    last_dev = np.full(n, np.nan)
    if analysis.cpu_only or not n:
        return last_dev
    order, cut = analysis._activities_by_window
    # Activities of no step (-1) sort first; from cut[0] on, window after window.
    ends = m.end[m.device_activity_rows[order[cut[0]:]]]
    first = cut[:-1].astype(np.int64) - int(cut[0])
    has = np.flatnonzero(cut[1:] > cut[:-1])
    if has.size:
        # Each non-empty window's run ends where the next non-empty one begins.
        last_dev[has] = np.fmax.reduceat(ends, first[has])
    return last_dev


def build_windows(analysis: SpanAnalysis) -> StepWindows:
    """The windows of ``analysis.bounds`` as columns (:class:`.window_columns.WindowColumns`):
    each one's device busy and compute time, its idle time split by cause, its totals, and
    its verdict, decided for every window at once (no Python per window: a trace of a
    million steps has a million windows)."""
    hs = analysis.host_steps
    lo, hi = analysis.bounds
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    wall = hi - lo
    busy_iv = analysis.busy_intervals
    busy = covered(busy_iv, lo, hi)
    # Collectives are communication, not compute: the verdict reads compute only.
    compute_iv = analysis.compute_intervals
    compute = busy if compute_iv is busy_iv else np.minimum(covered(compute_iv, lo, hi), busy)
    # Where host activities nest, the first of profiler, compile, module load, input,
    # sync, comm, launch takes the idle time (verdict.idle_split).
    idle = idle_split(busy_iv, busy, lo, hi, {
        "profiler": analysis.profiler_intervals, "compile": analysis.compile_intervals,
        "module_load": analysis.module_load_intervals, "input": analysis.input_intervals,
        "sync": analysis.sync_intervals, "comm": analysis.comm_intervals,
        "launch": analysis.launch_intervals})
    idle = {c: np.maximum(v, 0.0) for c, v in idle.items()}
    limited = host_limited(analysis)
    stats = per_window_totals(analysis, lo, hi)
    n = lo.shape[0]
    has_steps = len(hs) > 0
    # Compiling, whether the device idled meanwhile or ran earlier work.
    compiling = (covered(analysis.compile_intervals, lo, hi) >= COMPILING_MIN_US) \
        if len(analysis.compile_intervals) else np.zeros(n, dtype=bool)
    # The device ran only collectives: busy minus compute (compute lies inside busy).
    alone = np.maximum(busy - compute, 0.0)
    # The profiler's own time and one-time costs are labelled, and left out of the
    # verdict: a step that compiles for 1.7 s is judged on the rest.
    judged = wall - idle["profiler"] - idle["compile"] - idle["module_load"]
    frac = np.divide(compute, judged, out=np.zeros(n), where=judged > 0)
    # The three labels as codes into their tables (verdict.VERDICTS, CAUSE_CODES,
    # VERDICT_BY_CODES): a byte per window, not an object pointer.
    cause = main_idle_codes(idle, alone)
    verdict = _verdict_codes(frac, cause, analysis.thresholds)
    verdict_by = np.zeros(n, dtype=np.int8)  # None
    if limited is not None:
        verdict[limited.host] = np.where(
            (limited.issue_us > 0) & (limited.input_us >= 0.5 * limited.issue_us),
            _VERDICT_CODE[CAUSE_VERDICT["input"]],
            _VERDICT_CODE[CAUSE_VERDICT["launch"]])[limited.host]
        verdict_by[limited.host] = VERDICT_BY_CODES.index("launch-backlog")
    # Mostly compiling: the compile bounds the step, not the work around it (before the
    # backlog: verdict.compile_bound wins where both hold).
    by_compile = (wall > 0) & (idle["compile"] >= COMPILE_BOUND_SHARE * wall)
    verdict[by_compile] = _VERDICT_CODE["compile-bound"]
    verdict_by[by_compile] = VERDICT_BY_CODES.index("compilation")
    cause[by_compile] = CAUSE_CODES.index("compile")
    from tb_diagnostics.analysis.views.warmth import trailing_stub  # views import span

    return StepWindows(WindowColumns(
        has_steps=has_steps,
        # The host steps' own arrays where their dtypes are these (no copy held twice).
        step=np.asarray(hs.numbers, dtype=np.int64) if has_steps
        else np.zeros(n, dtype=np.int64),
        # An inferred step has no step event (its row only starts the iteration).
        row=np.asarray(hs.rows, dtype=np.int32) if has_steps and not hs.inferred
        else constant(-1, n, np.int32),
        host_start=np.asarray(hs.host_start, dtype=np.float64) if has_steps else lo,
        host_end=np.asarray(hs.host_end, dtype=np.float64) if has_steps else hi,
        start=lo, end=hi, device_busy_us=one_value(busy), compute_busy_us=one_value(compute),
        exposed_collective_us=one_value(alone),
        idle={k: one_value(v) for k, v in idle.items()}, verdict_code=one_value(verdict),
        cause_code=one_value(cause), by_code=one_value(verdict_by),
        self_cpu_us=one_value(np.asarray(stats["self_cpu"], dtype=np.float64)),
        self_device_us=None if analysis.cpu_only
        else one_value(np.asarray(stats["self_device"], dtype=np.float64)),
        ops=one_value(stats["ops"].astype(np.int64)),
        kernels=one_value(stats["kernels"].astype(np.int64)),
        inferred=hs.inferred, compiling=np.asarray(compiling, dtype=bool),
        # The stub the profiler's last step() opened: a profiler artefact, not a step.
        stub=trailing_stub(analysis)))


#: A main idle cause's code (its place in CAUSE_CODES: IDLE_CAUSES, then None) -> its name.
_CAUSE_NAMES = np.asarray(CAUSE_CODES, dtype=object)
#: A verdict -> its code (its place in verdict.VERDICTS).
_VERDICT_CODE = {v: k for k, v in enumerate(VERDICTS)}
_VERDICT_NAMES = np.asarray(VERDICTS, dtype=object)
#: A main idle cause's code -> the code of the verdict of a step below low_busy with that
#: cause (verdict.verdict_of).
_CAUSE_VERDICTS = np.asarray([_VERDICT_CODE[CAUSE_VERDICT[c or "other"]]
                              for c in (*IDLE_CAUSES, None)], dtype=np.int8)


def main_idle_codes(idle: dict[str, np.ndarray], exposed_collective: np.ndarray,
                    ) -> np.ndarray:
    """Per window, the code of :func:`main_idle_causes` (int8: the cause's place in
    :data:`.verdict.IDLE_CAUSES`, ``len(IDLE_CAUSES)`` for None)."""
    # The per-window loop took a cause only where it was strictly above 0 and above
    # every earlier one: the first maximum, where that maximum is positive (NaN never).
    # A running maximum, cause after cause (no causes x windows table).
    best = top = None
    for i, c in enumerate(IDLE_CAUSES):
        t = idle[c] + exposed_collective if c == "comm" else idle[c]
        t = np.where(np.isnan(t), -np.inf, t)
        if top is None:
            best, top = np.zeros(t.shape[0], dtype=np.int8), t
            continue
        above = t > top
        best[above] = i
        top = np.where(above, t, top)
    assert best is not None and top is not None  # IDLE_CAUSES is not empty
    best[top <= 0.0] = len(IDLE_CAUSES)
    return best


def main_idle_causes(idle: dict[str, np.ndarray], exposed_collective: np.ndarray,
                     ) -> np.ndarray:
    """Per window, :func:`.verdict.main_idle_cause` (an object array of cause names or
    None): the largest cause, ties to the earlier of :data:`.verdict.IDLE_CAUSES`."""
    return _CAUSE_NAMES[main_idle_codes(idle, exposed_collective)]


def verdicts_of(compute_busy: np.ndarray, cause: np.ndarray, th: Thresholds) -> np.ndarray:
    """Per window, :func:`.verdict.verdict_of` (an object array of verdicts)."""
    code = np.full(cause.shape[0], len(IDLE_CAUSES), dtype=np.int64)
    for i, c in enumerate(IDLE_CAUSES):
        code[cause == c] = i
    return _verdicts_by_code(compute_busy, code, th)


def _verdicts_by_code(compute_busy: np.ndarray, code: np.ndarray, th: Thresholds,
                      ) -> np.ndarray:
    """:func:`verdicts_of` from the causes' codes (:func:`main_idle_codes`): no string
    compared per window."""
    return _VERDICT_NAMES[_verdict_codes(compute_busy, code, th)]


def _verdict_codes(compute_busy: np.ndarray, code: np.ndarray, th: Thresholds,
                   ) -> np.ndarray:
    """:func:`_verdicts_by_code` as int8 codes into :data:`.verdict.VERDICTS`."""
    # Neither below low_busy nor at compute_bound (NaN included): mixed, as verdict_of.
    out = np.full(code.shape[0], _VERDICT_CODE["mixed"], dtype=np.int8)
    low = compute_busy < th.low_busy
    out[low] = _CAUSE_VERDICTS[code[low]]
    out[compute_busy >= th.compute_bound] = _VERDICT_CODE["compute-bound"]
    return out


def host_limited(analysis: SpanAnalysis) -> HostLimited | None:
    """Per window: whether it is a warm step limited by the host on a draining backlog
    (``views.backlog``), with the host's issue time and its DataLoader part; None where
    no step can be (a CPU-only trace, fewer than two steps)."""
    from tb_diagnostics.analysis.views.backlog import launch_backlog
    from tb_diagnostics.analysis.views.warmth import step_walls

    if analysis.cpu_only or len(analysis.host_steps) < 2:
        return None
    bl = launch_backlog(analysis)
    # The cold step pays one-time costs (views.warmth): never judged by its backlog; nor
    # is the profiler's trailing stub, which runs nothing.
    host = bl.host_limited & step_walls(analysis).warm
    if not host.any():
        return None
    inputs = covered(analysis.input_intervals, bl.host_start, bl.host_end)
    return HostLimited(np.asarray(host, dtype=bool), np.asarray(inputs, dtype=np.float64),
                       np.asarray(bl.host_issue_us, dtype=np.float64))
