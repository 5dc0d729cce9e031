"""Compiled regions: which steps ran torch.compile'd code.

What it detects
    ``Torch-Compiled Region: F/R``, ``CompiledFunction`` /
    ``CompiledFunctionBackward`` and ``## Call CompiledFxGraph <hash> ##`` events,
    and Inductor's ``triton_*`` kernels: per step, how many compiled calls ran,
    how long they took on the host and what device time their kernels took.
    One summary per span.

Why it matters
    It tells you which parts of the step the compiler owns before you read the
    rest: inside a compiled region the ops you wrote are replaced by generated
    code (fused kernels, ``aten::addmm`` instead of ``mm`` + ``add``), and the
    region's own cost (guards, the AOT wrapper) shows up as host time that eager
    code does not have (see ``dynamo-cache-lookup``, ``compile-overhead``).

How to fix
    Nothing to fix; information. To compile more of the step, wrap the whole
    training step or the model (``model = torch.compile(model)``) and remove
    graph breaks (``torch._dynamo.explain(fn)(*args)`` lists them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.compiled import compiled_view, per_window_time
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    all_steps,
    evidence_rows,
    fmt_us,
    step_numbers,
    steps_text,
)
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Report when at least this many compiled calls (or triton kernels) are present.
    min_calls: int = 1


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    cv = compiled_view(analysis)
    if not cv.present:
        return []
    m = analysis.model
    entries = cv.entry_rows
    if entries.size + cv.triton.size < th.min_calls:
        return []
    windows = analysis.windows
    win = window_of_rows(analysis, entries)
    kinds = sorted({m.name_of(r) for r in entries.tolist()})
    n_win = max(len(windows), 1)
    parts = []
    if entries.size:
        per = np.bincount(win[win >= 0], minlength=n_win)
        host = per_window_time(analysis, entries)
        ran = step_numbers(analysis, np.flatnonzero(per[:len(windows)] > 0))
        parts.append(f"{', '.join(kinds[:4])}{' …' if len(kinds) > 4 else ''} ran in "
                     f"{steps_text(ran) if ran else 'no step'} ({per.max()} call(s) and "
                     f"{fmt_us(host.max())} of host time in the busiest step)")
    else:
        ran = []
    if cv.triton.size:
        dev = float(m.dur[cv.triton].sum())
        parts.append(f"{cv.triton.size} Inductor triton kernel(s), {fmt_us(dev / n_win)} of "
                     "device time per step")
    if cv.fx_graphs.size:
        hashes = {m.name_of(r) for r in cv.fx_graphs.tolist()}
        parts.append(f"{len(hashes)} distinct CompiledFxGraph hash(es)")
    steps = ran or all_steps(analysis)
    ev = evidence_rows(analysis, _first_per_window(entries, win), "compiled code runs here",
                       limit=MAX_EVIDENCE - 2)
    ev += evidence_rows(analysis, cv.triton[:2], "an Inductor-generated kernel", limit=2)
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message="Compiled code: " + "; ".join(parts) + ".", steps=steps, evidence=ev,
        savings_us=None,
        confirm="the same events disappear when the model runs without torch.compile")]


def _first_per_window(rows: np.ndarray, win: np.ndarray) -> list[int]:
    seen: set[int] = set()
    out = []
    for r, k in zip(rows.tolist(), win.tolist(), strict=True):
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


RULE = Rule(id="compiled-region", title="Compiled regions (torch.compile)", severity="info",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="it describes where compiled code runs")
