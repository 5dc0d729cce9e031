"""``steps_frame()``'s ``rank`` is an integer column (issue 29 item 8): ``int64`` where every
span has a rank, pandas' nullable ``Int64`` where some have none, never floats (0.0)."""

from __future__ import annotations

import pytest
from rules.conftest import TraceBuilder

import tb_diagnostics


def _run(directory, rank: int | None) -> None:
    top = {} if rank is None else {"distributedInfo": {"backend": "nccl", "rank": rank,
                                                       "world_size": 2}}
    b = TraceBuilder(directory, **top)
    b.steady_steps(3)
    b.write(name=f"worker{0 if rank is None else rank}.1.pt.trace.json")


def test_rank_is_an_integer_column(tmp_path):
    pd = pytest.importorskip("pandas")
    _run(tmp_path / "log" / "ddp", 0)
    _run(tmp_path / "log" / "ddp", 1)
    df = tb_diagnostics.analyze(tmp_path / "log", cache=False).steps_frame()
    assert df["rank"].dtype == "int64"
    assert sorted(set(df["rank"].tolist())) == [0, 1]
    # A run without ranks beside it: nullable integers, the missing ones <NA>.
    _run(tmp_path / "log" / "single", None)
    df = tb_diagnostics.analyze(tmp_path / "log", cache=False).steps_frame()
    assert df["rank"].dtype == pd.Int64Dtype()
    assert df["rank"].isna().sum() == 3
    assert sorted(df["rank"].dropna().unique().tolist()) == [0, 1]
    assert all(type(x) is int for x in df["rank"].dropna().tolist())
