"""Profiler flush sync: the long ``cudaDeviceSynchronize`` at the end of the active window.

What it detects
    The device-wide synchronize the profiler issues when the active window ends
    to collect the device's events: the one called from ``torch/profiler`` when
    the trace has Python stacks, otherwise the device sync right after the last
    step (or, without steps, after the last op). It is labelled as a profiler
    artefact and is never reported by ``host-sync``.

Why it matters
    Its length is how far the device was behind the host when profiling stopped
    (plus the profiler's own flushing). The Hugging Face guide reads a 1.78 ms
    flush over 26 µs of device work as a ~98 % idle device: a symptom of an
    overhead-bound run, not a sync in your code. A flush during which the device
    is busy means the host ran ahead: the run was device-bound at the end.

How to fix
    Nothing to remove: the profiler needs it. Read the step verdicts for the
    cause (an overhead-bound run shows a short, idle flush; a device-bound one a
    busy flush), and do not count it as a step's sync time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.intervals import covered
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.pystack import PROFILER_FRAME, python_stack
from tb_diagnostics.rules._util import evidence_rows, fmt_pct, fmt_us
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    #: A flush at least this long (µs) is reported; a short one says nothing.
    min_sync_us: float = 500.0


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    out = []
    hs = analysis.host_steps
    for r in profiler_artefacts(analysis).flush_syncs.tolist():
        dur = float(m.dur[r])
        if dur < th.min_sync_us:
            continue
        busy = float(covered(analysis.busy_intervals, np.asarray([m.start[r]]),
                             np.asarray([m.end[r]]))[0])
        step = None
        when = ""
        if len(hs):
            k = int(np.searchsorted(hs.host_end, m.start[r], side="right")) - 1
            if k >= 0:
                step = int(hs.numbers[k])
                when = (f" {fmt_us(m.start[r] - hs.host_end[k])} after step {step} ended")
        frames = [(fr, name) for fr, name in python_stack(analysis, r)
                  if PROFILER_FRAME.search(name)]
        caller = f", called from {frames[-1][1]}" if frames else ""
        share = busy / dur if dur > 0 else 0.0
        reading = ("the device was finishing queued work for most of it: the host ran ahead "
                   "of the device when profiling stopped" if share >= 0.5 else
                   "the device was idle for most of it: profiler overhead, a symptom of an "
                   "overhead-bound run")
        ev = [evidence(analysis, r, "the profiler's flush sync")]
        ev += evidence_rows(analysis, [fr for fr, _ in frames[-1:] if fr >= 0],
                            "profiler frame that issued it", limit=1)
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title,
            subject=f"{m.name_of(r)}{' after step ' + str(step) if step is not None else ''}",
            message=(f"{m.name_of(r)} of {fmt_us(dur)}{when}{caller}: the profiler flushing "
                     f"its events. The device was busy {fmt_us(busy)} ({fmt_pct(share)}) of "
                     f"it; {reading}. Not counted as your code's sync."),
            steps=[step] if step is not None else [None], evidence=ev, savings_us=None,
            confirm=("it happens once per profiling cycle, after the last active step; with "
                     "more active steps it stays one call at the very end"),
            artefact=True))
    return out


RULE = Rule(id="profiler-flush-sync", title="Profiler flush sync (profiler artefact)",
            severity="info", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="it is the profiler's time, not your program's (see the profiler projection)")
