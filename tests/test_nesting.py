"""The vectorised host nesting equals the stack walk it replaces, on every shape of input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import NO_ID
from tb_diagnostics.trace.nesting import BLOCK, nest, previous_greater


def stack_walk(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The definition: rows in order per thread; a row starting at or after the top's end
    closes it; the parent is the open row on top."""
    parent = np.full(lane.shape[0], NO_ID)
    for ln in np.unique(lane):
        stack: list[int] = []
        for r in np.flatnonzero(lane == ln).tolist():
            while stack and start[r] >= end[stack[-1]]:
                stack.pop()
            parent[r] = stack[-1] if stack else NO_ID
            stack.append(r)
    return parent


def model_order(lane, start, dur):
    """Rows as the model keeps them: by start, longer first."""
    order = np.lexsort((-dur, start))
    return lane[order], start[order], dur[order]


def check(lane, start, dur):
    lane, start, dur = model_order(np.asarray(lane), np.asarray(start, dtype=float),
                                   np.asarray(dur, dtype=float))
    end = start + dur
    kind = np.full(lane.shape[0], int(Kind.CPU_OP), dtype=np.uint8)
    is_dev = np.zeros(lane.shape[0], dtype=bool)
    got = nest(kind, lane.astype(np.int32), start, end, is_dev)
    assert np.array_equal(got, stack_walk(lane, start, end))


intervals = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 30)),
                     max_size=200)


@settings(max_examples=300, deadline=None)
@given(intervals)
def test_equals_the_stack_walk_on_small_coarse_times(rows):
    # Coarse integer times: ties, zero-length rows, rows that overrun their parent.
    lane = [r[0] for r in rows]
    check(lane, [r[1] for r in rows], [r[2] for r in rows])


@pytest.mark.parametrize("seed", range(6))
def test_equals_the_stack_walk_on_large_traces(seed):
    # Deep and wide: a few threads, nested calls, long flat runs of siblings (their parent
    # many blocks back), rounding overruns and zero-length events.
    rng = np.random.default_rng(seed)
    n = 20_000
    lane = rng.integers(0, 3, n)
    start = np.cumsum(rng.exponential(1.0, n)).round(1)
    dur = rng.choice([0.0, 0.5, 3.0, 40.0, 900.0, 5000.0], n, p=[.1, .4, .2, .2, .08, .02])
    check(lane, start, dur)


def test_previous_greater_across_many_blocks():
    rng = np.random.default_rng(7)
    values = rng.random(10 * BLOCK + 5)
    thresholds = rng.random(values.shape[0]) * 1.2
    want = [max((j for j in range(i) if values[j] > thresholds[i]), default=-1)
            for i in range(values.shape[0])]
    assert previous_greater(values, thresholds).tolist() == want


def test_device_and_trace_rows_have_no_parent():
    kind = np.asarray([Kind.CPU_OP, Kind.KERNEL, Kind.TRACE, Kind.CPU_OP], dtype=np.uint8)
    lane = np.zeros(4, dtype=np.int32)
    start = np.asarray([0.0, 1.0, 1.0, 2.0])
    end = np.asarray([10.0, 5.0, 20.0, 3.0])
    is_dev = kind == Kind.KERNEL
    assert nest(kind, lane, start, end, is_dev).tolist() == [NO_ID, NO_ID, NO_ID, 0]
