"""The projections' part of the report document: ``spans[].whatif``.

One entry per change that applies to the span (see :mod:`..analysis.views.whatif`), then
``all``: ``{id, change, rules, assumes, steps, wall_us_before, wall_us_after, saves_us,
saves_us_total, saves_uneven}``.
The walls are the medians of the warm steps (``steps``; the cold ones left out, as the
steps' ``cold`` field says), and ``saves_us`` is the median of those steps' savings: the
number a finding proposing the change gives as its ``savings_us``. ``saves_us_total`` adds
those steps' savings up (each at least zero), and ``saves_uneven`` says they differ
widely (then the reports give the total next to the median). ``per_step`` gives every
window's ``{step, before_us, after_us}``. Savings are per step; a span without steps has one
window, so its figures are per span.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.warmth import step_walls
from tb_diagnostics.analysis.views.whatif import projections


def _r(x: float) -> float:
    return round(float(x), 3)


def whatif_section(analysis: SpanAnalysis) -> list[dict[str, Any]]:
    windows = analysis.windows
    cold = step_walls(analysis).cold.tolist()
    warm = [k for k, c in enumerate(cold) if not c] or list(range(len(windows)))
    out = []
    for p in projections(analysis):
        out.append({
            "id": p.id,
            "change": p.change,
            "rules": list(dict.fromkeys(p.rules)),
            "assumes": p.assumes,
            "steps": [windows[k].step for k in warm],
            "wall_us_before": _r(np.median(p.before_us[warm])),
            "wall_us_after": _r(np.median(p.after_us[warm])),
            "saves_us": _r(p.saving(warm)),
            "saves_us_total": _r(p.total_saving(warm)),
            "saves_uneven": p.uneven(warm),
            # Every window, cold ones included, for the tab's bars of the selected step.
            "per_step": [{"step": w.step, "before_us": _r(p.before_us[k]),
                          "after_us": _r(p.after_us[k])} for k, w in enumerate(windows)],
        })
    return out


def whatif_lines(span: dict[str, Any]) -> list[str]:
    """One line per projection, for the text and Markdown reports."""
    from tb_diagnostics.rules._util import fmt_us

    out = []
    for w in span.get("whatif") or []:
        per = "per step" if w["steps"] and w["steps"][0] is not None else "over the span"
        saves = (f"saves {fmt_us(w['saves_us'])} {per}" if w["saves_us"] >= 0.05
                 else "no measurable saving")
        if w.get("saves_uneven") and w.get("saves_us_total", 0) > 0:
            # The median of one step says little where 11 steps save seconds and 15 none.
            n = len(w["steps"])
            saves = (f"saves {fmt_us(w['saves_us_total'])} over the {n} warm steps ("
                     f"{'no measurable saving' if w['saves_us'] < 0.05 else fmt_us(w['saves_us'])}"
                     " at the median step: the steps' savings differ widely)")
        out.append(f"{w['id']}: {fmt_us(w['wall_us_before'])} → {fmt_us(w['wall_us_after'])}"
                   f", {saves} — {w['change']}")
    return out
