"""critpath.walk._walk: every step's walk at once is the per-node loop it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.analysis.critpath import walk


def _loop(pred: list[int], reach: list[float], ends: list[int], lo: list[float],
          todo: list[int]) -> tuple[list[int], list[int]]:
    nodes, steps = [], []
    for k in todo:
        n, lo_k = ends[k], lo[k]
        while n >= 0:
            nodes.append(n)
            steps.append(k)
            if reach[n] <= lo_k:
                break
            n = pred[n]
    return nodes, steps


def test_hand_made_paths() -> None:
    # Nodes 0..5: 5 → 3 → 1 → 0 (reach 0.5 stops step 1's walk at node 1), 4 → 2 → -1.
    pred = np.array([-1, 0, -1, 1, 2, 3])
    reach = np.array([0.0, 0.5, 2.0, 3.0, 4.0, 5.0])
    ends = np.array([4, 5, -1])
    lo = np.array([0.0, 1.0, 0.0])
    nodes, steps = walk._walk(pred, reach, ends, lo, np.array([0, 1, 2]))
    assert nodes.tolist() == [4, 2, 5, 3, 1]
    assert steps.tolist() == [0, 0, 1, 1, 1]


@pytest.mark.parametrize("lockstep_min", [1, 3, 10**9])
def test_random_forests(monkeypatch: pytest.MonkeyPatch, lockstep_min: int) -> None:
    monkeypatch.setattr(walk, "LOCKSTEP_MIN", lockstep_min)
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 300))
        pred = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)])
        reach = rng.uniform(0, 100, n)
        reach[rng.random(n) < 0.1] = np.inf  # a NaN reach, as critical_paths passes it
        n_steps = int(rng.integers(1, 200))
        ends = rng.integers(-1, n, n_steps)
        lo = rng.uniform(0, 100, n_steps)
        lo[rng.random(n_steps) < 0.05] = np.nan
        todo = np.flatnonzero(rng.random(n_steps) < 0.8)
        nodes, steps = walk._walk(pred, reach, ends, lo, todo)
        want = _loop(pred.tolist(), reach.tolist(), ends.tolist(), lo.tolist(), todo.tolist())
        assert (nodes.tolist(), steps.tolist()) == want
