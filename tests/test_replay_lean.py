"""The replay's leaner pieces (issue 28: the what-if cards of a million steps) against the
ways they replaced: max/min ``ufunc.at`` by groups, the per-stretch host deltas, the walls
alone, and the segments' activity index by a table."""

from __future__ import annotations

import numpy as np
import pytest
from test_replay_vectorised import _changes, busy_analysis

from tb_diagnostics.analysis.replay import grouped
from tb_diagnostics.analysis.replay.engine import (
    _removed_before,
    replay,
    replay_positions,
    replay_wall_us,
)
from tb_diagnostics.analysis.replay.graph import replay_graph
from tb_diagnostics.analysis.replay.order import Nodes
from tb_diagnostics.analysis.views.whatif_path import _activity_of_row


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    return busy_analysis(tmp_path_factory)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("ufunc", grouped.ORDER_FREE)
@pytest.mark.parametrize("sort", [True, False])
def test_grouped_at_is_ufunc_at(ufunc, sort):
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 5, 300):
        idx = rng.integers(0, 9, n)
        if sort:
            idx = np.sort(idx)
        values = rng.normal(size=n)
        values[rng.random(n) < 0.2] = np.nan  # fmax/fmin skip them, maximum keeps them
        values[rng.random(n) < 0.1] = -np.inf
        want = np.full(9, np.nan if n == 2 else 0.5)
        got = want.copy()
        with np.errstate(invalid="ignore"):  # NaN against NaN: maximum warns, either way
            ufunc.at(want, idx, values)
            grouped.at(ufunc, got, idx, values)
        assert _same(got, want), (n, sort)


def test_grouped_at_refuses_an_order_dependent_sum():
    with pytest.raises(ValueError):
        grouped.at(np.add, np.zeros(2), np.asarray([0, 0]), np.asarray([0.1, 0.2]))


@pytest.mark.parametrize("which", ["none", "removed host time", "all"])
def test_per_stretch_host_deltas_are_the_full_arrays(busy, which):
    """``Nodes.h_delta``/``h_first`` for any timepoints: what the replay computed for every
    timepoint at once, bit for bit."""
    g, pos = replay_graph(busy), replay_positions(busy)
    change = _changes(busy)[which]
    removed, since = _removed_before(g, change)
    assert (removed is None) == (which == "none")
    full = np.zeros(g.h_time.shape[0]) if removed is None else removed
    pred = pos.h_pred_node
    has = pred >= 0
    k = pred[has]
    delta = np.zeros(g.h_time.shape[0])
    delta[has] = (g.h_time[has] - g.h_time[k]) - (full[has] - full[k])
    first = g.h_time - full
    nd = Nodes(p=pos, h_time=g.h_time, h_removed=removed, h_since=since, h_waits=has,
               h_join_after=since, a_gap=g.a_gap, a_dur=g.a_dur)
    every = np.arange(g.h_time.shape[0])
    some = every[::3][::-1]
    for ix in (every, some, every[:0]):
        assert _same(nd.h_delta(ix), delta[ix])
        assert _same(nd.h_first(ix), first[ix])


@pytest.mark.parametrize("which", ["none", "faster gemm", "slower device", "removed host time",
                                   "syncs freed", "stream gaps", "all"])
def test_the_walls_alone_are_the_replays(busy, which):
    change = _changes(busy)[which]
    assert _same(replay_wall_us(busy, change), replay(busy, change).wall_us)


def test_a_rows_activity_by_table_is_the_binary_searchs(busy):
    m = busy.model
    acts = m.device_activity_rows
    rows = np.concatenate([np.arange(-1, len(m)), acts[::-1]])
    at = np.searchsorted(acts, rows)
    is_act = (rows >= 0) & (at < acts.size)
    is_act[is_act] = acts[np.minimum(at[is_act], acts.size - 1)] == rows[is_act]
    table = _activity_of_row(busy)
    got = np.where(rows >= 0, table[np.maximum(rows, 0)], -1)
    assert np.array_equal(got >= 0, is_act)
    assert np.array_equal(got[is_act], at[is_act])


def test_per_lane_union_sorts_only_what_is_not_sorted():
    from tb_diagnostics.analysis.intervals import union
    from tb_diagnostics.analysis.replay.capture import per_lane_union

    lane = np.asarray([3, 1, 3, 3, 1, 1])
    start = np.asarray([5.0, 2.0, 1.0, 9.0, 0.0, 2.0])
    end = np.asarray([7.0, 4.0, 6.0, 9.5, 1.0, 3.0])
    got = per_lane_union(lane, start, end)
    assert list(got) == [1, 3]
    for x, iv in got.items():
        on = lane == x
        want = union(start[on], end[on])
        assert iv.start.tolist() == want.start.tolist() and iv.end.tolist() == want.end.tolist()
    assert per_lane_union(lane[:0], start[:0], end[:0]) == {}


def test_a_graph_column_of_one_value_is_one_value(busy):
    """A span with one stream per device keeps no per-activity column of -1 (no other
    stream's activity to wait for), and the replay reads it as the column it stands for."""
    g = replay_graph(busy)
    for name in ("h_time", "a_start", "order_index"):
        assert getattr(g, name).strides != (0,)  # real columns stay columns
    assert g.a_fixed.strides == (0,) and not g.a_fixed.flags.writeable
    assert not g.a_fixed.any() and g.a_fixed.shape == g.a_start.shape
