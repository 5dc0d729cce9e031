"""The packed columns' indexes are small: a masked column counts its set rows once per
:data:`~tb_diagnostics.lazy_rows.COUNT_EVERY` rows (not an int64 per row), a list column's
offsets are int32. Rows read anywhere, across block edges, are the list form's."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.lazy_rows import COUNT_EVERY, LazyRows, _Lists, _Masked, pack
from tb_diagnostics.output import encode_json, json_chunks


@pytest.mark.parametrize("density", [0.0, 0.001, 0.5, 1.0])
def test_a_masked_column_finds_its_values_across_block_edges(density):
    rng = np.random.default_rng(3)
    n = 3 * COUNT_EVERY + 17
    values = [float(k) if rng.random() < density else None for k in range(n)]
    values[0], values[-1] = 0.5, None  # both kinds: else a constant or an array
    col = pack(values)
    assert type(col) is _Masked
    assert col._blocks.size == -(-n // COUNT_EVERY) + 1
    mask = np.asarray([v is not None for v in values])
    for k in [0, 1, COUNT_EVERY - 1, COUNT_EVERY, COUNT_EVERY + 1, 2 * COUNT_EVERY, n - 1, n,
              n + 5, *rng.integers(0, n, 50).tolist()]:
        assert col.before(k) == int(mask[:min(k, n)].sum())
    for lo, hi in [(0, n), (COUNT_EVERY - 3, COUNT_EVERY + 3), (n - 10, n + 10), (7, 7)]:
        assert col.take(lo, hi) == values[lo:hi]


def test_list_offsets_are_int32_and_read_as_before():
    lists = [[k] * (k % 4) for k in range(2 * COUNT_EVERY)]
    col = pack(lists)
    assert type(col) is _Lists and col.offsets.dtype == np.int32
    assert col.take(0, len(lists)) == lists
    assert col.take(COUNT_EVERY - 2, COUNT_EVERY + 2) == lists[COUNT_EVERY - 2:COUNT_EVERY + 2]


def test_rows_of_masked_and_list_columns_write_the_json_of_their_dicts():
    n = 2 * COUNT_EVERY + 5
    plain = [{"step": k, "reason": "stub" if k % 1000 == 3 else None,
              "flags": ["inferred"] * (k % 2)} for k in range(n)]
    rows = LazyRows(n, [(("step", "reason", "flags"),
                         [pack([p[key] for p in plain]) for key in ("step", "reason", "flags")])])
    assert list(rows) == plain
    for indent in (0, 2):
        assert b"".join(json_chunks({"s": rows}, rows_per_chunk=1000, indent=indent)) == \
            b"".join(json_chunks({"s": plain}, indent=indent))
    assert encode_json(rows.rows(0, n)) == encode_json(plain)
