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
from tb_diagnostics.analysis.steps import StepWindow, device_partition
from tb_diagnostics.analysis.verdict import (
    COMPILING_MIN_US,
    compile_bound,
    host_limited_verdict,
    idle_split,
    main_idle_cause,
    verdict_of,
)
from tb_diagnostics.analysis.window_totals import per_window_totals
from tb_diagnostics.trace.categories import Kind

if TYPE_CHECKING:  # span.py imports this module: the type only, at run time nothing
    from tb_diagnostics.analysis.span import SpanAnalysis


class HostLimited(NamedTuple):
    """Per window, as lists: host-limited (a warm step on a draining backlog), the host's
    DataLoader time and its issue time (µs)."""

    host: list[bool]
    input_us: list[float]
    issue_us: list[float]


def window_bounds(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """The device-side ``[start, end)`` of every window."""
    m = analysis.model
    hs = analysis.host_steps
    if not len(hs):
        rows = np.flatnonzero(m.kind != Kind.TRACE)
        if not rows.size:
            return np.zeros(1), np.zeros(1)
        return np.asarray([m.start[rows].min()]), np.asarray([m.end[rows].max()])
    last_dev = np.full(len(hs), np.nan)
    if not analysis.cpu_only:
        steps = analysis.activity_step
        ok = steps >= 0
        ends = m.end[m.device_activity_rows][ok]
        np.fmax.at(last_dev, steps[ok], ends)
    return device_partition(hs.host_start, hs.host_end, last_dev)


def build_windows(analysis: SpanAnalysis) -> list[StepWindow]:
    """One :class:`StepWindow` per window of ``analysis.bounds``: its device busy and
    compute time, its idle time split by cause, its totals, and its verdict."""
    hs = analysis.host_steps
    lo, hi = analysis.bounds
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
    limited = host_limited(analysis)
    stats = per_window_totals(analysis, lo, hi)
    # Python lists, not numpy scalars, in the per-window loop: a trace of a million
    # steps builds a million windows, and a float() of a numpy scalar costs 10× more.
    n = lo.shape[0]
    has_steps = len(hs) > 0
    idle_cols = {c: np.maximum(v, 0.0).tolist() for c, v in idle.items()}
    busy_l, wall_l, lo_l, hi_l = busy.tolist(), wall.tolist(), lo.tolist(), hi.tolist()
    compute_l = compute.tolist()
    # Compiling, whether the device idled meanwhile or ran earlier work.
    compiling_l = (covered(analysis.compile_intervals, lo, hi) >= COMPILING_MIN_US).tolist() \
        if len(analysis.compile_intervals) else [False] * n
    # The device ran only collectives: busy minus compute (compute lies inside busy).
    alone_l = np.maximum(busy - compute, 0.0).tolist()
    step_l = hs.numbers.tolist() if has_steps else [None] * n
    row_l = hs.rows.tolist() if has_steps and not hs.inferred else [-1] * n
    host_lo_l = hs.host_start.tolist() if has_steps else lo_l
    host_hi_l = hs.host_end.tolist() if has_steps else hi_l
    cpu_l = stats["self_cpu"].tolist()
    dev_l = [None] * n if analysis.cpu_only else stats["self_device"].tolist()
    ops_l = stats["ops"].astype(np.int64).tolist()
    kernels_l = stats["kernels"].astype(np.int64).tolist()
    th = analysis.thresholds
    from tb_diagnostics.analysis.views.warmth import trailing_stub  # views import span

    # The stub the profiler's last step() opened: a profiler artefact, not a step.
    stub = trailing_stub(analysis)
    out = []
    for k in range(n):
        idle_k = {c: col[k] for c, col in idle_cols.items()}
        busy_k, compute_k, alone_k = busy_l[k], compute_l[k], alone_l[k]
        # The profiler's own time and one-time costs are labelled, and left out of the
        # verdict: a step that compiles for 1.7 s is judged on the rest.
        judged = wall_l[k] - idle_k["profiler"] - idle_k["compile"] - idle_k["module_load"]
        frac = compute_k / judged if judged > 0 else 0.0
        cause = main_idle_cause(idle_k, alone_k)
        verdict, verdict_by = verdict_of(frac, cause, th), None
        if compile_bound(idle_k["compile"], wall_l[k]):
            # Mostly compiling: the compile bounds the step, not the work around it.
            verdict, verdict_by, cause = "compile-bound", "compilation", "compile"
        elif limited is not None and limited.host[k]:
            verdict = host_limited_verdict(limited.input_us[k], limited.issue_us[k])
            verdict_by = "launch-backlog"
        flags = ["inferred"] if hs.inferred else []
        if compiling_l[k]:
            flags.append("compiling")
        if k == stub:
            flags.append("artefact")
        out.append(StepWindow(
            index=k,
            step=step_l[k],
            # An inferred step has no step event (its row only starts the iteration).
            row=row_l[k],
            host_start=host_lo_l[k],
            host_end=host_hi_l[k],
            start=lo_l[k],
            end=hi_l[k],
            device_busy_us=busy_k,
            compute_busy_us=compute_k,
            exposed_collective_us=alone_k,
            idle=idle_k,
            verdict=verdict,
            main_idle_cause=cause,
            self_cpu_us=cpu_l[k],
            self_device_us=dev_l[k],
            ops=ops_l[k],
            kernels=kernels_l[k],
            flags=flags,
            verdict_by=verdict_by,
        ))
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
    return HostLimited(host.tolist(), inputs.tolist(), bl.host_issue_us.tolist())
