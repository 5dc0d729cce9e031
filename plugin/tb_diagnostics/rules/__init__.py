"""The rule catalogue: one module per rule, discovered here, run by :func:`run_rules`.

Adding a rule means adding one module with a module-level ``RULE``; nothing
else changes. Discovery is by import of every module of this package, so the
table is always complete and ordered by rule id.
"""

from __future__ import annotations

import logging
from functools import cache

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.discovery import by_unique_id, discover
from tb_diagnostics.rules.base import Evidence, Finding, Rule, evidence

__all__ = ["Evidence", "Finding", "Rule", "all_rules", "evidence", "run_rules"]

_log = logging.getLogger(__name__)


@cache
def all_rules() -> tuple[Rule, ...]:
    """Every registered rule, ordered by id."""
    return by_unique_id(discover(__name__, __path__, "RULE", Rule), "rule")


def run_rules(analysis: SpanAnalysis, rules: tuple[Rule, ...] | None = None) -> list[Finding]:
    """Run every rule on one span; findings sorted by severity, then estimated savings.

    A rule that raises is a bug in that rule, not in the user's trace: it is
    logged and reported as an internal finding rather than losing the rest.
    """
    out: list[Finding] = []
    for rule in rules if rules is not None else all_rules():
        try:
            out.extend(rule.run(analysis))
        except Exception as exc:  # isolate one rule's bug from the rest of the report
            _log.debug("rule %s failed on %s", rule.id, analysis.model.path, exc_info=True)
            out.append(Finding(
                rule=rule.id, severity="info", title=f"{rule.title}: not evaluated",
                message=f"the rule failed on this trace ({type(exc).__name__}: {exc})",
                steps=[], evidence=[], savings_us=None,
                confirm="please report this trace to the tb-diagnostics issue tracker"))
    return sorted(out, key=lambda f: f.sort_key)
