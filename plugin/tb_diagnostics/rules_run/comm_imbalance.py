"""Collective time differs widely across ranks: the fast ranks wait in it.

What it detects
    Ranks are lined up by step number, and each rank's communication time in the step
    (``comm_us``: NCCL kernel time on a GPU, host time in collectives on a CPU) is
    compared. A step is imbalanced when the spread (most minus least) reaches
    ``min_spread_us`` and ``min_spread_share`` of the step and the most is at least
    ``min_ratio`` times the least; the finding fires when most steps are, naming the rank
    that spends the most time in collectives (it waits) and the one that spends the
    least (the others wait for it).

    Only the wait that arises inside the step is a saving. When the waiting rank
    reached its first collective as early after its own step start as the slow rank
    did (``pre_comm_us``), the difference is *entry skew*: the slow rank started the
    step later, carried over from the previous step (work after its last collective
    there), and balancing the work inside this step does not remove it. Per step, the
    in-step part is the slow rank's ``pre_comm_us`` minus the waiting rank's, within
    [0, spread]; the rest is named as entry skew. Without ``pre_comm_us`` on both
    ranks the whole spread is counted, as before. A finding whose spread is mostly
    entry skew (its in-step part below ``min_spread_us``) is ``info``.
Why it matters
    A collective ends on every rank at about the same time, so the time a rank spends in
    it is mostly the time it waited for the last rank to arrive. Wide differences mean
    load imbalance, not slow communication: faster links will not help.
How to fix
    Balance the work per rank: equal batch sizes and sequence lengths per rank (sort
    or bucket by length, pad or pack), even model sharding (pipeline stages of equal
    cost, FSDP units of similar size), no rank-0-only work inside the step; then check
    ``distributed-straggler`` for the rank that arrives late.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from tb_diagnostics.rules._util import fmt_us, steps_text
from tb_diagnostics.rules_run.base import RunFinding, RunRule, RunTable, rank_label, rank_step


@dataclass(frozen=True)
class Thresholds:
    #: The spread of comm time across ranks counts from this many µs…
    min_spread_us: float = 1000.0
    #: …and this share of the step's median wall time…
    min_spread_share: float = 0.10
    #: …when the most is at least this many times the least.
    min_ratio: float = 1.5
    #: Fire when at least this share of the aligned steps are imbalanced.
    min_steps: float = 0.5


#: Name the entry skew when it is at least this share of the spread.
ENTRY_SKEW_SHARE = 0.10


def _in_step(table: RunTable, step: int, hi: int, lo: int, spread: float) -> float:
    """The part of the spread that arises inside the step: how much later after its own
    step start the slow rank (``lo``) reached its first collective than the waiting
    rank (``hi``) did; the whole spread when either does not say."""
    a = table.ranks[lo].steps[step].get("pre_comm_us")
    b = table.ranks[hi].steps[step].get("pre_comm_us")
    if a is None or b is None:
        return spread
    return min(max(float(a) - float(b), 0.0), spread)


def check(table: RunTable, th: Thresholds) -> list[RunFinding]:
    if len(table.ranks) < 2 or not table.common_steps:
        return []
    hits: dict[int, tuple[int, int, float]] = {}
    for s in table.common_steps:
        comm = [float(r.steps[s].get("comm_us") or 0.0) for r in table.ranks]
        hi = max(range(len(comm)), key=lambda i: comm[i])
        lo = min(range(len(comm)), key=lambda i: comm[i])
        spread = comm[hi] - comm[lo]
        if (spread >= max(th.min_spread_us, th.min_spread_share * table.median_wall(s))
                and comm[hi] >= th.min_ratio * max(comm[lo], 1e-9)):
            hits[s] = (hi, lo, spread)
    if not hits or len(hits) < th.min_steps * len(table.common_steps):
        return []
    steps = sorted(hits)
    # The ranks named most often across the imbalanced steps.
    waiter = statistics.mode(h[0] for h in hits.values())
    slow = statistics.mode(h[1] for h in hits.values())
    mean_spread = statistics.fmean(h[2] for h in hits.values())
    w, s_ = table.ranks[waiter], table.ranks[slow]
    in_step = statistics.fmean(_in_step(table, s, *hits[s]) for s in hits)
    entry = max(mean_spread - in_step, 0.0)

    def mean_comm(i: int) -> float:
        return statistics.fmean(float(table.ranks[i].steps[s].get("comm_us") or 0.0)
                                for s in steps)

    message = (f"Time in collectives differs by {fmt_us(mean_spread)} per step across ranks in "
               f"{steps_text(steps)}: {rank_label(w)} spends {fmt_us(mean_comm(waiter))} per "
               f"step in them, {rank_label(s_)} {fmt_us(mean_comm(slow))}; the fast ranks "
               f"wait for {rank_label(s_)}.")
    if entry >= ENTRY_SKEW_SHARE * mean_spread:
        message += (f" Of that, {fmt_us(entry)} per step is entry skew: {rank_label(s_)} "
                    f"started the step that much later, carried over from the previous step "
                    f"(see its end), not imbalance inside the step; "
                    f"{fmt_us(in_step)} arises inside it.")
    worst = max(steps, key=lambda s: hits[s][2])
    hi, lo, _ = hits[worst]

    def in_comm(i: int) -> str:
        return f"{fmt_us(float(table.ranks[i].steps[worst].get('comm_us') or 0.0))} in collectives"

    cells = [rank_step(table.ranks[hi], worst, in_comm(hi)),
             rank_step(table.ranks[lo], worst, in_comm(lo))]
    return [RunFinding(
        rule=RULE.id, severity=RULE.severity if in_step >= th.min_spread_us else "info",
        title=RULE.title, message=message, steps=steps, evidence=[], savings_us=in_step,
        confirm=("compare comm_us across ranks in the ranks × steps table: after balancing, "
                 "the spread should shrink"),
        ranks=[w.rank, s_.rank], workers=[w.worker, s_.worker], cells=cells)]


RULE = RunRule(id="comm-imbalance", title="Communication time imbalanced across ranks",
               severity="warning", check=check, thresholds=Thresholds(), doc=__doc__)
