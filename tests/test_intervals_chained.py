"""``intervals.covered`` takes a window's start length from the window before where that
one ends there, bit for bit: the floats of both ends searched, the old way."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.analysis.intervals import Intervals, covered, length_before, union


def _old(iv: Intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if not len(iv):
        return np.zeros(lo.shape, dtype=np.float64)
    return np.maximum(length_before(iv, hi) - length_before(iv, lo), 0.0)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture()
def iv() -> Intervals:
    return union(np.asarray([-5.0, 0.0, 3.0, 10.0, 10.5, 20.0]),
                 np.asarray([-1.0, 2.0, 7.5, 10.5, 12.0, 20.0]))


@pytest.mark.parametrize("lo, hi", [
    ([], []),  # no window
    ([1.0], [4.0]),  # one
    ([0.0, 1.0, 4.0, 11.0], [1.0, 4.0, 11.0, 30.0]),  # a partition: every start chained
    ([0.0, 2.0, 4.0, 11.0], [1.0, 4.0, 11.0, 30.0]),  # one start not the end before
    ([0.0, 2.0, 4.5, 9.0], [1.0, 3.0, 5.0, 30.0]),  # none chained
    ([-0.0, 0.0, 1.0], [0.0, 1.0, 1.0]),  # -0.0 and 0.0: equal, other bits
    ([0.0, np.nan, np.nan, 3.0], [np.nan, np.nan, 3.0, 8.0]),  # NaN ends and starts
    ([-np.inf, 1.0, 12.0], [1.0, 12.0, np.inf]),
    ([4.0, 2.0, 6.0], [2.0, 6.0, 1.0]),  # reversed windows, chained
])
def test_covered_is_both_ends_searched(iv, lo, hi):
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        assert _same(covered(iv, lo, hi), _old(iv, lo, hi))
        assert _same(covered(Intervals.empty(), lo, hi), _old(Intervals.empty(), lo, hi))


def test_covered_of_random_partitions_and_gaps():
    rng = np.random.default_rng(3)
    start = np.sort(rng.uniform(0, 1e4, 300))
    iv = union(start, start + rng.uniform(0.0, 80.0, start.size))
    for share in (0.0, 0.3, 0.9, 1.0):
        t = np.sort(rng.uniform(-10.0, 1.1e4, 1000))
        lo, hi = t[:-1].copy(), t[1:].copy()
        moved = rng.random(lo.size) > share  # these windows start elsewhere
        lo[moved] -= rng.uniform(0.0, 5.0, int(moved.sum()))
        assert _same(covered(iv, lo, hi), _old(iv, lo, hi)), share
    lists = [1.0, 2.0], [2.0, 3.0]  # lists, ints: converted as before
    assert _same(covered(iv, *lists), _old(iv, *lists))
    assert _same(covered(iv, np.asarray([1, 2]), np.asarray([2, 3])),
                 _old(iv, np.asarray([1, 2]), np.asarray([2, 3])))


def test_covered_of_windows_in_rows():
    """A 2-d set of windows (a column per window kind): searched as before."""
    iv = union(np.asarray([0.0, 5.0]), np.asarray([2.0, 9.0]))
    lo = np.asarray([[0.0, 1.0], [3.0, 6.0]])
    hi = np.asarray([[1.0, 3.0], [6.0, 10.0]])
    assert _same(covered(iv, lo, hi), _old(iv, lo, hi))


def test_chained_starts_and_the_figures_at_them():
    from tb_diagnostics.analysis.intervals import chained_starts, from_previous_ends

    lo = np.asarray([0.0, 1.0, 2.5, 4.0, -0.0])
    hi = np.asarray([1.0, 2.0, 4.0, 0.0, 6.0])
    chained = chained_starts(lo, hi)
    assert chained.tolist() == [False, True, False, True, False]  # -0.0 is not 0.0
    assert chained_starts(lo[:1], hi[:1]) is None  # one window: none before it
    assert chained_starts(np.asarray([0.0, 3.0]), np.asarray([1.0, 4.0])) is None
    assert chained_starts(lo.reshape(1, 5), hi.reshape(1, 5)) is None
    at_hi = np.asarray([10, 20, 40, 0, 60])
    rest = np.flatnonzero(~chained)
    got = from_previous_ends(at_hi, chained, rest, np.asarray([-1, -2, -3]))
    assert got.dtype == at_hi.dtype and got.tolist() == [-1, 10, -2, 40, -3]
    every = np.asarray([False, True, True])  # a partition: the first window alone
    got = from_previous_ends(np.asarray([1.5, 2.5, 3.5]), every, np.asarray([0]),
                             np.asarray([0.5]))
    assert got.tolist() == [0.5, 1.5, 2.5]


@pytest.mark.parametrize("start, end", [
    ([], []),
    ([1.0], [2.0]),
    ([1.0, 3.0, 7.0], [2.0, 5.0, 9.0]),  # a union already: itself
    ([1.0, 2.0], [2.0, 3.0]),  # touching: merged
    ([1.0, 1.5], [2.0, 3.0]),  # overlapping
    ([3.0, 1.0], [4.0, 2.0]),  # out of order
    ([1.0, 3.0], [1.0, 4.0]),  # an empty one: dropped
    ([1.0, np.nan], [2.0, 3.0]),
    ([-0.0, 1.0], [0.5, 2.0]),
])
def test_as_union_is_the_union(start, end):
    from tb_diagnostics.analysis.intervals import as_union

    iv = Intervals(np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64))
    got, want = as_union(iv), union(iv.start, iv.end)
    assert _same(got.start, want.start) and _same(got.end, want.end)
    ints = Intervals(np.asarray([1, 3]), np.asarray([2, 4]))  # not float64: made as before
    got, want = as_union(ints), union(ints.start, ints.end)
    assert _same(got.start, want.start) and _same(got.end, want.end)
