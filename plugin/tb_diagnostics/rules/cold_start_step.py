"""Cold start: the first profiled step is much longer than the others.

What it detects
    A first step whose wall time (without the profiler's own device gaps) is at
    least ``ratio`` × the median of the later steps (the profiler's empty
    trailing stub, opened by its last ``prof.step()``, is none of them) and
    ``min_excess_us`` longer; the ``record_function`` label in it with the longest dead window
    before its first ``aten::`` op is named as where the time went. Also fires
    when only the dead window is cold: a label of the first step waiting
    ``dead_ratio`` × longer for its first op than the same label in later steps.

Why it matters
    One-time costs — CUDA context and cuBLAS/cuDNN handle creation, workspace
    allocation, kernel selection and autotuning, lazy module loading, the
    caching allocator growing — land in the first step. Averaged in, they
    inflate the mean step time and can flip a verdict (torch-tb-profiler
    averages all steps; HTA only drops the last). The Hugging Face guide finds a
    228 µs dead window in the cold step against ≈5 µs when warm.

How to fix
    Warm up before the steps you read, either by running a few iterations
    before profiling, or with the schedule:
    ``torch.profiler.schedule(wait=1, warmup=2, active=5)``. Report warm-state
    figures (this finding gives the warm mean without the cold step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.warmth import (
    COLD_DEAD_RATIO,
    COLD_MIN_DEAD_US,
    COLD_MIN_EXCESS_US,
    COLD_RATIO,
    dead_windows,
    step_walls,
)
from tb_diagnostics.rules._util import evidence_rows, fmt_us, steps_text
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    """The warmth view's (``analysis.views.warmth``): which step is cold is decided there,
    once, so this finding, the steps' ``cold`` field and every warm-step figure agree."""

    #: First step at least this many times the median of the rest...
    ratio: float = COLD_RATIO
    #: ...and at least this much longer (µs).
    min_excess_us: float = COLD_MIN_EXCESS_US
    #: A first-step dead window this many times the label's warm median is cold...
    dead_ratio: float = COLD_DEAD_RATIO
    #: ...when it is at least this long (µs; the guide's cold window was 228 µs).
    min_dead_us: float = COLD_MIN_DEAD_US


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    windows = analysis.windows
    if len(windows) < 2 or not len(analysis.host_steps):
        return []
    sw = step_walls(analysis)
    if not sw.cold[0]:
        return []
    rest = sw.rest_median
    first = float(sw.wall[0])
    cold_wall = sw.cold_wall
    label, dead, warm_dead = sw.cold_dead
    m = analysis.model
    w0 = windows[0]
    # The steps it is measured against: the later ones but the profiler's empty stub.
    later = [w for w, stub in zip(windows[1:], sw.stub[1:].tolist(), strict=True) if not stub]
    parts = []
    if cold_wall:
        parts.append(f"Step {w0.step} took {fmt_us(first)}, {first / rest:.1f}× the median "
                     f"{fmt_us(rest)} of {steps_text([w.step for w in later])}")
        if sw.artefact_us[0] > 0:
            parts[-1] += f" (after removing {fmt_us(sw.artefact_us[0])} of profiler gaps)"
    if label >= 0:
        dw = dead_windows(analysis)
        i = int(np.flatnonzero(dw.annotation == label)[0])
        parts.append(f"record_function '{m.name_of(label)}' waited {fmt_us(dead)} for its "
                     f"first op ({m.name_of(int(dw.first_op[i]))}) against a warm median of "
                     f"{fmt_us(warm_dead)}")
    warm = sw.wall[sw.warm]
    parts.append(f"warm mean step {fmt_us(warm.mean())} "
                 f"(with the cold step: {fmt_us(sw.wall[~sw.stub].mean())})")
    ev = [evidence(analysis, w0.row, "the cold step")]
    if label >= 0:
        dw = dead_windows(analysis)
        i = int(np.flatnonzero(dw.annotation == label)[0])
        ev.append(evidence(analysis, label, f"dead window {fmt_us(dead)} before its first op"))
        ev += evidence_rows(analysis, [int(dw.first_op[i])], "the first op it dispatched",
                            limit=1)
    ev += evidence_rows(analysis, [w.row for w in later[:2]], "a warm step", limit=2)
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message="; ".join(parts) + ".", steps=[w0.step], evidence=ev, savings_us=None,
        confirm=("profile again with schedule(wait=1, warmup=2, active=5): if the first "
                 "active step now matches the others, it was cold-start cost"))]


RULE = Rule(id="cold-start-step", title="Cold first step", severity="warning", check=check,
            thresholds=Thresholds(), doc=__doc__,
            no_saving=("a cold step is paid once per run, and every projection leaves cold steps "
                       "out"))
