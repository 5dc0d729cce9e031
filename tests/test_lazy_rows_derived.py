"""lazy_rows.derived_column: values computed a chunk at a time from held arrays are the
values computed at once, and a LazyRows of them reads, encodes and pickles the same."""

from __future__ import annotations

import pickle

import msgspec
import numpy as np
import pytest

from tb_diagnostics.lazy_json import encodable
from tb_diagnostics.lazy_rows import LazyRows, _Const, derived_column, pack
from tb_diagnostics.report.rounding import rounded_array
from tb_diagnostics.trace.columns import constant


def _share(part: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    wall = end - start
    return rounded_array(np.divide(part, wall, out=np.zeros(wall.shape[0]), where=wall > 0),
                         6)


def test_chunks_give_the_values_of_the_whole():
    rng = np.random.default_rng(1)
    n = 10_000
    start = np.cumsum(rng.uniform(0, 3, n))
    end = start + rng.choice([0.0, 0.5, 1e-7, 2.345], n)
    part = rng.uniform(0, 1, n) * (end - start)
    part[::7] = np.nan
    col = derived_column(_share, [part, start, end])
    want = _share(part, start, end).tolist()
    got = [v for lo in range(0, n, 4096) for v in col.take(lo, lo + 4096)]
    assert msgspec.json.encode(got) == msgspec.json.encode(want)
    assert col.take(n - 3, n + 10) == want[-3:]
    rounded = derived_column(rounded_array, [start], 3)
    assert rounded.take(5, 9) == [round(float(x), 3) for x in start[5:9]]


def test_constant_arrays_give_one_value_and_a_count():
    col = derived_column(rounded_array, [constant(1.23456, 5, np.float64)], 3)
    assert type(col) is _Const and col.take(0, 9) == [1.235] * 5
    mixed = derived_column(_share, [constant(1.0, 3, np.float64), np.zeros(3),
                                    np.asarray([2.0, 0.0, 4.0])])
    assert mixed.take(0, 3) == [0.5, 0.0, 0.25]


def test_rows_encode_and_pickle_as_the_eager_columns():
    x = np.asarray([0.1234, 2.5005, -0.0, 7.0])
    lazy = LazyRows.from_columns(("a", "b"), [derived_column(rounded_array, [x], 3),
                                              [1, 2, 3, 4]])
    eager = LazyRows.from_columns(("a", "b"), [rounded_array(x, 3), [1, 2, 3, 4]])
    assert lazy.rows(0, 4) == eager.rows(0, 4)
    assert msgspec.json.encode(encodable(lazy, 0, 4)) == msgspec.json.encode(eager.rows(0, 4))
    back = pickle.loads(pickle.dumps(lazy))
    assert back.rows(0, 4) == eager.rows(0, 4)
    assert pack(lazy._layers[0][1][0]) is lazy._layers[0][1][0]


def test_arrays_of_other_lengths_are_refused():
    with pytest.raises(ValueError):
        derived_column(_share, [np.zeros(2), np.zeros(3), np.zeros(3)])
    with pytest.raises(ValueError):
        derived_column(rounded_array, [], 3)
