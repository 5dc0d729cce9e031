"""comm-imbalance: collective time that differs widely across ranks."""

from __future__ import annotations

from tb_diagnostics.rules_run.base import RankSteps, RunTable
from tb_diagnostics.rules_run.comm_imbalance import RULE


def _table(comms: list[list[float]], wall: float = 50_000.0) -> RunTable:
    ranks = [RankSteps(rank=i, worker=f"w{i}", span="1",
                       steps={s: {"step": s, "wall_us": wall, "comm_us": c}
                              for s, c in enumerate(row)})
             for i, row in enumerate(comms)]
    return RunTable(run="r", ranks=ranks, common_steps=list(range(len(comms[0]))))


def test_names_the_waiting_and_the_slow_rank():
    (f,) = RULE.run(_table([[40_000, 41_000], [10_000, 11_000]]))
    assert f.ranks == [0, 1] and f.workers == ["w0", "w1"]
    assert "rank 0 (w0) spends 40.50 ms" in f.message and "wait for rank 1 (w1)" in f.message
    assert f.savings_us == 30_000


def test_small_or_proportional_spread_does_not_fire():
    assert RULE.run(_table([[1000, 1000], [1500, 1400]])) == []  # under 10% of the step
    assert RULE.run(_table([[30_000, 30_000], [25_000, 26_000]])) == []  # ratio < 1.5
