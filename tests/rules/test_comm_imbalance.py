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


def _with_arrivals(comms: list[list[float]], pre: list[list[float]]) -> RunTable:
    t = _table(comms)
    for r, row in zip(t.ranks, pre, strict=True):
        for s, p in enumerate(row):
            r.steps[s]["pre_comm_us"] = p
    return t


def test_entry_skew_from_the_previous_step_is_named_and_not_a_saving():
    # Rank 0 waits 30 ms more than rank 1 in collectives, yet both reach their first
    # collective 5 ms after their own step start: rank 1 started the step 30 ms later
    # (carried over), so nothing inside the step is imbalanced.
    (f,) = RULE.run(_with_arrivals([[40_000, 41_000], [10_000, 11_000]],
                                   [[5_000, 5_000], [5_000, 5_000]]))
    assert f.savings_us == 0 and f.severity == "info"
    assert "Of that, 30.00 ms per step is entry skew: rank 1 (w1) started the step" in f.message
    assert f.message.endswith("not imbalance inside the step; 0.0 µs arises inside it.")


def test_the_in_step_part_of_a_spread_is_the_saving():
    # Rank 1 reaches its collective 20 ms later than rank 0 after its own step start:
    # 20 of the 30 ms spread arise inside the step, 10 ms are entry skew.
    (f,) = RULE.run(_with_arrivals([[40_000, 41_000], [10_000, 11_000]],
                                   [[5_000, 5_000], [25_000, 25_000]]))
    assert f.savings_us == 20_000 and f.severity == "warning"
    assert "Of that, 10.00 ms per step is entry skew" in f.message
    assert "20.00 ms arises inside it" in f.message
    # All of it inside the step: no entry skew named.
    (g,) = RULE.run(_with_arrivals([[40_000, 41_000], [10_000, 11_000]],
                                   [[5_000, 5_000], [35_000, 35_000]]))
    assert g.savings_us == 30_000 and "entry skew" not in g.message
