"""The rule catalogue: one module per rule, discovered here, run by :func:`run_rules`.

Adding a rule means adding one module with a module-level ``RULE``; nothing
else changes. Discovery is by import of every module of this package, so the
table is always complete and ordered by rule id.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.discovery import by_unique_id, discover
from tb_diagnostics.names import shorten_name
from tb_diagnostics.rules.base import Evidence, Finding, Rule, evidence

__all__ = ["Evidence", "Finding", "Findings", "Rule", "RuleFailure", "all_rules", "distinct",
           "evidence", "run_rules"]

_log = logging.getLogger(__name__)


@cache
def all_rules() -> tuple[Rule, ...]:
    """Every registered rule, ordered by id."""
    return by_unique_id(discover(__name__, __path__, "RULE", Rule), "rule")


@dataclass(frozen=True)
class RuleFailure:
    """A rule that raised on a span: a bug in that rule, not a property of the trace."""

    rule: str
    error: str  # ``IndexError: index 0 is out of bounds for axis 0 with size 0``

    @property
    def note(self) -> str:
        """The span note that says so: ``rule kernel-duration-variance could not run: …``."""
        return f"rule {self.rule} could not run: {self.error}"


class Findings(list[Finding]):
    """The findings of a span, sorted, and the rules that could not run on it
    (``failures``): the report lists those in the span's notes, never in silence."""

    def __init__(self, findings: Iterable[Finding] = (),
                 failures: Iterable[RuleFailure] = ()) -> None:
        super().__init__(findings)
        self.failures: list[RuleFailure] = list(failures)


def run_rules(analysis: SpanAnalysis, rules: tuple[Rule, ...] | None = None) -> Findings:
    """Run every rule on one span; findings sorted by severity, then estimated savings.

    A rule that raises is a bug in that rule, not in the user's trace: it costs
    only that rule's findings. It is recorded in ``failures`` (one line, the rule
    id and the error, which the span document adds to its notes) and its
    traceback is logged at DEBUG (``--debug`` prints it).
    """
    out: list[Finding] = []
    failures: list[RuleFailure] = []
    for rule in rules if rules is not None else all_rules():
        try:
            out.extend(rule.run(analysis))
        except Exception as exc:  # isolate one rule's bug from the rest of the report
            _log.debug("rule %s failed on %s", rule.id, analysis.model.path, exc_info=True)
            failures.append(RuleFailure(rule.id, f"{type(exc).__name__}: {exc}"))
    return Findings(sorted(distinct(out), key=lambda f: f.sort_key), failures)


def distinct(findings: list[Finding]) -> list[Finding]:
    """Findings that share a title get told apart: each names its subject.

    Rules set ``subject`` where they can find several things in a span (host-sync's
    sync call and line, an op's name); a finding of a repeated title without one, or
    with the same one, is named by its first evidence event, then numbered, so no two
    findings of a span read the same on a collapsed row.
    """
    titles = Counter(f.title for f in findings)
    seen: Counter[tuple[str, str | None]] = Counter()
    out = []
    for f in findings:
        if titles[f.title] > 1 and (f.subject is None or
                                    sum(g.title == f.title and g.subject == f.subject
                                        for g in findings) > 1):
            base = f.subject or (shorten_name(f.evidence[0].name) if f.evidence else None)
            seen[(f.title, base)] += 1
            k = seen[(f.title, base)]
            # Without a subject or evidence the findings are only numbered, all of them.
            subject = (base if k == 1 else f"{base} ({k})") if base else f"#{k}"
            f = replace(f, subject=subject)
        out.append(f)
    return out
