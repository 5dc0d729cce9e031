"""Run-level rules (every rank of a run together), discovered like the span rules."""

from __future__ import annotations

import logging
from functools import cache

from tb_diagnostics.discovery import by_unique_id, discover
from tb_diagnostics.rules.base import Finding
from tb_diagnostics.rules_run.base import RankSteps, RunRule, RunTable

__all__ = ["RankSteps", "RunRule", "RunTable", "all_run_rules", "run_run_rules"]

_log = logging.getLogger(__name__)


@cache
def all_run_rules() -> tuple[RunRule, ...]:
    """Every registered run rule, ordered by id."""
    return by_unique_id(discover(__name__, __path__, "RULE", RunRule), "run rule")


def run_run_rules(table: RunTable) -> list[Finding]:
    """Every run rule on one run; a rule that raises becomes an internal finding."""
    out: list[Finding] = []
    for rule in all_run_rules():
        try:
            out.extend(rule.run(table))
        except Exception as exc:  # isolate one rule's bug from the rest of the report
            _log.debug("run rule %s failed on %s", rule.id, table.run, exc_info=True)
            out.append(Finding(
                rule=rule.id, severity="info", title=f"{rule.title}: not evaluated",
                message=f"the rule failed on this run ({type(exc).__name__}: {exc})",
                steps=[], evidence=[], savings_us=None,
                confirm="please report this run to the tb-diagnostics issue tracker"))
    return sorted(out, key=lambda f: f.sort_key)
