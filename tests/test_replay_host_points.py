"""The replay graph's step marks by their place in the sort equal the search of each mark's
row among the steps' (the old way), and a span without other threads gets a constant
``h_anchor`` of -1, as the graph held it before."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.replay.graph import replay_graph
from tb_diagnostics.analysis.replay.host_points import (
    MARK,
    _marks_by_position,
    _marks_by_row,
)


def _listing(rng: np.random.Generator, n_other: int, steps: np.ndarray):
    """A host listing as ``host_timepoints`` makes it: other timepoints, then the steps'
    start marks, then their end marks; sorted by (time, kind), times with ties."""
    n = steps.size
    rows = np.concatenate([rng.integers(0, 50, n_other), steps, steps])
    kind = np.concatenate([rng.integers(0, 3, n_other).clip(max=2), np.full(2 * n, MARK)])
    kind[:n_other].sort()
    time = np.concatenate([rng.integers(0, 20, n_other),
                           rng.integers(0, 20, n), rng.integers(0, 20, n)]).astype(float)
    is_end = np.zeros(rows.size, dtype=bool)
    is_end[n_other + n:] = True
    order = np.lexsort((kind, time))
    return rows, kind, is_end, order


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_steps", [0, 1, 2, 7, 40])
def test_marks_by_position_equal_marks_by_row(seed, n_steps):
    rng = np.random.default_rng(seed)
    steps = np.sort(rng.choice(np.arange(100, 400), size=n_steps, replace=False))
    n_other = int(rng.integers(0, 30))
    rows, kind, is_end, order = _listing(rng, n_other, steps)
    want = _marks_by_row(rows[order], kind[order], is_end[order], steps)
    got = _marks_by_position(order, n_other, n_steps)
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype == np.int64
        assert g.tolist() == w.tolist()


def test_a_row_that_starts_two_steps_has_its_marks_on_the_last():
    steps = np.asarray([5, 5, 9])
    rows, kind, is_end, order = _listing(np.random.default_rng(0), 3, steps)
    start, end = _marks_by_row(rows[order], kind[order], is_end[order], steps)
    assert start[0] == end[0] == -1 and start[1] >= 0 and end[1] >= 0


def test_single_thread_span_has_a_constant_anchor_of_minus_one(tmp_path):
    b = TraceBuilder(tmp_path / "run")
    b.steady_steps(5)
    g = replay_graph(b.analysis())
    assert g.h_anchor.dtype == np.int32 and g.h_anchor.strides == (0,)
    assert g.h_anchor.shape == g.h_time.shape and (g.h_anchor == -1).all()
    # every step's marks: its start's and end's timepoints, in time order
    assert (g.h_kind[g.mark_start] == MARK).all() and (g.h_kind[g.mark_end] == MARK).all()
    assert (g.mark_start < g.mark_end).all()
