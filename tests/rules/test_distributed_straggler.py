"""distributed-straggler: the late rank is named, with what it was doing."""

from __future__ import annotations

from pathlib import Path

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.rules_run.base import RankSteps, RunTable
from tb_diagnostics.rules_run.distributed_straggler import RULE

LOG = Path(__file__).resolve().parents[2] / "log"


def _entry(step: int, pre: float, wall: float = 50_000.0) -> dict:
    first = 1e9 + step * wall + pre
    return {"step": step, "wall_us": wall, "comm_us": 1000.0, "exposed_comm_us": 1000.0,
            "pre_comm_us": pre, "start_abs_us": 1e9 + step * wall, "first_comm_abs_us": first,
            "collectives": [{"name": "gloo:all_reduce", "start_abs_us": first, "dur_us": 900.0}],
            "before_comm": [{"name": "slow_io", "start_abs_us": first - pre, "dur_us": pre}]}


def _table(pres: list[list[float]]) -> RunTable:
    ranks = [RankSteps(rank=i, worker=f"rank{i}", span="1",
                       steps={s: _entry(s, p) for s, p in enumerate(row)})
             for i, row in enumerate(pres)]
    return RunTable(run="r", ranks=ranks, common_steps=list(range(len(pres[0]))))


def test_names_the_late_rank_and_its_op():
    (f,) = RULE.run(_table([[1000, 1000, 1000], [1100, 900, 1000], [20_000, 21_000, 19_000]]))
    assert f.ranks == [2] and f.workers == ["rank2"] and f.steps == [0, 1, 2]
    assert f.message.startswith("Rank 2 reached the collectives 19.00 ms after")
    assert "it was in slow_io" in f.message and "waited in gloo:all_reduce" in f.message


def test_balanced_ranks_do_not_fire():
    assert RULE.run(_table([[1000, 1200], [1100, 1000]])) == []
    assert RULE.run(_table([[1000, 1200]])) == []  # one rank: nothing to compare


def test_sample_run_names_rank_1():
    ld = scan_logdir(str(LOG))
    doc = build_document(ld, run="distributed-ws2-straggler1-cpu")
    (f,) = [x for x in doc["runs"][0]["findings"] if x["rule"] == RULE.id]
    assert f["ranks"] == [1] and f["workers"] == ["rank1"]
    assert "simulated_straggler" in f["message"]


def test_sample_run_without_straggler_is_quiet():
    ld = scan_logdir(str(LOG))
    doc = build_document(ld, run="distributed-ws2-cpu")
    assert [x for x in doc["runs"][0]["findings"] if x["rule"] == RULE.id] == []
