"""A rank that reaches the step's collectives late while the other ranks wait for it.

What it detects
    Ranks are lined up by step number. In each step, every rank's time from the step's
    start to its first collective (``pre_comm_us``: clock-free, so ranks on machines
    whose clocks disagree still compare) is set against the median of the other ranks;
    where no rank has a collective, the step's absolute start is compared instead. A
    rank that is late by at least ``min_late_us`` and ``min_late_share`` of the step,
    in more than ``min_steps`` of the steps (and in two of them, where there are two), is
    a straggler: two ranks that are each late once are noise, not a straggler. The
    finding names the rank, the host event it was in while the others were already in
    the collective, and the collective they waited in.
Why it matters
    Synchronous training runs at the pace of its slowest rank: every other rank sits
    blocked in the all-reduce (``gloo:all_reduce``, ``ncclDevKernel_AllReduce…``) until
    the straggler arrives, so its extra time is paid by the whole job, and on those
    ranks it looks like communication time.
How to fix
    Look at what the late rank does that the others do not (the event named in the
    finding): uneven data (bucket or shard by length so every rank gets the same work),
    extra work on one rank (logging, checkpointing, evaluation on rank 0 only: move it
    out of the step or spread it), a slower or shared machine (check the host, the GPU
    clocks, ``nvidia-smi``), or an input pipeline that starves one rank
    (``num_workers``).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from tb_diagnostics.rules._util import fmt_us, steps_text
from tb_diagnostics.rules_run.base import (
    RankSteps,
    RunFinding,
    RunRule,
    RunTable,
    rank_label,
    rank_step,
)


@dataclass(frozen=True)
class Thresholds:
    #: A rank is late in a step when it arrives this many µs after the others' median…
    min_late_us: float = 1000.0
    #: …and that is at least this share of the step's median wall time.
    min_late_share: float = 0.05
    #: Fire when the same rank is late in more than this share of the aligned steps.
    min_steps: float = 0.5
    #: Critical when the mean lateness reaches this share of the median step.
    critical_share: float = 0.25


def _steps_needed(th: Thresholds, n: int) -> int:
    """Steps a rank must be late in: a strict majority share, and at least two of two+."""
    return max(1, min(2, n), math.floor(th.min_steps * n) + 1)


def _lateness(table: RunTable, step: int) -> dict[int, float]:
    """µs each rank arrived after the median of the others, in one step."""
    entries = {i: r.steps[step] for i, r in enumerate(table.ranks)}
    key = "pre_comm_us"
    if any(e.get(key) is None for e in entries.values()):
        key = "start_abs_us"  # no collective on some rank: compare the step starts
    vals = {i: float(e[key]) for i, e in entries.items() if e.get(key) is not None}
    if len(vals) < 2:
        return {}
    return {i: v - statistics.median(w for j, w in vals.items() if j != i)
            for i, v in vals.items()}


def _culprit(rank: RankSteps, steps: list[int], late: dict[int, float]) -> str | None:
    """The host event the late rank spent most of its lateness in (summed over steps)."""
    overlap: dict[str, float] = defaultdict(float)
    for s in steps:
        e = rank.steps[s]
        first = e.get("first_comm_abs_us")
        if first is None:
            continue
        lo = first - late[s]
        for ev in e.get("before_comm", []):
            o = min(ev["start_abs_us"] + ev["dur_us"], first) - max(ev["start_abs_us"], lo)
            if o > 0:
                overlap[ev["name"]] += o
    return max(overlap, key=lambda n: overlap[n]) if overlap else None


def _waited_in(table: RunTable, straggler: int, steps: list[int]) -> str | None:
    """The longest collective of the other ranks in those steps: where they waited."""
    best: tuple[float, str] | None = None
    for i, r in enumerate(table.ranks):
        if i == straggler:
            continue
        for s in steps:
            for c in r.steps[s].get("collectives", []):
                if best is None or c["dur_us"] > best[0]:
                    best = (c["dur_us"], c["name"])
    return best[1] if best else None


def check(table: RunTable, th: Thresholds) -> list[RunFinding]:
    if len(table.ranks) < 2 or not table.common_steps:
        return []
    late_steps: dict[int, dict[int, float]] = defaultdict(dict)  # rank index -> step -> µs
    for s in table.common_steps:
        lateness = _lateness(table, s)
        if not lateness:
            continue
        i = max(lateness, key=lambda k: lateness[k])
        limit = max(th.min_late_us, th.min_late_share * table.median_wall(s))
        if lateness[i] >= limit:
            late_steps[i][s] = lateness[i]
    out = []
    for i, by_step in late_steps.items():
        if len(by_step) < _steps_needed(th, len(table.common_steps)):
            continue
        rank = table.ranks[i]
        steps = sorted(by_step)
        mean_late = statistics.fmean(by_step.values())
        worst = max(by_step, key=lambda s: by_step[s])
        median_step = statistics.median(table.median_wall(s) for s in steps)
        culprit = _culprit(rank, steps, by_step)
        waited = _waited_in(table, i, steps)
        message = (f"{rank_label(rank).capitalize()} reached the collectives "
                   f"{fmt_us(mean_late)} after the other ranks in {steps_text(steps)} "
                   f"(worst: step {worst}, {fmt_us(by_step[worst])}; the median step is "
                   f"{fmt_us(median_step)})")
        if culprit:
            message += f"; it was in {culprit}"
        message += (f"; meanwhile the others waited in {waited}." if waited
                    else "; meanwhile the others waited.")
        share = mean_late / median_step if median_step > 0 else 0.0
        # The late rank's worst step, and the same step of the rank that arrived first.
        lateness = _lateness(table, worst)
        first = min((j for j in lateness if j != i), key=lambda j: lateness[j], default=None)
        cells = [rank_step(rank, worst, f"late by {fmt_us(by_step[worst])}")]
        if first is not None:
            cells.append(rank_step(table.ranks[first], worst, "on time, for comparison"))
        out.append(RunFinding(
            rule=RULE.id, severity="critical" if share >= th.critical_share else RULE.severity,
            title=RULE.title, message=message, steps=list(steps), evidence=[],
            savings_us=mean_late,
            confirm=(f"open {rank_label(rank)}'s step {worst} and compare it with another "
                     f"rank's: the time before its first collective should be the difference"),
            ranks=[rank.rank], workers=[rank.worker], cells=cells))
    return out


RULE = RunRule(id="distributed-straggler", title="A straggler rank holds the others back",
               severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
               escalation=("critical when the rank is late by critical_share or more of the "
                           "median step"))
