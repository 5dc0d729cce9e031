"""Run-level rules (every rank of a run together), discovered like the span rules."""

from __future__ import annotations

import logging
from functools import cache

from tb_diagnostics.discovery import by_unique_id, discover
from tb_diagnostics.rules import Findings, RuleFailure
from tb_diagnostics.rules.base import Finding
from tb_diagnostics.rules_run.base import RankSteps, RunRule, RunTable

__all__ = ["RankSteps", "RunRule", "RunTable", "all_run_rules", "run_run_rules"]

_log = logging.getLogger(__name__)


@cache
def all_run_rules() -> tuple[RunRule, ...]:
    """Every registered run rule, ordered by id."""
    return by_unique_id(discover(__name__, __path__, "RULE", RunRule), "run rule")


def run_run_rules(table: RunTable) -> Findings:
    """Every run rule on one run, findings sorted. A rule that raises is a bug in that rule:
    it costs only its own findings and is recorded in ``failures`` (the rule id and the
    error), which the run document lists in its ``notes``, as a span lists its own."""
    out: list[Finding] = []
    failures: list[RuleFailure] = []
    for rule in all_run_rules():
        try:
            out.extend(rule.run(table))
        except Exception as exc:  # isolate one rule's bug from the rest of the report
            _log.debug("run rule %s failed on %s", rule.id, table.run, exc_info=True)
            failures.append(RuleFailure(rule.id, f"{type(exc).__name__}: {exc}"))
    return Findings(sorted(out, key=lambda f: f.sort_key), failures)
