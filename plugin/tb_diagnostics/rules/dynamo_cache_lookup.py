"""TorchDynamo cache lookup: the per-step cost of guards and the AOT runtime wrapper.

What it detects
    ``TorchDynamo Cache Lookup`` (Dynamo checking the guards — shapes, dtypes,
    devices, globals — before it may run a cached graph) and ``AOTDispatcher
    Runtime Wrapper Prologue``/``Epilogue`` (AOTAutograd's wrapper, there even
    without gradients), per step: calls, host time and share of the step. The
    finding is a warning when that share reaches ``warn_share``.

Why it matters
    Every call of a compiled function pays these before any kernel is
    launched. For a large graph they vanish in the noise; for a small one
    called often they are the step (the Hugging Face guide measures compiled
    steps at ~2× the eager CPU time for a single op). xprof reports eager and
    retracing overheads from 10 % and 20 % of the step.

How to fix
    Call compiled code less often with more work per call: compile the whole
    model or step instead of small functions, remove graph breaks
    (``torch._dynamo.explain``), avoid guards on values that change (mark
    dynamic dimensions with ``torch._dynamo.mark_dynamic``), and for static
    shapes use ``torch.compile(mode="reduce-overhead")`` (CUDA graphs) to
    replay the launches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.compiled import compiled_view
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import (
    evidence_rows,
    fmt_count,
    fmt_pct,
    fmt_us,
    step_numbers,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Share of the step (host time of lookups and wrappers / step wall) from which
    #: the finding is a warning (xprof's eager-overhead statement fires at 10 %).
    warn_share: float = 0.05


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    cv = compiled_view(analysis)
    rows = np.concatenate([cv.lookups, cv.wrappers])
    if not rows.size:
        return []
    m = analysis.model
    windows = analysis.windows
    win = window_of_rows(analysis, rows)
    ok = warm_steps(analysis).in_warm(win)
    if not ok.any():
        return []
    rows, win = rows[ok], win[ok]
    n = len(windows)
    per_win = np.bincount(win, weights=m.dur[rows], minlength=n)
    used = np.flatnonzero(per_win > 0)
    wall = windows.columns.wall_us.astype(np.float64)
    share = float(per_win[used].sum() / wall[used].sum()) if wall[used].sum() > 0 else 0.0
    parts = []
    for label, sel in (("TorchDynamo Cache Lookup", np.isin(rows, cv.lookups)),
                       ("AOTDispatcher runtime wrapper", np.isin(rows, cv.wrappers))):
        if sel.any():
            parts.append(f"{label} {fmt_count(sel.sum() / used.size)}× per step, "
                         f"{fmt_us(m.dur[rows[sel]].sum() / used.size)}")
    steps = step_numbers(analysis, used)
    return [Finding(
        rule=RULE.id, severity="warning" if share >= th.warn_share else RULE.severity,
        title=RULE.title,
        message=(f"Compiled-call overhead per step: {'; '.join(parts)} — "
                 f"{fmt_us(per_win[used].mean())} per step, {fmt_pct(share)} of the step "
                 f"(worst step {windows[int(used[np.argmax(per_win[used])])].step}: "
                 f"{fmt_us(per_win[used].max())})."),
        steps=steps, evidence=evidence_rows(analysis, rows[np.argsort(-m.dur[rows])][:8],
                                            "guard check / AOT wrapper before the graph runs"),
        savings_us=None,
        confirm=("TORCH_LOGS=guards shows the guards checked on each call; the lookup time "
                 "grows with their number"))]


RULE = Rule(id="dynamo-cache-lookup", title="Dynamo cache lookup and AOT wrapper cost",
            severity="info", check=check, thresholds=Thresholds(), doc=__doc__,
            escalation="warning when lookups and wrappers take warn_share or more of the steps",
            no_saving=("the guard checks run once per call, and the replay does not model fewer of"
                       " them"))
