"""The replay graph keeps its index columns as int32 and its timepoint kinds as int8
(it is held through every what-if card's replay), with the values the int64 ones had."""

from __future__ import annotations

import numpy as np
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.replay.graph import replay_graph
from tb_diagnostics.trace.columns import narrow_ids

INDEX_COLUMNS = ("h_lane", "h_row", "h_release", "h_anchor", "a_launch", "a_prev", "a_cross",
                 "a_dev", "order_index", "mark_start", "mark_end")


def test_index_columns_are_int32_and_kinds_int8(tmp_path):
    b = TraceBuilder(tmp_path / "run")
    b.steady_steps(5)
    b.runtime("cudaDeviceSynchronize", 5_100, 300)
    g = replay_graph(b.analysis())
    for name in INDEX_COLUMNS:
        assert getattr(g, name).dtype == np.int32, name
    assert g.h_kind.dtype == np.int8
    assert (g.a_launch >= 0).all() and (g.mark_start >= 0).all()


def test_narrowing_keeps_int64_where_a_value_does_not_fit():
    # The graph narrows with the loader's trace.columns.narrow_ids.
    small = np.asarray([-1, 0, 2**31 - 1], dtype=np.int64)
    got = narrow_ids(small)
    assert got.dtype == np.int32 and got.tolist() == small.tolist()
    for big in ([0, 2**31], [-2**31 - 1, 3]):
        wide = np.asarray(big, dtype=np.int64)
        assert narrow_ids(wide).dtype == np.int64 and narrow_ids(wide).tolist() == big
    assert narrow_ids(np.zeros(0, dtype=np.int64)).size == 0
