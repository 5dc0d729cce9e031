"""Profiler buffer request: CUPTI allocating its event buffer, and the device gap it opens.

What it detects
    ``Activity Buffer Request`` events (a CUPTI overhead activity) and the device
    idle gaps they overlap. The gaps are labelled as profiler time and excluded
    from every other rule's figures (``gpu-idle-gap``, ``cold-start-step``,
    ``launch-delay``…).

Why it matters
    It is not your code: the profiler stops to allocate a buffer for the events
    it records, which inflates the launch that triggered it by orders of
    magnitude (kineto #1020) and leaves the device waiting. The Hugging Face
    profiling guide traces the ~2.5 ms CPU↔GPU offset of its first step to it.
    Read as a real gap, it sends you optimising something that does not exist.

How to fix
    Nothing to fix in the model. Keep it out of the steps you read: give the
    schedule a warm-up so buffers are allocated before the active window,
    ``torch.profiler.schedule(wait=1, warmup=1, active=5)``, and read warm steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import evidence_rows, fmt_us, step_numbers, steps_text
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Report requests at least this long (µs); 0 reports every one.
    min_request_us: float = 0.0


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    art = profiler_artefacts(analysis)
    rows = art.buffer_requests[m.dur[art.buffer_requests] >= th.min_request_us]
    if not rows.size:
        return []
    steps = step_numbers(analysis, window_of_rows(analysis, rows))
    gaps = art.buffer_gaps
    ev = evidence_rows(analysis, rows[:6], "profiler: CUPTI allocating an activity buffer")
    # The device activity each gap delayed, so the timeline can show the gap.
    acts = m.device_activity_rows
    if len(gaps):
        j = np.searchsorted(m.start[acts], gaps.end, side="left")
        after = acts[np.minimum(j, acts.size - 1)][j < acts.size]
        ev += evidence_rows(analysis, after[:4], "first device activity after the gap",
                            limit=4)
    where = steps_text(steps) if any(s is not None for s in steps) else "the span"
    gap_text = (f"; the device sat idle {fmt_us(gaps.total)} in {len(gaps)} gap(s) "
                "overlapping them" if len(gaps) else "")
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{rows.size} Activity Buffer Request event(s), {fmt_us(m.dur[rows].sum())} "
                 f"in all, in {where}{gap_text}. This is the profiler's own time, excluded "
                 "from the other findings."),
        steps=steps, evidence=ev, savings_us=None,
        confirm=("profile more active steps (schedule(active=20)): a buffer request "
                 "appears once, near the start, and its gap does not recur"),
        artefact=True)]


RULE = Rule(id="profiler-buffer-request", title="Profiler buffer request (profiler artefact)",
            severity="info", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="it is the profiler's time, not your program's (see the profiler projection)")
