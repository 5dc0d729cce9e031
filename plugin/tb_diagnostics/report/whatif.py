"""The projections' part of the report document: ``spans[].whatif``.

One entry per change that applies to the span (see :mod:`..analysis.views.whatif`), then
``all``: ``{id, change, rules, related, parts, assumes, steps, wall_us_before,
wall_us_after, saves_us, saves_us_total, saves_uneven}``.
The walls are the medians of the warm steps (``steps``; the cold ones left out, as the
steps' ``cold`` field says), and ``saves_us`` is the median of those steps' savings (each
at least zero); ``saves_us_total`` adds them up, and ``saves_uneven`` says they differ
widely (then the reports give the total next to the median). ``per_step`` gives every
window's ``{step, before_us, after_us}``. Savings are per step; a span without steps has one
window, so its figures are per span.

``rules`` are the rules whose change is the card's or a part of it: a finding of a rule
whose change is the card's gives ``saves_us`` as its ``savings_us``; the findings whose
change is a part (one sync site of ``syncs``) are the card's ``parts``, ``[{rule,
subject, steps, saves_us, saves_us_total}]``, each with the finding's own figures (its
change replayed alone over the warm steps among its steps). Parts do not add up to the
card. ``related`` rules name the problem the change fixes but claim no number of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.whatif import projections, warm_windows

#: Said under a card whose parts are not the card: why their figures differ from its.
PARTS_NOTE = ("each part is replayed alone, so they do not add up to the card, which replays "
              "its whole change at once, what no finding names included")


def _r(x: float) -> float:
    return round(float(x), 3)


def _parts(part_rules: Sequence[str], findings: Sequence[Any]) -> list[dict[str, Any]]:
    """The findings whose change is part of a card: their figures, as they give them."""
    out = []
    for f in findings:
        if f.rule in part_rules and f.savings_us is not None:
            out.append({"rule": f.rule, "subject": f.subject, "steps": list(f.steps),
                        "saves_us": _r(f.savings_us),
                        "saves_us_total": (None if f.savings_total_us is None
                                           else _r(f.savings_total_us))})
    return sorted(out, key=lambda x: -x["saves_us"])


def whatif_section(analysis: SpanAnalysis,
                   findings: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The span's cards; ``findings`` (``rules.base.Finding``) give their parts."""
    windows = analysis.windows
    warm = warm_windows(analysis)
    out = []
    for p in projections(analysis):
        out.append({
            "id": p.id,
            "change": p.change,
            "rules": list(dict.fromkeys(p.rules)),
            "related": list(p.related),
            "parts": _parts(p.part_rules, findings),
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


def _per(steps: Sequence[Any]) -> str:
    return "per step" if steps and steps[0] is not None else "over the span"


def _part_line(part: dict[str, Any]) -> str:
    from tb_diagnostics.rules._util import fmt_us, steps_text

    who = part["rule"] + (f" ({part['subject']})" if part.get("subject") else "")
    steps = [s for s in part["steps"] if s is not None]
    if part["saves_us"] < 0.05:
        saves = "no measurable saving"
    else:
        saves = f"saves {fmt_us(part['saves_us'])} {_per(part['steps'])}"
    if steps and part.get("saves_us_total"):
        saves += f" of {steps_text(steps)} ({fmt_us(part['saves_us_total'])} in all)"
    return f"part: {who}, alone {saves}"


def whatif_items(span: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Per projection: its line, and the lines under it (its parts, the related rules
    with findings here), for the text, Markdown and HTML reports."""
    from tb_diagnostics.rules._util import fmt_us

    found = {f["rule"] for f in span.get("findings") or []}
    out = []
    for w in span.get("whatif") or []:
        per = _per(w["steps"])
        saves = (f"saves {fmt_us(w['saves_us'])} {per}" if w["saves_us"] >= 0.05
                 else "no measurable saving")
        if w.get("saves_uneven") and w.get("saves_us_total", 0) > 0:
            # The median of one step says little where 11 steps save seconds and 15 none.
            n = len(w["steps"])
            saves = (f"saves {fmt_us(w['saves_us_total'])} over the {n} warm steps ("
                     f"{'no measurable saving' if w['saves_us'] < 0.05 else fmt_us(w['saves_us'])}"
                     " at the median step: the steps' savings differ widely)")
        line = (f"{w['id']}: {fmt_us(w['wall_us_before'])} → {fmt_us(w['wall_us_after'])}"
                f", {saves} — {w['change']}")
        parts = w.get("parts") or []
        sub = [_part_line(x) for x in parts]
        if len(parts) > 1 or (parts and parts[0]["saves_us"] != w["saves_us"]):
            # Removing one sync leaves the host waiting at the next; the card removes all.
            sub.append(PARTS_NOTE)
        related = [r for r in w.get("related") or [] if r in found]
        if related:
            sub.append("related, no saving of their own here: " + ", ".join(related))
        out.append((line, sub))
    return out


def whatif_lines(span: dict[str, Any]) -> list[str]:
    """One line per projection, its parts indented under it (text and Markdown)."""
    return [x for line, sub in whatif_items(span) for x in (line, *(f"  {s}" for s in sub))]
