"""Launch backlog drain: a device that looks busy only because it runs on work queued earlier.

What it detects
    Warm steps in which the device runs on work launched before the step (in
    earlier steps, or before the record window) while the queue of
    launched-but-not-started work shrinks, and the host takes longer to issue a
    step than the device needs to run it: the step's own device work is at most
    80 % of the host's time for it (without its waits in syncs and collectives,
    which drain the queue for the device's or the other ranks' sake), by at least
    10 µs, and the queued device time shrinks
    by at least half the difference (``views.backlog``; the queue is HTA's queue
    length, counted over the device's streams). The message gives the host's
    issue period, the device work per step, the queue at both ends and the
    launch → start delay as it falls.

Why it matters
    A device that drains a backlog is 100 % busy in the profile, so the steps
    read as compute-bound, but the queue empties at the rate the host falls
    behind, and from then on the device waits for every launch: in steady state
    the host is the limit. Two attention micro-benchmarks on an H100 issued a
    step every 119 µs and 184 µs for 60 µs and 29 µs of device work, and were
    read as 93–98 % busy while running kernels launched 0.45–2 ms earlier.

How to fix
    Cut the host's time per step: CUDA graphs (``torch.cuda.graphs``,
    ``torch.compile(mode="reduce-overhead")``), fewer and larger kernels
    (``torch.compile``, fused ops, a larger batch), less Python per step. Profile
    past the transient (``schedule(wait=1, warmup=5, active=…)``, more active
    steps) to see the steady state directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.backlog import LaunchBacklog, launch_backlog
from tb_diagnostics.rules._util import (
    busy_share,
    evidence_rows,
    fmt_count,
    fmt_pct,
    fmt_us,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Warm steps draining a backlog needed for a finding.
    min_steps: int = 1


def backlog_reason(backlog: LaunchBacklog, k: int) -> str | None:
    """``the host issues a step every 119 µs for 60 µs of device work; …`` for a
    host-limited step ``k`` (None for any other): the verdict's reason, in words."""
    if not backlog.host_limited[k]:
        return None
    return (f"the host issues a step every {fmt_us(backlog.host_period_us[k])} for "
            f"{fmt_us(backlog.device_work_us[k])} of device work; the device ran on a "
            f"backlog that shrank by {fmt_us(-backlog.change_us[k])} "
            f"({fmt_us(backlog.backlog_start_us[k])} → {fmt_us(backlog.backlog_end_us[k])} "
            "of queued device time)")


def _delay_evidence(analysis: SpanAnalysis, windows: np.ndarray) -> list:
    """The launch with the longest launch → start delay in ``windows``, and its activity."""
    m = analysis.model
    acts = m.device_activity_rows
    launcher = m.launcher[acts]
    sel = np.isin(analysis.activity_step, windows) & (launcher >= 0)
    if not sel.any():
        return []
    delay = m.start[acts[sel]] - m.end[launcher[sel]]
    k = int(np.argmax(delay))
    act, call = int(acts[sel][k]), int(launcher[sel][k])
    return (evidence_rows(analysis, [call], "launched here")
            + evidence_rows(analysis, [act], f"starts {fmt_us(delay[k])} later, behind "
                            "the queue"))


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only or len(analysis.host_steps) < 2:
        return []
    bl = launch_backlog(analysis)
    warm = warm_steps(analysis)
    idx = np.flatnonzero(bl.host_limited & warm.mask)
    if idx.size < th.min_steps:
        return []
    windows = analysis.windows
    steps = step_numbers(analysis, idx)
    first, last = int(idx[0]), int(idx[-1])
    c = windows.columns
    busy = float(np.median(busy_share(c.device_busy_us[idx], c.wall_us[idx])))
    q0, q1 = bl.launch_queue_us[first], bl.launch_queue_us[last]
    if np.isnan(q0) or np.isnan(q1):
        delays = ""
    elif first == last:
        delays = f"; launch → start {fmt_us(q0)}"
    else:
        delays = (f"; launch → start {fmt_us(q0)} in step {windows[first].step}, "
                  f"{fmt_us(q1)} in step {windows[last].step}")
    medians = " (medians)" if idx.size > 1 else ""
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"In {steps_text(steps)} the host issues a step every "
                 f"{fmt_us(np.median(bl.host_period_us[idx]))} for "
                 f"{fmt_us(np.median(bl.device_work_us[idx]))} of device work{medians}, yet "
                 f"the device is {fmt_pct(busy)} busy: it runs on a backlog launched earlier "
                 f"({fmt_count(bl.backlog_start[first])} activities and "
                 f"{fmt_us(bl.backlog_start_us[first])} of device time queued at the start, "
                 f"{fmt_count(bl.backlog_end[last])} and {fmt_us(bl.backlog_end_us[last])} "
                 f"at the end{delays}), which shrinks by "
                 f"{fmt_us(-np.median(bl.change_us[idx]))} a step. Once it is empty the device "
                 "waits for the host: in steady state the host is the limit, not the "
                 "device."),
        steps=steps, evidence=_delay_evidence(analysis, idx), savings_us=None,
        confirm=("profile more steps after a longer warm-up: the launch → start delay "
                 "keeps falling until the device idles between launches"),
        subject=None)]


RULE = Rule(id="launch-backlog-drain", title="Device draining a launch backlog",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving=("the steady-state step is the host's issue period; the launch and "
                       "graphs projections replay cheaper host launches"))
