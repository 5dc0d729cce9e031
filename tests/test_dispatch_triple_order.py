"""The dispatch trees' nodes are merged by (parent, kind, name) in one stable sort of a
combined key where the ranges allow it: the very order ``np.lexsort`` gave."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.analysis.dispatch_flat import triple_order


@pytest.mark.parametrize("seed", range(10))
def test_triple_order_equals_lexsort(seed):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 50, 3000):
        a = np.sort(rng.integers(-1, max(n // 4, 1), n))  # parents nearly in order
        if seed % 2:
            rng.shuffle(a)
        b = rng.integers(-2, 9, n)
        c = rng.integers(-1, 40, n)
        want = np.lexsort((c, b, a))
        got = triple_order(a, b, c)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_ranges_too_wide_for_one_key_fall_back_to_lexsort():
    a = np.asarray([2**40, 0, 2**40, 5], dtype=np.int64)
    b = np.asarray([0, 2**20, 1, 0], dtype=np.int64)
    c = np.asarray([2**10, 3, 0, 2**10], dtype=np.int64)
    assert triple_order(a, b, c).tolist() == np.lexsort((c, b, a)).tolist()
    narrow = [x.astype(np.int32) for x in (a % 1000, b % 7, c % 5)]
    assert triple_order(*narrow).tolist() == np.lexsort(narrow[::-1]).tolist()
