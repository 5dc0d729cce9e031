"""The step documents' rankings of segments and ops: the top-1 maximum per step and the
grouping by a stable sort give exactly what the lexsort and ``np.unique`` gave; the
path's pieces gathered a column at a time are the copies of ``PathEdges.pieces``."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.analysis.critpath.edges import DENSE, PIECES, PathEdges
from tb_diagnostics.analysis.critpath.segments import _node_pieces
from tb_diagnostics.report.critical_path import _first_max, _ranked


def _old_ranked(group: np.ndarray, value: np.ndarray, top: int) -> np.ndarray:
    order = np.lexsort((np.arange(group.size), -value, group))
    g = group[order]
    first = np.ones(g.size, dtype=bool)
    first[1:] = g[1:] != g[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(g.size), 0))
    return order[np.arange(g.size) - start < top]


def _case(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    group = np.sort(rng.integers(0, max(n // 3, 1), n))
    value = rng.integers(0, 4, n).astype(float)  # many ties
    special = rng.random(n)
    value[special < 0.1] = np.nan
    value[(special >= 0.1) & (special < 0.15)] = -0.0
    value[(special >= 0.15) & (special < 0.18)] = np.inf
    return group, value


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("top", [1, 2, 3, 5])
def test_ranked_equals_the_lexsort(seed, top):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 7, 200):
        group, value = _case(rng, n)
        want = _old_ranked(group, value, top)
        got = _ranked(group, value, top)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_first_max_of_all_nan_groups_is_their_first():
    group = np.asarray([0, 0, 1, 1, 1, 4])
    value = np.asarray([np.nan, np.nan, np.nan, 2.0, np.nan, np.nan])
    assert _first_max(group, value).tolist() == [0, 3, 5]
    assert _first_max(group[:0], value[:0]).tolist() == []


def _old_node_pieces(e, nodes, real, virtual, dtypes):
    out = []
    for column, (first, rest), dtype in zip(e.pieces(nodes[real]), virtual, dtypes,
                                            strict=True):
        col = np.empty((nodes.shape[0], PIECES), dtype=dtype)
        col[real] = column
        col[~real, 0] = first
        col[~real, 1:] = rest
        out.append(col.ravel())
    return out


def _edges(rng: np.random.Generator, n: int, n_third: int) -> PathEdges:
    t0 = rng.random((DENSE, n)) * 100
    t0[rng.random((DENSE, n)) < 0.2] = np.nan
    x_node = np.sort(rng.choice(n, size=min(n_third, n), replace=False)).astype(np.int64)
    return PathEdges(
        n_host=n // 2, pred=np.zeros(0, np.int32), t0=t0,
        kind=rng.integers(0, 5, (DENSE, n)).astype(np.int8),
        row=rng.integers(-1, 1000, (DENSE, n)).astype(np.int32),
        lane=rng.integers(-1, 4, (DENSE, n)).astype(np.int16),
        third=(x_node, rng.random(x_node.size), rng.integers(0, 1000, x_node.size).astype(np.int32),
               rng.integers(0, 4, x_node.size).astype(np.int16)),
        reach=np.zeros(0), h_time=np.zeros(0), h_lane=np.zeros(0, np.int16), main_lane=0)


@pytest.mark.parametrize("seed", range(12))
def test_node_pieces_equal_the_copy_of_the_real_nodes_pieces(seed):
    rng = np.random.default_rng(seed)
    for n_edges, n_third, n_path in ((0, 0, 5), (1, 1, 1), (20, 0, 30), (50, 7, 80), (9, 9, 0)):
        e = _edges(rng, n_edges, n_third)
        n_virtual = int(rng.integers(0, 4))
        nodes = np.concatenate([rng.integers(0, max(n_edges, 1), n_path if n_edges else 0),
                                n_edges + np.arange(n_virtual)])
        rng.shuffle(nodes)
        real = nodes < n_edges
        virt = nodes[~real] - n_edges
        v_t0 = rng.random(n_virtual)
        step_rows = rng.integers(0, 1000, n_virtual).astype(np.int64)
        virtual = [(v_t0[virt], np.nan), (0, 0), (step_rows[virt], step_rows[virt][:, None]),
                   (3, 3)]
        dtypes = [np.float64, np.int8, np.int64, np.int64]
        want = _old_node_pieces(e, nodes, real, virtual, dtypes)
        virtual[2] = (step_rows[virt], step_rows[virt])  # the rest: one per virtual node
        got = _node_pieces(e, nodes, real, virtual, dtypes)
        for w, g in zip(want, got, strict=True):
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def _old_previous(h_lane: np.ndarray, dtype) -> np.ndarray:
    by_lane = np.argsort(h_lane, kind="stable")
    prev = np.full(h_lane.shape[0], -1, dtype=dtype)
    same = h_lane[by_lane[1:]] == h_lane[by_lane[:-1]]
    prev[by_lane[1:][same]] = by_lane[:-1][same]
    return prev


@pytest.mark.parametrize("seed", range(6))
def test_previous_timepoint_on_a_lane(seed):
    from tb_diagnostics.analysis.critpath.edges import _previous_on_lane
    from tb_diagnostics.trace.columns import constant

    rng = np.random.default_rng(seed)
    for n in (1, 2, 9, 300):
        lanes = rng.integers(0, 3, n).astype(np.int32)
        for h_lane in (lanes, constant(2, n, np.int32), np.full(n, 2, np.int32)):
            for dtype in (np.int32, np.int64):
                want = _old_previous(np.ascontiguousarray(h_lane), dtype)
                got = _previous_on_lane(h_lane, dtype)
                assert got.dtype == want.dtype and got.tolist() == want.tolist()
