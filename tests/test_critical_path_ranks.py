"""The step documents' rankings of segments and ops: the top-1 maximum per step and the
grouping by a stable sort give exactly what the lexsort and ``np.unique`` gave."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.report.critical_path import _first_max, _groups, _ranked


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


@pytest.mark.parametrize("seed", range(10))
def test_groups_equal_np_unique(seed):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 3, 500):
        key = (np.repeat(np.arange(n), 3)[:n] * 1_000_003 + rng.integers(0, 9, n)).astype(np.int64)
        want_u, want_inv = np.unique(key, return_inverse=True)
        got_u, got_inv = _groups(key)
        assert got_u.dtype == want_u.dtype and got_u.tolist() == want_u.tolist()
        assert got_inv.tolist() == want_inv.tolist()
