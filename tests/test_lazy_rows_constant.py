"""A packed column whose every value has the same bits is one value and a count
(``lazy_rows._array``): no array of 10⁶ zeros per step figure. The rows it gives, and the
JSON written from it, are those of the array form; values equal under ``==`` but written
differently (0.0 and -0.0) or never equal to themselves (NaN) are told apart by their bits.
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from tb_diagnostics.lazy_rows import LazyRows, _Array, _Const, dict_column, pack
from tb_diagnostics.output import encode_json, json_chunks


@pytest.mark.parametrize("values", [
    np.zeros(1000),
    np.full(1000, -0.0),
    np.full(1000, np.nan),
    np.full(1000, 7, dtype=np.int64),
    np.ones(1000, dtype=bool),
    np.full(1000, 0.1, dtype=np.float32),
    [0.0] * 1000,
    [3] * 1000,
    [False] * 1000,
])
def test_a_column_of_one_value_is_that_value_and_a_count(values):
    col = pack(values)
    assert type(col) is _Const and col.n == 1000
    expected = np.asarray(values).tolist()
    assert msgspec.json.encode(col.take(0, 1000)) == msgspec.json.encode(expected)
    assert msgspec.json.encode(col.take(990, 2000)) == msgspec.json.encode(expected[990:])


@pytest.mark.parametrize("values", [
    np.array([0.0] * 500 + [-0.0] + [0.0] * 499),  # equal, but written "-0.0"
    np.array([np.nan, 1.0]),
    np.arange(1000),
    np.array([True, False]),
])
def test_a_column_of_values_that_differ_in_their_bits_stays_an_array(values):
    col = pack(values)
    assert type(col) is _Array
    assert msgspec.json.encode(col.take(0, len(values))) == \
        msgspec.json.encode(values.tolist())


def test_pack_keeps_no_reference_to_a_callers_array():
    values = np.arange(10.0)
    col = pack(values)
    values[:] = 0  # the caller reuses its array: the column keeps what it was given
    assert col.take(0, 10) == list(np.arange(10.0))
    zeros = np.zeros(10)
    const = pack(zeros)
    zeros[:] = 1
    assert const.take(0, 10) == [0.0] * 10


def test_rows_with_constant_columns_write_the_json_of_their_dicts():
    n = 20_000
    steps = np.arange(n)
    rows = LazyRows(n, [(("step", "wall_us", "idle", "cold"), [
        pack(steps), pack(np.full(n, 10.0)),
        dict_column(["input_us", "launch_us"], [np.zeros(n), np.full(n, -0.0)], n),
        pack([False] * n)])])
    plain = [{"step": k, "wall_us": 10.0, "idle": {"input_us": 0.0, "launch_us": -0.0},
              "cold": False} for k in range(n)]
    assert list(rows) == plain
    for indent in (0, 2):
        written = b"".join(json_chunks({"steps": rows}, rows_per_chunk=4096, indent=indent))
        assert written == b"".join(json_chunks({"steps": plain}, indent=indent))
    assert msgspec.json.decode(written) == msgspec.json.decode(encode_json({"steps": plain}))
