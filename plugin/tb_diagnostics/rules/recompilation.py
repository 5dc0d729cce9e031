"""Recompilation: torch.compile compiling again inside the profiled steps.

What it detects
    Three signs, each with its steps and events: compile work inside a
    profiled step (``entire_frame_compile``, ``… (dynamo_timed)`` spans,
    ``backend_compile``…); a ``Torch-Compiled Region: F/R`` with ``R > 0`` —
    frame ``F`` has been compiled ``R + 1`` times; and the
    ``## Call CompiledFxGraph <hash> ##`` hash changing between steps (a new
    graph; the same hash on every step is a cache hit).

Why it matters
    A compile takes from hundreds of milliseconds to minutes of host time, and
    a frame that keeps recompiling (a shape, dtype or Python value that changes
    every step) never reaches steady state; after ``cache_size_limit``
    recompiles Dynamo gives up and runs the frame eagerly.

How to fix
    Find the guard that fails: ``TORCH_LOGS="recompiles"`` prints why each
    recompile happened. Mark varying dimensions dynamic
    (``torch._dynamo.mark_dynamic(x, 0)`` or ``torch.compile(dynamic=True)``),
    pad inputs to a few fixed shapes, and keep Python scalars that change out of
    the compiled function (pass them as tensors).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.replay.changes import host_removed_change
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.compiled import FX_GRAPH, REGION, compiled_view
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    all_steps,
    change_saving,
    evidence_rows,
    fmt_us,
    step_numbers,
    steps_text,
)
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Compile work shorter than this inside a step (µs) is ignored.
    min_compile_us: float = 0.0


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    cv = compiled_view(analysis)
    m = analysis.model
    signs: list[str] = []
    ev_rows: list[tuple[int, str]] = []
    steps: set[int] = set()
    savings = None

    comp = cv.compiles[m.dur[cv.compiles] >= th.min_compile_us]
    win = window_of_rows(analysis, comp)
    inside = comp[win >= 0]
    if inside.size:
        cw = win[win >= 0]
        total = float(m.dur[inside].sum())
        signs.append(f"compile work inside {steps_text(step_numbers(analysis, cw))}: "
                     f"{inside.size} compile(s), {fmt_us(total)} of host time")
        steps.update(cw.tolist())
        ev_rows += [(int(r), "compile work inside a step") for r in inside[:4]]
        if sorted_sets.unique(cw).size >= 2:
            # Recurring compiles are paid again and again: replayed without them.
            savings = change_saving(analysis, host_removed_change(analysis, inside))

    regions = cv.regions
    if regions.size:
        ids = [REGION.match(m.name_of(r)) for r in regions.tolist()]
        recompiled = [(r, int(g.group(1)), int(g.group(2))) for r, g in
                      zip(regions.tolist(), ids, strict=True) if g and int(g.group(2)) > 0]
        if recompiled:
            frames = sorted({f for _, f, _ in recompiled})
            top = max(c for _, _, c in recompiled)
            rwin = window_of_rows(analysis, np.asarray([r for r, _, _ in recompiled]))
            where = (" in " + steps_text(step_numbers(analysis, rwin))
                     if (rwin >= 0).any() else "")
            signs.append(f"frame(s) {', '.join(map(str, frames))} run a recompiled version "
                         f"(up to compile {top}, i.e. {top + 1} compiles of the frame){where}")
            steps.update(rwin[rwin >= 0].tolist())
            ev_rows += [(r, "a recompiled frame runs") for r, _, _ in recompiled[:3]]

    if cv.fx_graphs.size and len(analysis.host_steps) > 1:
        fw = window_of_rows(analysis, cv.fx_graphs)
        per: dict[int, set[str]] = {}
        for r, k in zip(cv.fx_graphs.tolist(), fw.tolist(), strict=True):
            g = FX_GRAPH.match(m.name_of(r))
            if k >= 0 and g:
                per.setdefault(k, set()).add(g.group(1))
        sets = [per[k] for k in sorted(per)]
        if len(sets) > 1 and any(s != sets[0] for s in sets[1:]):
            changed = [k for k in sorted(per) if per[k] != sets[0]]
            signs.append(f"the CompiledFxGraph hash changes in "
                         f"{steps_text(step_numbers(analysis, changed))} (a new graph)")
            steps.update(changed)
            ev_rows += [(int(r), "graph call with a new hash") for r, k in
                        zip(cv.fx_graphs.tolist(), fw.tolist(), strict=True) if k in changed][:3]

    if not signs:
        return []
    step_list = step_numbers(analysis, steps) or all_steps(analysis)
    ev = []
    for r, note in ev_rows[:MAX_EVIDENCE]:
        ev += evidence_rows(analysis, [r], note, limit=1)
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message="torch.compile recompiles: " + "; ".join(signs) + ".",
        steps=step_list, evidence=ev, savings_us=savings,
        confirm=('run with TORCH_LOGS="recompiles": each recompile is printed with the guard '
                 "that failed"))]


RULE = Rule(id="recompilation", title="torch.compile recompiles", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__)
