"""``sorted_sets`` gives numpy's arrays (values, dtype, order) for every kind of input."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics import sorted_sets

_RNG = np.random.default_rng(1)
CASES = [
    np.array([], dtype=np.int64), np.array([3]), np.array([[2, 1], [2, 5]]),
    _RNG.integers(-5, 5, 100).astype(np.int32), _RNG.integers(0, 2, 50).astype(bool),
    _RNG.random(30), np.array([1.0, np.nan, np.nan]), [3, 1, 3],
    np.array([], dtype=np.int32), _RNG.integers(0, 10**9, 1000).astype(np.uint32),
    _RNG.permutation(5000).astype(np.int64),
]


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")


@pytest.mark.parametrize("a", range(len(CASES)))
def test_unique_is_numpy_s(a):
    assert _same(sorted_sets.unique(CASES[a]), np.unique(CASES[a]))


@pytest.mark.parametrize("a", range(len(CASES)))
@pytest.mark.parametrize("b", range(len(CASES)))
def test_union_and_difference_are_numpy_s(a, b):
    x, y = CASES[a], CASES[b]
    assert _same(sorted_sets.union1d(x, y), np.union1d(x, y))
    assert _same(sorted_sets.setdiff1d(x, y), np.setdiff1d(x, y))
    ux, uy = np.unique(x), np.unique(y)
    assert _same(sorted_sets.setdiff1d(ux, uy, assume_unique=True),
                 np.setdiff1d(ux, uy, assume_unique=True))
