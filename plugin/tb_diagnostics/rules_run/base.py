"""The run-level rule contract: rules over every rank of a run, on compact summaries.

A run rule sees no trace, only a :class:`RunTable` built from the span documents'
``distributed`` sections (see :mod:`tb_diagnostics.report.distributed`), so it gives
the same answer whichever executor (local pool, Dask cluster) analysed the files.
Like a span rule, each lives in its own module of this package with a module-level
``RULE = RunRule(...)`` and a docstring in three parts.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class RankSteps:
    """One rank of a run: its worker/span and its per-step ``distributed`` entries."""

    rank: int
    worker: str
    span: str
    steps: dict[int, dict[str, Any]]  # step number -> the span document's step entry


@dataclass(frozen=True)
class RunTable:
    """Every rank of a run, aligned by step number."""

    run: str
    ranks: list[RankSteps]
    world_size: int | None = None
    backend: str | None = None
    common_steps: list[int] = field(default_factory=list)  # steps every rank has

    def median_wall(self, step: int) -> float:
        return statistics.median(r.steps[step]["wall_us"] for r in self.ranks)


@dataclass(frozen=True)
class RankStep:
    """Run-level evidence: one rank's step to open (in the tab: a link to it)."""

    rank: int
    worker: str
    span: str
    step: int
    why: str  # what to look at there, e.g. "late by 32.03 ms"

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "worker": self.worker, "span": self.span,
                "step": self.step, "why": self.why}


def rank_step(r: RankSteps, step: int, why: str) -> RankStep:
    return RankStep(rank=r.rank, worker=r.worker, span=r.steps[step].get("span") or r.span,
                    step=step, why=why)


@dataclass(frozen=True)
class RunFinding(Finding):
    """A run-level finding: also names the ranks (and their workers) it is about, and the
    rank steps that show it (``cells``)."""

    ranks: list[int] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    cells: list[RankStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "ranks": list(self.ranks), "workers": list(self.workers),
                "cells": [c.to_dict() for c in self.cells]}


@dataclass(frozen=True)
class RunRule(Rule):
    """A rule over a :class:`RunTable`; ``check(table, thresholds)``."""

    def run(self, table: RunTable) -> list[Finding]:  # type: ignore[override]
        return self.check(table, self.thresholds)  # type: ignore[arg-type]


def rank_label(r: RankSteps) -> str:
    """``rank 1`` and, when it says something more, its worker: ``rank 1 (worker0)``."""
    return f"rank {r.rank}" if r.worker == f"rank{r.rank}" else f"rank {r.rank} ({r.worker})"
