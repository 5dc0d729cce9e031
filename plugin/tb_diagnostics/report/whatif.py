"""The projections' part of the report document: ``spans[].whatif``.

One entry per change that applies to the span (see :mod:`..analysis.views.whatif`), then
``all``: ``{id, change, rules, related, parts, assumes, steps, saves_us, saves_us_total,
moves_us, saving_moves, shown_step, shown_before_us, shown_after_us, per_step}``.
``steps`` are the warm steps (the cold ones left out, as the steps' ``cold`` field says);
``saves_us_total`` is what they save together, each step's wall before minus after added
up unclipped and never below zero, and ``saves_us`` that total over their number. A step
that finishes sooner only to wait longer in the next gives its saving back: ``moves_us``
is what the steps that gain save and the others give back, and ``saving_moves`` says it
is a wide share of the gains (the reports then say the saving moves into other steps'
waits). ``shown_step`` is the warm step whose own saving is nearest ``saves_us`` (the
earlier on a tie), ``shown_before_us``/``shown_after_us`` its walls: the bars the reports
and the tab draw, named. ``per_step`` gives every window's ``{step, before_us,
after_us}``. Savings are per step; a span without steps has one window, so its figures
are per span.

``rules`` are the rules whose change is the card's or a part of it: a finding of a rule
whose change is the card's gives ``saves_us`` as its ``savings_us``; the findings whose
change is a part (one sync site of ``syncs``) are the card's ``parts``, ``[{rule,
subject, steps, saves_us, saves_us_total}]``, each with the finding's own figures (its
change replayed alone over the warm steps among its steps). Parts do not add up to the
card. ``related`` rules name the problem the change fixes but claim no number of it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.whatif import card_changes, projections, warm_index
from tb_diagnostics.analysis.views.whatif_path import path_cut
from tb_diagnostics.lazy_rows import LazyRows, pack
from tb_diagnostics.report.lifetimes import AFTER_CHANGES, AFTER_PROJECTIONS
from tb_diagnostics.report.rounding import rounded_array
from tb_diagnostics.trace.columns import bitwise_equal

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


def whatif_section(analysis: SpanAnalysis, findings: Sequence[Any] = (),
                   release: bool = False) -> list[dict[str, Any]]:
    """The span's cards; ``findings`` (``rules.base.Finding``) give their parts.
    ``release``: the replays' views are released once the cards are projected
    (``report.lifetimes``)."""
    windows = analysis.windows
    steps = windows.columns.step_list()  # the column, not a view per window
    # Every card's per_step rows share one packed step column (a million steps: once).
    step_column = pack(windows.columns.step if windows.columns.has_steps else steps)
    warm = warm_index(analysis)  # an array: every card reads it (a million steps)
    # The warm windows' steps, once for every card (a million steps: one gather).
    warm_steps = windows.columns.steps_at(warm)
    if release:
        card_changes(analysis)
        analysis.release(AFTER_CHANGES)  # what only the changes' builders read
    cards = projections(analysis)
    if release:
        analysis.release(AFTER_PROJECTIONS)
    out = []
    # Packed and rounded once where cards share them: the walls before are every card's,
    # and cards with one change (whatif.projections) share their walls after and their
    # path's cut (a million steps: each an 8 MB column, a pass over millions of segments).
    n = len(steps)
    walls: list[tuple[Any, Any]] = []  # (walls, their column): a few cards' at most
    path_segments: dict[tuple[int, int], dict[str, Any] | None] = {}
    for p in cards:
        saving = p.saving_over(warm)
        key = (id(p.applied), id(p.after_us))
        if key not in path_segments:
            path_segments[key] = None if p.applied is None else path_cut(
                analysis, p.applied, warm).to_dict(p.step_savings(warm))
        shown = saving.shown
        out.append({
            "id": p.id,
            "change": p.change,
            "rules": list(dict.fromkeys(p.rules)),
            "related": list(p.related),
            "parts": _parts(p.part_rules, findings),
            "assumes": p.assumes,
            "steps": list(warm_steps),
            "saves_us": _r(saving.per_step_us),
            "saves_us_total": _r(saving.total_us),
            "moves_us": _r(saving.moves_us),
            "saving_moves": saving.moves,
            # The step the bars draw: its own saving is the nearest the figure beside it.
            "shown_step": None if shown is None else windows[shown].step,
            "shown_before_us": None if shown is None else _r(p.before_us[shown]),
            "shown_after_us": None if shown is None else _r(p.after_us[shown]),
            # Every window, cold ones included, for the tab's bars of the selected step.
            # Packed columns, a dict per step made when read (tb_diagnostics.lazy_rows).
            "per_step": _per_step_rows(step_column, n, _walls_column(walls, p.before_us, n),
                                       _walls_column(walls, p.after_us, n)),
            # What the change takes off the warm steps' critical paths, per step.
            "path_segments": copy.deepcopy(path_segments[key]),
        })
    return out


def _per_step_rows(steps: Any, n: int, before: Any, after: Any) -> LazyRows:
    """``[{step, before_us, after_us}]`` per window (``steps``: the ``n`` windows' step
    column; ``before`` and ``after``: :func:`_walls_column`'s)."""
    return LazyRows.from_columns(("step", "before_us", "after_us"), (steps, before, after), n)


def _walls_column(seen: list[tuple[Any, Any]], walls_us: Any, n: int) -> Any:
    """A projection's walls of the ``n`` windows, rounded and packed; the column of walls
    with the same bits as ones in ``seen`` is theirs (every card's walls before, and the
    walls after of cards with one change), else made and added to ``seen``."""
    for w, column in seen:
        if bitwise_equal(w, walls_us):
            return column
    rounded = rounded_array(walls_us[:n], 3)
    if len(rounded) != n:
        raise ValueError("a projection's figures do not cover every window")
    column = pack(rounded)
    seen.append((walls_us, column))
    return column


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


def _walls(w: dict[str, Any]) -> str:
    """The shown step's walls, named: ``188.00 ms → 128.00 ms in step 7``."""
    from tb_diagnostics.rules._util import fmt_us

    before, after = w.get("shown_before_us"), w.get("shown_after_us")
    if before is None or after is None:
        return "no step replayed"
    step = w.get("shown_step")
    return f"{fmt_us(before)} → {fmt_us(after)}{'' if step is None else f' in step {step}'}"


def _saves(w: dict[str, Any]) -> str:
    """``saves 3.81 ms per step (99.00 ms over the 26 warm steps)``, and where the saving
    moves, how much of the steps' own savings other steps give back."""
    from tb_diagnostics.rules._util import fmt_us

    steps = w.get("steps") or []
    said = []
    if w["saves_us"] >= 0.05:
        saves = f"saves {fmt_us(w['saves_us'])} {_per(steps)}"
        if len(steps) > 1:
            said.append(f"{fmt_us(w['saves_us_total'])} over the {len(steps)} warm steps")
    else:
        saves = "no measurable saving"
    if w.get("saving_moves"):
        said.append(f"{fmt_us(w['moves_us'])} of the per-step savings move into other "
                    "steps' waits")
    return saves + (f" ({'; '.join(said)})" if said else "")


#: A card's path segments by kind, in words (``steps[].critical_path`` kinds).
_KIND_WORDS = {"host": "host", "input": "DataLoader", "device": "device", "comm": "communication",
               "latency": "launch latency"}


def _freed_text(ps: dict[str, Any], per: str) -> str:
    """``the host no longer waits through 2.70 ms per step of its device work (mostly
    `aten::mm`'s), which still runs`` (a freed sync's); empty where none."""
    from tb_diagnostics.names import short_name
    from tb_diagnostics.rules._util import fmt_us

    freed = ps.get("freed_us") or 0.0
    if freed < 0.05:
        return ""
    top = (ps.get("freed_top") or [None])[0]
    where = f" (most in `{short_name(top['name'], 60)}`)" if top else ""
    return (f"the host no longer waits through {fmt_us(freed)} {per} of its device work"
            f"{where}, which still runs")


def path_line(w: dict[str, Any]) -> str:
    """``on the critical path: shortens its host time by 400 µs per step (40% of the path),
    most in `aten::add_` (host) 300 µs`` or ``shortens nothing the step's end waits on``
    (``path_segments``; empty for a document without it)."""
    from tb_diagnostics.names import short_name
    from tb_diagnostics.rules._util import fmt_us

    ps = w.get("path_segments")
    if not ps:
        return ""
    per = _per(w.get("steps") or [])
    freed = _freed_text(ps, per)
    if ps["shortened_us"] < 0.05:
        text = "on the critical path: shortens nothing the step's end waits on"
        if freed:
            text = f"on the critical path: shortens none of its segments; {freed}"
        off = ps.get("saving_off_path_us") or 0.0
        if off >= 0.05 and w["saves_us"] >= 0.05:
            # The step's window moves against its own work (the steps before it shorten):
            # the saving is theirs, handed over, not a shorter wait of this step's.
            text += (f"; the {fmt_us(min(off, w['saves_us']))} {per} it saves here are "
                     "not on it: the step's window moves with the steps around it")
        return text
    kinds = [k for k, v in sorted(ps["by_kind"].items(), key=lambda kv: -kv[1]) if v >= 0.05]
    words = [_KIND_WORDS[k] for k in kinds]
    what = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    text = (f"on the critical path: shortens its {what} time by {fmt_us(ps['shortened_us'])} "
            f"{per} ({100 * ps['share']:.0f}% of the path)")
    top = [f"`{short_name(t['name'], 60)}` ({t['kind']}) {fmt_us(t['us'])}"
           for t in ps.get("top") or []]
    if top:
        text += ", most in " + ", ".join(top)
    return f"{text}; {freed}" if freed else text


def whatif_items(span: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Per projection: its line, and the lines under it (its parts, the related rules
    with findings here), for the text, Markdown and HTML reports."""
    found = {f["rule"] for f in span.get("findings") or []}
    out = []
    for w in span.get("whatif") or []:
        line = f"{w['id']}: {_walls(w)}, {_saves(w)} — {w['change']}"
        parts = w.get("parts") or []
        sub = [_part_line(x) for x in parts]
        path = path_line(w)
        if path:
            sub.insert(0, path)
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
