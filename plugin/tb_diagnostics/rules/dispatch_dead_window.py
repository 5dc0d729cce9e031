"""Dispatch dead window: a ``record_function`` label waits long before its first op.

What it detects
    For every user annotation (``record_function`` label, not the step or the
    DataLoader), the time from its start to the first op it dispatches, with
    profiler time removed. An instance is flagged when it is at least
    ``min_dead_us`` long and ``ratio`` × the warm median of the same label
    (the label's instances outside the first step).

Why it matters
    Nothing the device can run is being prepared in that window: the host is in
    Python (argument checks, hooks, allocator growth, module loading) or in a
    one-time initialisation. The Hugging Face guide measures 228 µs cold vs ≈5 µs
    warm between ``record_function("matmul_add")`` and ``aten::matmul``.

How to fix
    If it happens only in the first step, warm up
    (``schedule(wait=1, warmup=2, active=5)``). If it recurs, profile with
    ``with_stack=True`` and look at the Python frames inside the window: move
    that work out of the step (build tensors, masks and modules once), or
    compile the region (``torch.compile``) to drop per-call Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.warmth import dead_windows
from tb_diagnostics.rules._util import fmt_us, step_numbers, steps_text
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    #: A window this many times the label's warm median is flagged...
    ratio: float = 10.0
    #: ...when it is at least this long (µs).
    min_dead_us: float = 50.0
    #: Labels need this many instances outside the first step for a warm median.
    min_warm_instances: int = 2


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    dw = dead_windows(analysis)
    ok = ~np.isnan(dw.dead_us)
    out = []
    names = m.name[dw.annotation]
    for name in sorted_sets.unique(names[ok]).tolist():
        sel = np.flatnonzero(ok & (names == name))
        warm = sel[dw.window[sel] > 0]
        if warm.size < th.min_warm_instances:
            continue
        med = float(np.median(dw.dead_us[warm]))
        bad = sel[(dw.dead_us[sel] >= th.min_dead_us)
                  & (dw.dead_us[sel] >= th.ratio * max(med, 1e-3))]
        if not bad.size:
            continue
        worst = int(bad[np.argmax(dw.dead_us[bad])])
        steps = step_numbers(analysis, dw.window[bad])
        label = m.strings[name]
        first_op = int(dw.first_op[worst])
        art = float(dw.artefact_us[worst])
        art_note = f" ({fmt_us(art)} of profiler time already removed)" if art > 0 else ""
        ev = [evidence(analysis, int(dw.annotation[worst]),
                       f"waits {fmt_us(dw.dead_us[worst])} before its first op"),
              evidence(analysis, first_op, "the first op it dispatched")]
        for i in bad[np.argsort(-dw.dead_us[bad])][1:5].tolist():
            ev.append(evidence(analysis, int(dw.annotation[i]),
                               f"waits {fmt_us(dw.dead_us[i])}"))
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title, subject=label,
            message=(f"record_function '{label}' waited up to {fmt_us(dw.dead_us[worst])} "
                     f"before dispatching {m.name_of(first_op)} ({bad.size} of {sel.size} "
                     f"instances, {steps_text(steps)}), against a warm median of "
                     f"{fmt_us(med)}{art_note}."),
            steps=steps, evidence=ev, savings_us=None,
            confirm=("profile more steps: a window only in the first step is cold start; "
                     "one that recurs is per-call Python (see with_stack=True frames)")))
    return out


RULE = Rule(id="dispatch-dead-window", title="Dead window before the first op",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving=("which part of the host's time before the first op can go, the trace does "
                       "not say"))
