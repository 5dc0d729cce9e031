"""``dispatch_flat.depth_levels`` (the nodes of each depth, by a narrow radix argsort) is
the naive grouping: each depth's positions, ascending, for every width it narrows to."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.analysis.dispatch_flat import depth_levels


def naive(depth: np.ndarray) -> list[np.ndarray]:
    if not depth.size:
        return []
    return [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)]


@pytest.mark.parametrize("top", [0, 1, 5, 126, 127, 300, 32766, 32767, 70000])
def test_random_depths(top: int) -> None:
    rng = np.random.default_rng(top)
    depth = rng.integers(0, top + 1, size=5000).astype(np.int64)
    depth[-1] = top  # the widest value present: the narrowing's edge
    got = depth_levels(depth)
    want = naive(depth)
    assert len(got) == len(want) == top + 1
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)


def test_edges() -> None:
    assert depth_levels(np.zeros(0, dtype=np.int64)) == []
    (only,) = depth_levels(np.zeros(1, dtype=np.int64))
    assert only.tolist() == [0]
    got = depth_levels(np.asarray([2, 0, 2, 0, 2], dtype=np.int64))  # a depth with no node
    assert [g.tolist() for g in got] == [[1, 3], [], [0, 2, 4]]
