"""The JSON writer's rows straight from the packed columns (``lazy_json.encodable``: msgspec
Structs, no dict per row) encode to exactly the bytes of the dicts ``LazyRows.rows`` makes,
on random layered rows of every kind of value; and ``json_chunks`` writes, at any depth
and chunk size, exactly ``encode_json`` of the plain document.
"""

from __future__ import annotations

import random

import msgspec
import numpy as np
import pytest

from tb_diagnostics.lazy_json import encodable
from tb_diagnostics.lazy_record import Recorder
from tb_diagnostics.lazy_rows import (
    ABSENT,
    LazyRows,
    _Masked,
    dict_column,
    pack,
    plain,
)
from tb_diagnostics.output import encode_json, json_chunks

_FLOATS = [-0.0, 0.0, 1e-7, 1e16, 1e300, 5e-324, 0.1, 2.5, -3.75, float("nan"),
           float("inf"), float("-inf"), 123456.789]
_STRINGS = ["", "a,b", 'say "hi"', "back\\slash", "new\nline", "é✓😀", "\u2028",
            "caf\udce9", "<&>", "1,2],[3"]
_KEYS = ["a", "b_us", "é", "with space", "x/y", "<k>", "k,1"]


def _strings(surrogates: bool) -> list[str]:
    return [s for s in _STRINGS if surrogates or "\udce9" not in s]


def _column(rng: random.Random, n: int, kind: str, surrogates: bool) -> list:
    strings = _strings(surrogates)
    pick = {
        "float": lambda k: rng.choice(_FLOATS) if k % 3 else rng.uniform(-1e6, 1e6),
        "int": lambda k: rng.randrange(-2 ** 63, 2 ** 63),
        "bigint": lambda k: rng.choice([2 ** 64, -2 ** 70, 7, 0]),  # past int64: _Objects
        "bool": lambda k: rng.random() < 0.5,
        "none": lambda k: None,
        "str": lambda k: rng.choice(strings),
        "maybe_float": lambda k: None if rng.random() < 0.3 else rng.choice(_FLOATS),
        "num": lambda k: rng.choice([1, 1.0, True, None, "1"]),  # mixed: _Objects/_Masked
        "list": lambda k: [rng.choice(_FLOATS) for _ in range(rng.randrange(4))],
        "strlist": lambda k: [rng.choice(strings) for _ in range(rng.randrange(3))],
        "dict": lambda k: {"x": rng.choice(_FLOATS), "s": rng.choice(strings),
                           "l": [rng.randrange(9) for _ in range(rng.randrange(3))],
                           "d": {"deep": rng.choice([None, 1, "z"])}},
        "varied": lambda k: {"x": 1} if k % 2 else {"y": (1, "t"), "x": [{}]},
        "dictlist": lambda k: [{"kind": rng.choice(strings), "us": rng.choice(_FLOATS)}
                               for _ in range(rng.randrange(3))],
        "empty": lambda k: rng.choice([[], {}]),
    }[kind]
    return [pick(k) for k in range(n)]


_KINDS = ["float", "int", "bigint", "bool", "none", "str", "maybe_float", "num", "list",
          "strlist", "dict", "varied", "dictlist", "empty"]


def _random_rows(rng: random.Random, n: int, surrogates: bool) -> LazyRows:
    keys = rng.sample(_KEYS, rng.randrange(1, len(_KEYS)))
    cols = [_column(rng, n, rng.choice(_KINDS), surrogates) for _ in keys]
    if rng.random() < 0.3:  # a dict column packed from its columns, as step_documents does
        keys.append("idle")
        cols.append(dict_column(("p_us", "q_us"), (_column(rng, n, "float", False),
                                                   _column(rng, n, "maybe_float", False)), n))
    rows = LazyRows.from_columns(keys, cols, n)
    for _ in range(rng.randrange(4)):  # later layers: new keys, overwrites, ABSENT
        layer_keys = rng.sample([*keys, "new1", "new2", "new3"], rng.randrange(1, 4))
        layer_cols = []
        for _key in layer_keys:
            col = _column(rng, n, rng.choice(_KINDS), surrogates)
            share = rng.choice([0.0, 0.5, 1.0])  # rows left as they are
            layer_cols.append([ABSENT if rng.random() < share else v for v in col])
        rows = rows.with_layer(layer_keys, layer_cols)
    return rows


def _encoded(values: list) -> bytes | type:
    try:
        return msgspec.json.encode(values)
    except UnicodeEncodeError:
        return UnicodeEncodeError


@pytest.mark.parametrize("seed", range(60))
def test_structs_encode_as_the_dicts(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 7, 40])
    rows = _random_rows(rng, n, surrogates=seed % 3 == 0)
    for lo, hi in [(0, n), (0, 1), (n // 2, n), (1, 3)]:
        hi = min(hi, n)
        if lo >= hi:
            continue
        expected = _encoded(rows.rows(lo, hi))
        values = encodable(rows, lo, hi)
        if values is not None:
            assert _encoded(values) == expected
    assert not rows.materialised


def test_the_columns_path_is_taken_for_ordinary_rows() -> None:
    rows = LazyRows.from_columns(
        ("step", "us", "name", "idle", "segs", "flags"),
        ([0, 1, 2], [0.5, -0.0, float("nan")], ["a,b", 'q"', "é"],
         dict_column(("x_us",), ([1e16, 1e-7, 2.0],), 3),
         [[{"k": 1}], [], [{"k": 2}, {"k": 3}]], [[], ["cold"], []]), 3)
    rows = rows.with_layer(("us", "late", "maybe"), ([ABSENT, 9.0, ABSENT], [1, 2, 3],
                                                     [ABSENT, None, ABSENT]))
    # ABSENT inside a column's values, not only as its fill: the rows it leaves alone.
    inner = _Masked(np.array([True, False]), pack([ABSENT]), 4.5)
    rows = rows.with_layer(("step",), (_Masked(np.array([True, False, True]), inner, None),))
    rows = rows.with_layer(("pairs", "none"), ([[1.5, "x"], [2, None], [3, [4]]], [[], [], []]))
    values = encodable(rows, 0, 3)
    assert values is not None and not isinstance(values[0], dict)
    assert msgspec.json.encode(values) == msgspec.json.encode(rows.rows(0, 3)) == (
        b'[{"step":0,"us":0.5,"name":"a,b","idle":{"x_us":1e16},"segs":[{"k":1}],'
        b'"flags":[],"late":1,"pairs":[1.5,"x"],"none":[]},'
        b'{"step":null,"us":9.0,"name":"q\\"","idle":{"x_us":1e-7},"segs":[],'
        b'"flags":["cold"],"late":2,"maybe":null,"pairs":[2,null],"none":[]},'
        b'{"step":4.5,"us":null,"name":"\xc3\xa9","idle":{"x_us":2.0},'
        b'"segs":[{"k":2},{"k":3}],"flags":[],"late":3,"pairs":[3,[4]],"none":[]}]')


def test_a_row_that_gains_a_key_late_keeps_the_dicts_order() -> None:
    # Row 1 gets "b" only in the third layer, after "c": its dict lists c before b.
    rows = (LazyRows.from_columns(("a",), ([1, 2],))
            .with_layer(("b",), ([10, ABSENT],))
            .with_layer(("c",), ([20, 21],))
            .with_layer(("b",), ([ABSENT, 11],)))
    assert [list(r) for r in rows.rows(0, 2)] == [["a", "b", "c"], ["a", "c", "b"]]
    assert encodable(rows, 0, 2) is None  # the writer encodes the dicts
    assert encodable(rows, 0, 1) is not None  # row 0 alone has one order
    doc = {"steps": rows}
    assert b"".join(json_chunks(doc, 1)) == encode_json(
        {"steps": rows.rows(0, 2)}, indent=2) + b"\n"


def test_keys_msgspec_will_not_rename_fall_back_to_the_dicts() -> None:
    rows = LazyRows.from_columns(('q"', "ctl\x01", "ok"), ([1], [2], [3]))
    assert encodable(rows, 0, 1) is None
    assert b"".join(json_chunks({"r": rows})) == encode_json({"r": rows.rows(0, 1)},
                                                             indent=2) + b"\n"


def _document(rng: random.Random, surrogates: bool) -> dict:
    """Lazy rows at several depths: in a dict, a list, a list of lists."""
    def lazy() -> LazyRows:
        return _random_rows(rng, rng.choice([0, 1, 5, 13]), surrogates)
    return {"top": lazy(), "runs": [{"steps": lazy(), "n": 1,
                                     "more": [lazy(), {"deep": [[lazy()]]}]}],
            "name": "caf\udce9" if surrogates else "cafe"}


@pytest.mark.parametrize("seed", range(30))
def test_json_chunks_write_encode_json_of_the_plain_document(seed: int) -> None:
    rng = random.Random(1000 + seed)
    doc = _document(rng, surrogates=seed % 2 == 1)
    streamed = {k: b"".join(json_chunks(doc, k)) for k in (1, 3, 4096)}
    expected = encode_json(plain(_copy(doc)), indent=2) + b"\n"
    assert all(v == expected for v in streamed.values())


def _copy(obj):
    # The document with fresh containers and the same LazyRows (plain works in place).
    if type(obj) is dict:
        return {k: _copy(v) for k, v in obj.items()}
    if type(obj) is list:
        return [_copy(v) for v in obj]
    return obj


def test_materialised_rows_are_their_dicts() -> None:
    rows = LazyRows.from_columns(("a",), ([1, 2],))
    rec = Recorder(rows)
    rec[0]["b"] = 1.5
    rows = rec.result()
    held = rows[0]  # a reader makes the dicts
    held["c"] = "set by a reader"
    assert rows.materialised
    assert encodable(rows, 0, 2) == [{"a": 1, "b": 1.5, "c": "set by a reader"}, {"a": 2}]
    assert b'"c": "set by a reader"' in b"".join(json_chunks({"r": rows}))


def test_a_pad_that_is_not_msgspec_s_indent_is_shifted_after() -> None:
    from tb_diagnostics.output import _list_chunks

    rows = LazyRows.from_columns(("a", "l"), ([1, 2, 3], [[1], [], [2, 3]]))
    for pad in (b"", b"   ", b"    ", b"\t"):
        body = encode_json(rows.rows(0, 3), indent=2)
        shifted = (pad + body[2:-2].replace(b"\n", b"\n" + pad)) if pad else body[2:-2]
        expected = b"[\n" + shifted + b"\n" + pad + b"]"
        assert b"".join(_list_chunks(rows, pad, 2)) == expected


def test_long_lists_of_numbers_are_written_a_chunk_at_a_time(monkeypatch) -> None:
    import tb_diagnostics.output as output

    monkeypatch.setattr(output, "SCALARS_PER_CHUNK", 3)
    rng = random.Random(5)
    numbers = [rng.choice([*_FLOATS, 0, -7, 2 ** 70, True, False, None]) for _ in range(11)]
    doc = {"steps": numbers, "short": numbers[:3], "t": tuple(numbers[:4]), "empty": [],
           "deep": [{"x": [numbers, [numbers[:5]]]}], "rows": _random_rows(rng, 6, False),
           "name": "caf\udce9"}
    expected = encode_json(plain(_copy(doc)), indent=2) + b"\n"
    assert b"".join(json_chunks(doc, 4)) == expected
    del doc["name"]
    assert b"".join(json_chunks(doc, 4)) == msgspec.json.format(
        msgspec.json.encode(plain(_copy(doc))), indent=2) + b"\n"


def test_a_value_every_row_of_a_chunk_shares_is_encoded_once() -> None:
    # Constant columns, dicts of them, lists of one length of them and set rows of them
    # hold one msgspec.Raw per chunk (encoded once, not per row), a run of such keys one
    # field; what varies within the chunk, a lone surrogate msgspec refuses alone and
    # ABSENT stay values. Every chunk encodes to the dicts' bytes.
    n = 6
    seg = [{"kind": "host", "us": 2.5}]
    rows = LazyRows.from_columns(
        ("k", "const", "nested", "segs", "varies_in_chunk", "masked", "bad", "mixed_len"),
        (list(range(n)), [3.0] * n,
         dict_column(("a_us", "b"), ([1.5] * n, ["x"] * n), n),
         [seg] * 3 + [seg * 2] * 3,
         [0.1, 0.2, 0.2, 0.2, 0.2, 0.2],
         [None, None, None, 7.25, 7.25, 7.25],
         ["caf\udce9"] * n,
         [[1.0], [1.0], [1.0, 1.0], [], [], []]), n)
    rows = rows.with_layer(("late",), ([ABSENT, ABSENT, ABSENT, 4.0, 4.0, 4.0],))
    for lo, hi in [(0, 3), (3, 6), (0, 6), (2, 4), (5, 9)]:
        values = encodable(rows, lo, min(hi, n))
        assert values is not None
        assert _encoded(values) == _encoded(rows.rows(lo, min(hi, n)))
    first = encodable(rows, 0, 3)
    assert first is not None
    fields = [[(f.encode_name, getattr(r, f.name)) for f in msgspec.structs.fields(r)]
              for r in first]
    # "const", "nested", "segs" share one value each: one field, one Raw for all rows,
    # that writes the three; "masked" alone is one Raw too; the rest stay values.
    assert [k for k, _ in fields[0]] == ["k", "const", "varies_in_chunk", "masked", "bad",
                                         "mixed_len"]
    run, masked = fields[0][1][1], fields[0][3][1]
    assert isinstance(run, msgspec.Raw) and isinstance(masked, msgspec.Raw)
    assert all(r[1][1] is run and r[3][1] is masked for r in fields)
    assert bytes(run) == (b'3.0,"nested":{"a_us":1.5,"b":"x"},'
                          b'"segs":[{"kind":"host","us":2.5}]')
    assert bytes(masked) == b"null"
    assert not isinstance(fields[0][2][1], msgspec.Raw)
    assert fields[0][4][1] == "caf\udce9"  # msgspec refuses it alone: left to the rows
    assert not rows.materialised
