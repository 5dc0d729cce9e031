"""The rules reference (`docs/rules.md`, `tb-diagnostics rules`), generated from the rules."""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass

from tb_diagnostics.rules import all_rules
from tb_diagnostics.rules.base import Rule

HEADER = (
    "# Rules reference\n\n"
    "Generated from the rule modules in `plugin/tb_diagnostics/rules/` by "
    "`tb-diagnostics rules --format markdown`; a test checks it is current.\n"
)


def _thresholds(rule: Rule) -> list[tuple[str, object]]:
    t = rule.thresholds
    if t is None or not is_dataclass(t):
        return []
    return [(f.name, getattr(t, f.name)) for f in fields(t)]


def _every_rule() -> tuple[Rule, ...]:
    """Span rules, then run-level rules (every rank of a run together)."""
    from tb_diagnostics.rules_run import all_run_rules

    return (*all_rules(), *all_run_rules())


_RST_LITERAL = re.compile(r"``(.+?)``", re.S)


def plain(text: str) -> str:
    """Docstring text for a terminal: RST's ``x`` literals as `x`."""
    return _RST_LITERAL.sub(r"`\1`", text)


def render_markdown() -> str:
    out = [HEADER]
    rules = _every_rule()
    out.append("| id | severity | title |\n|---|---|---|")
    out.extend(f"| [`{r.id}`](#{r.id}) | {r.severity_text} | {r.title} |" for r in rules)
    out.append("")
    for r in rules:
        sec = r.doc_sections()
        scope = " — run level (every rank of a run)" if type(r).__name__ == "RunRule" else ""
        escalated = f" ({r.escalation})" if r.escalation else ""
        out.append(f"## {r.id}\n\n**{r.title}** — default severity: {r.severity}{escalated}"
                   f"{scope}\n")
        if sec.get("summary"):
            out.append(sec["summary"] + "\n")
        for head in ("what it detects", "why it matters", "how to fix"):
            if sec.get(head):
                out.append(f"**{head.capitalize()}.** {sec[head]}\n")
        th = _thresholds(r)
        if th:
            out.append("Thresholds: " + ", ".join(f"`{k}` = {v!r}" for k, v in th) + "\n")
        if getattr(r, "no_saving", ""):
            out.append(f"Savings: none ({r.no_saving}).\n")
    return "\n".join(out).rstrip() + "\n"


def render_text() -> str:
    out = []
    for r in _every_rule():
        sec = r.doc_sections()
        out.append(f"{r.id}  [{r.severity_text}]  {r.title}")
        for head in ("what it detects", "why it matters", "how to fix"):
            if sec.get(head):
                body = plain(" ".join(sec[head].split()))
                out.append(f"    {head}: {body}")
        th = _thresholds(r)
        if th:
            out.append("    thresholds: " + ", ".join(f"{k}={v!r}" for k, v in th))
        out.append("")
    return "\n".join(out).rstrip() + "\n" if out else "No rules registered.\n"
