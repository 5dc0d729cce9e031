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
    # In order already (no sort made): with repeats, strictly, one short of it, bools.
    np.sort(_RNG.integers(-50, 50, 400)).astype(np.int32), np.arange(7, 900, 3),
    np.r_[np.arange(10), 3], np.array([False, False, True]), np.array([[1, 2], [2, 9]]),
]


def test_unique_of_values_in_order_is_a_new_array():
    a = np.array([4])
    b = np.arange(5)
    assert sorted_sets.unique(a) is not a and sorted_sets.unique(b) is not b
    got = sorted_sets.unique(b)
    got[0] = 99
    assert b[0] == 0


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


@pytest.mark.parametrize("a", range(len(CASES)))
def test_unique_counts_is_numpy_s(a):
    values, counts = sorted_sets.unique_counts(CASES[a])
    want_values, want_counts = np.unique(CASES[a], return_counts=True)
    assert _same(values, want_values) and _same(counts, want_counts)


@pytest.mark.parametrize("codes", [
    [], [0], [5], [-3, -1], [0, 0, 1, 3, 3, 3, 7], [-2, -2, 0, 2, 9, 12], [4, 4, 4],
    list(range(50)), sorted(_RNG.integers(-5, 40, 300).tolist()),
])
@pytest.mark.parametrize("n", [0, 1, 4, 8, 30])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16])
def test_run_starts_is_searchsorted(codes, n, dtype):
    if dtype is np.uint16 and codes and min(codes) < 0:
        return
    c = np.asarray(codes, dtype=dtype)
    want = np.searchsorted(c, np.arange(n + 1))
    got = sorted_sets.run_starts(c, n)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("seed", range(10))
def test_unique_inverse_equals_np_unique(seed):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 3, 500):
        key = (np.repeat(np.arange(n), 3)[:n] * 1_000_003 + rng.integers(0, 9, n)).astype(np.int64)
        want_u, want_inv = np.unique(key, return_inverse=True)
        got_u, got_inv = sorted_sets.unique_inverse(key)
        assert got_u.dtype == want_u.dtype and got_u.tolist() == want_u.tolist()
        assert got_inv.tolist() == want_inv.tolist()
