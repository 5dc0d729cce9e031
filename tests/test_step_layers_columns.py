"""The step documents' layers as columns (report.step_columns): each layer's keys computed
for every step at once and added as packed columns give the same dicts, in the same key
order, as the per-step loops on a list of step dicts gave."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.views.backlog import launch_backlog
from tb_diagnostics.lazy_rows import ABSENT, LazyRows, codes_column, list_column, masked_column
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.critical_path import add_critical_path, critical_path_document
from tb_diagnostics.report.document import span_document, step_document
from tb_diagnostics.report.host_work import add_host_work
from tb_diagnostics.report.launch_queue import add_launch_queue, backlog_columns
from tb_diagnostics.report.roofline import add_step_roofline
from tb_diagnostics.report.rounding import rounded, rounded_array, significant
from tb_diagnostics.report.step_columns import set_columns, strings_column, where, with_columns
from tb_diagnostics.report.step_documents import step_documents
from tb_diagnostics.report.step_flags import add_flag_reasons
from tb_diagnostics.rules import run_rules


def test_rounded_array_is_pythons_round_as_floats():
    x = np.asarray([0.0005, 0.0015, 2.675, -0.0, 1e300, float("nan"), 123.4565, 1 / 3])
    got = rounded_array(x, 3)
    assert got.dtype == np.float64
    want = [round(float(v), 3) for v in x]
    assert [repr(v) for v in got.tolist()] == [repr(v) for v in want]
    assert [repr(v) for v in rounded(x, 3)] == [repr(v) for v in want]
    assert got.tolist()[:4] == [0.001, 0.002, 2.675, -0.0]
    assert rounded_array(np.asarray([2.675, 0.125]), 2).tolist() == [2.67, 0.12]  # exact value


def test_significant_is_the_formats_four_digits_as_floats():
    x = np.asarray([0.0, -0.0, float("nan"), float("inf"), 1e300, 5e-324, 9999.5, 999.95,
                    1000.5, 0.12345, 1.2345e-5, 12345.0, 99995.0, 1e22, 9.9995e-19, -2.71828,
                    0.00012344999, 123456789.0])
    want = [float(f"{v:.4g}") for v in x.tolist()]
    assert [repr(v) for v in significant(x, 4).tolist()] == [repr(v) for v in want]
    assert significant(np.asarray([1.23456, 0.000987654]), 4).tolist() == [1.235, 0.0009877]
    rng = np.random.default_rng(7)
    y = rng.uniform(-1, 1, 20_000) * 10.0 ** rng.integers(-30, 30, 20_000)
    assert significant(y, 4).tolist() == [float(f"{v:.4g}") for v in y.tolist()]


def test_the_packed_constructors_give_their_values():
    assert list_column(np.asarray([0, 2, 2, 3]), ["a", "b", "c"]).take(0, 3) == [
        ["a", "b"], [], ["c"]]
    assert masked_column(np.asarray([True, False, True]), [1.5, 2.5]).take(0, 3) == [
        1.5, None, 2.5]
    assert masked_column(np.asarray([False, True]), ["x"], ABSENT).take(0, 2) == [ABSENT, "x"]
    assert codes_column(np.asarray([2, 0, 0]), ["p", "q", "r"]).take(1, 3) == ["p", "p"]
    with pytest.raises(ValueError):
        codes_column(np.asarray([0]), ["p", "p"])


def test_strings_column_names_ids_and_none_and_shares_equal_texts():
    strings = ["zero", "one", "same", "same"]
    col = strings_column(np.asarray([3, -1, 1, 2, 3]), strings)
    assert col.take(0, 5) == ["same", None, "one", "same", "same"]
    assert strings_column(np.asarray([-1, -1]), strings).take(0, 2) == [None, None]
    assert strings_column(np.asarray([], dtype=np.int64), strings).take(0, 0) == []


def test_where_takes_a_whole_column_or_the_values_of_its_rows():
    mask = np.asarray([True, False, True])
    assert where(mask, np.asarray([1, 2, 3])).take(0, 3) == [1, None, 3]
    assert where(mask, ["a", "c"], ABSENT).take(0, 3) == ["a", ABSENT, "c"]
    full = np.asarray([1.0, 2.0])
    assert where(np.asarray([True, True]), full) is full
    with pytest.raises(ValueError):
        where(mask, ["a", "b", "c"])  # one value per True, not per row


def test_a_layer_keeps_each_key_in_place_and_adds_new_ones_last():
    base = [{"a": 1, "flags": ["x"]}, {"a": 2, "flags": []}]
    layer = (("b", "flags", "c"),
             [np.asarray([0.5, 1.5]), where(np.asarray([False, True]), [["y"]], ABSENT),
              where(np.asarray([True, False]), ["only"], ABSENT)])
    rows = LazyRows.from_columns(("a", "flags"), ([1, 2], [["x"], []]))
    lazy = with_columns(rows, layer)
    assert isinstance(lazy, LazyRows) and lazy is not rows and not rows.materialised
    set_columns(base, layer)
    want = [[("a", 1), ("flags", ["x"]), ("b", 0.5), ("c", "only")],
            [("a", 2), ("flags", ["y"]), ("b", 1.5)]]
    assert [list(d.items()) for d in base] == want
    assert [list(d.items()) for d in lazy.rows(0, 2)] == want
    # A LazyRows whose dicts a reader made is set in place, as a list.
    rows.as_list()
    assert with_columns(rows, layer) is rows and [list(d.items()) for d in rows] == want
    with pytest.raises(ValueError):
        set_columns([{}], (("b",), [np.asarray([1.0, 2.0])]))


def _trace(tmp_path):
    """Three steps of ops and launches, ties in the path, a step with a host gap."""
    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 990)
        for k in range(3 + s):
            ts = t0 + 5 + 100 * k + (300 if s == 2 and k == 2 else 0)
            b.op("aten::add" if k % 2 else "aten::mm", ts, 10, dims=[[64, 64], [64, 64]],
                 types=["float", "float"])
            b.launch("k_add" if k % 2 else "gemm", ts + 5, ts + 18, 20)
    b.write()
    return scan_logdir(str(tmp_path)).files[0], b.analysis()


def _list_steps(a):
    """The step documents as the per-step loops built them, on a list (the tab's path)."""
    steps = [step_document(w) for w in a.windows]
    add_step_roofline(steps, a)
    add_critical_path(steps, a)
    add_host_work(steps, a)
    add_flag_reasons(steps, a, run_rules(a))
    doc = {"steps": steps, "notes": []}
    add_launch_queue(doc, a)
    return doc["steps"]


def test_the_span_documents_steps_are_the_list_paths_dicts_key_for_key(tmp_path):
    f, a = _trace(tmp_path)
    lazy = span_document(f, a)["steps"]
    assert isinstance(lazy, LazyRows) and not lazy.materialised
    rows = lazy.rows(0, len(lazy))
    assert [s["step"] for s in rows] == [1, 2, 3]
    assert step_documents(a) == [step_document(w) for w in a.windows]
    listed = _list_steps(a)
    # The list path has no comm keys nor cold/stub (span_document's own layers): the
    # keys both have come in the same order with the same values.
    for got, want in zip(rows, listed, strict=True):
        shared = [k for k in got if k in want]
        assert shared == list(want)
        assert {k: got[k] for k in shared} == want
        assert got["cold"] in (True, False) and got["stub"] is False
    for k, s in enumerate(rows):
        assert s["critical_path"] == critical_path_document(a, k)
        fields = launch_backlog(a).step_fields(k)
        assert {key: s[key] for key in fields} == fields


def test_backlog_columns_are_each_steps_fields(tmp_path):
    _, a = _trace(tmp_path)
    bl = launch_backlog(a)
    got = with_columns([{} for _ in range(len(bl))], backlog_columns(bl))
    assert got == [bl.step_fields(k) for k in range(len(bl))]


def test_codes_column_keeps_narrow_codes_and_packs_one_code_as_a_constant():
    from tb_diagnostics.lazy_json import _column
    from tb_diagnostics.trace.columns import constant

    table = ["p", None, "r"]
    narrow = codes_column(np.asarray([2, 0, 1, 0], dtype=np.int8), table)
    assert narrow.codes.dtype == np.int8 and narrow.take(0, 4) == ["r", "p", None, "p"]
    assert _column(narrow, 1, 4) == ["p", None, "p"]
    wide = codes_column(np.asarray([1, 0], dtype=np.int64), table)
    assert wide.codes.dtype == np.int32 and wide.take(0, 2) == [None, "p"]
    for one in (np.full(5, 2, dtype=np.int8), constant(2, 5, np.int8)):
        col = codes_column(one, table)
        assert col.take(0, 5) == ["r"] * 5 and col.take(3, 9) == ["r"] * 2
        # One code in the chunk: the string encoded once, the same bytes for every row.
        got = _column(col, 0, 5)
        assert len(got) == 5 and all(v is got[0] for v in got)
        assert msgspec.json.encode(got) == msgspec.json.encode(["r"] * 5)
    assert codes_column(np.zeros(0, dtype=np.int8), table).take(0, 3) == []
