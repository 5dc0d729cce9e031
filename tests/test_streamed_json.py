"""The per-step lists of the report document are lazy rows, and ``report --format json``
streams them (issue 28 item 3: a span of 10⁶ steps held ~4 KB of dicts per step and the
whole JSON text).

Checked: a :class:`LazyRows` reads as the list it replaces (len, indexing, slicing,
iteration across chunk edges, every kind of value packed exactly); a function written for
a list of step dicts adds the same keys in the same order through a :class:`Recorder`;
the streamed bytes equal msgspec's encoding of the materialised document on a made
trace; and the writer's peak traced allocations barely grow with the rows.
"""

from __future__ import annotations

import os
import tracemalloc

import msgspec
import numpy as np
from test_linearity_steps import analysis_of

from tb_diagnostics.lazy_record import Recorder
from tb_diagnostics.lazy_rows import ABSENT, LazyRows, with_values
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.output import decode_json, encode_json, json_chunks
from tb_diagnostics.report.document import span_document


def _columns(n: int) -> tuple[tuple[str, ...], list[list]]:
    """Columns of every kind the step documents hold, with a few odd values."""
    rng = np.random.default_rng(7)
    floats = rng.normal(size=n).round(3).tolist()
    floats[:3] = [-0.0, 1e300, 5e-324][:n]
    keys = ("step", "us", "ok", "name", "opt", "big", "idle", "flags", "mixed", "path")
    cols = [
        [None if k % 11 == 0 else k for k in range(n)],
        floats,
        [k % 3 == 0 for k in range(n)],
        [f"op{k % 5}" for k in range(n)],
        [None if k % 4 else float(k) for k in range(n)],
        [2 ** 70 + k if k == 1 else k for k in range(n)],  # past int64: kept as ints
        [{"a_us": float(k), "b_us": 0.5} for k in range(n)],
        [["cold"] * (k % 3) for k in range(n)],
        [k if k % 2 else float(k) for k in range(n)],  # 1 and 1.0 write apart
        [{"x": 1} if k % 2 else {"y": (1, "t")} for k in range(n)],  # no one key set
    ]
    return keys, cols


def _as_list(keys: tuple[str, ...], cols: list[list]) -> list[dict]:
    return [dict(zip(keys, row, strict=True)) for row in zip(*cols, strict=True)]


def test_lazy_rows_read_as_the_list_they_replace():
    for n in (0, 1, 5, 4096 + 3):
        keys, cols = _columns(n)
        listed = _as_list(keys, cols)
        rows = LazyRows.from_columns(keys, cols, n)
        assert len(rows) == n
        assert list(rows) == listed
        assert rows == listed
        assert msgspec.json.encode(list(rows)) == msgspec.json.encode(listed)
        assert [list(r) for r in rows] == [list(d) for d in listed]  # key order too
        if n:
            assert rows[0] == listed[0]
            assert rows[-1] == listed[-1]
            assert rows[1:4] == listed[1:4]
            assert rows[::2] == listed[::2]
            assert sum(len(c) for c in rows.chunks(7)) == n
        fresh = LazyRows.from_columns(keys, cols, n)
        assert sum(len(c) for c in fresh.chunks(7)) == n
        assert not fresh.materialised  # the writer's chunks are made anew, none kept
        if n:
            assert rows[n - 1] is rows[n - 1]  # a reader's rows are kept: as a list's


def _add_like_the_document(steps) -> None:
    # As the add_* of report.document do: new keys, an overwrite on some steps, a list
    # changed in place, a key set on one step only.
    for k, s in enumerate(steps):
        s["cold"] = k < 2
        s["idle"] = s["idle"] | {"c_us": 1.0}
        if k % 3 == 0:
            s["flags"].append("module-load")
            s["name"] = "again"
    steps[len(steps) // 2]["flag_why"] = {"artefact": "why"}


def test_a_recorded_layer_sets_what_the_list_form_sets():
    keys, cols = _columns(50)
    listed = _as_list(keys, cols)
    _add_like_the_document(listed)
    keys, cols = _columns(50)
    rec = Recorder(LazyRows.from_columns(keys, cols, 50))
    _add_like_the_document(rec)
    rows = rec.result()
    assert rows == listed
    assert [list(r) for r in rows] == [list(d) for d in listed]
    lazy = rec.result()
    listed[3]["flag_why"] = {"whole": True}
    assert with_values(rows, "flag_why", {3: {"whole": True}}) is rows  # set in its dicts
    assert rows == listed
    whole = with_values(lazy, "flag_why", {3: {"whole": True}})  # not read yet: a layer
    assert not lazy.materialised and whole == listed
    assert lazy[3].get("flag_why") is None  # the layer is on a new sequence


def test_an_absent_value_is_no_key():
    rows = LazyRows.from_columns(("a",), ([1, 2],)).with_layer(("b",), ([ABSENT, None],))
    assert list(rows) == [{"a": 1}, {"a": 2, "b": None}]


def _made_document() -> dict:
    f = SpanFile(run="r", worker="w", span="1", url="file:///tmp/none",
                 relpath="r/w.pt.trace.json", size=None, mtime=None)
    span = span_document(f, analysis_of(60))
    return {"schema": 1, "runs": [{"run": "r", "workers": [{"spans": [span]}]}],
            "name": "caf\udce9"}  # a name msgspec refuses: the exact path's escape


def test_streamed_bytes_equal_msgspec_s_encoding_of_the_materialised_document():
    doc = _made_document()
    span = doc["runs"][0]["workers"][0]["spans"][0]
    assert isinstance(span["steps"], LazyRows) and len(span["steps"]) == 60
    assert any(isinstance(c["per_step"], LazyRows) for c in span["whatif"])
    streamed = {k: b"".join(json_chunks(doc, k)) for k in (1, 7, 4096)}
    assert not span["steps"].materialised
    plain = msgspec.convert(msgspec.to_builtins(
        doc, enc_hook=lambda o: list(o) if isinstance(o, LazyRows) else o), dict)
    assert type(plain["runs"][0]["workers"][0]["spans"][0]["steps"]) is list
    expected = encode_json(plain, indent=2) + b"\n"
    assert all(v == expected for v in streamed.values())
    assert b"".join(json_chunks(doc, 5)) == expected  # and from the dicts, once made
    del doc["name"]
    del plain["name"]
    # Without the odd name: msgspec's own encoding, formatted.
    assert b"".join(json_chunks(doc, 7)) == msgspec.json.format(
        msgspec.json.encode(plain), indent=2) + b"\n"


def test_compact_bytes_equal_msgspec_s_compact_encoding(monkeypatch):
    import tb_diagnostics.output as output
    doc = _made_document()
    plain = msgspec.convert(msgspec.to_builtins(
        doc, enc_hook=lambda o: list(o) if isinstance(o, LazyRows) else o), dict)
    expected = encode_json(plain) + b"\n"
    assert b"\n" not in expected[:-1]
    monkeypatch.setattr(output, "SCALARS_PER_CHUNK", 3)  # long number lists chunked too
    for k in (1, 7, 4096):
        assert b"".join(json_chunks(doc, k, indent=0)) == expected
    assert decode_json(expected) == decode_json(b"".join(json_chunks(doc, 7, indent=2)))


def test_auto_indents_a_small_document_and_writes_a_large_one_compact(monkeypatch):
    import tb_diagnostics.output as output
    doc = _made_document()
    rows = sum(len(x) for x in (doc["runs"][0]["workers"][0]["spans"][0]["steps"],))
    assert b"".join(json_chunks(doc, indent="auto")) == b"".join(json_chunks(doc, indent=2))
    monkeypatch.setattr(output, "INDENT_ROWS_AT_MOST", rows - 1)
    assert b"".join(json_chunks(doc, indent="auto")) == b"".join(json_chunks(doc, indent=0))


def _traced_peak_writing(n: int) -> int:
    keys, cols = _columns(n)
    doc = {"runs": [{"spans": [{"steps": LazyRows.from_columns(keys, cols, n),
                                "whatif": [{"per_step": LazyRows.from_columns(
                                    ("step", "before_us"), (cols[0], cols[1]), n)}]}]}]}
    del cols
    with open(os.devnull, "wb") as sink:
        tracemalloc.start()
        try:
            for chunk in json_chunks(doc):
                sink.write(chunk)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_writing_10x_the_rows_takes_far_less_than_10x_the_memory():
    small, large = _traced_peak_writing(6_000), _traced_peak_writing(60_000)
    # The list form held every dict and the whole JSON: 10x; here a chunk of rows at a time.
    assert large < 2.0 * small, (small, large)
