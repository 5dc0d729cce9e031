"""The builder's interning shortcuts give what the per-value ways gave: string ids in order
of first appearance, launch texts composed per distinct combination, the concrete-input
mask by literals in the joined names, and the column conversions by fromiter."""

from __future__ import annotations

import json
import re
import struct

import msgspec
import numpy as np
import pytest

from tb_diagnostics.trace.build import ModelBuilder
from tb_diagnostics.trace.categories import (
    concrete_input_mask,
    keeps_concrete_inputs,
    search_mask,
)
from tb_diagnostics.trace.columns import ints, link_ids
from tb_diagnostics.trace.decode import NO_RAW, Args, TraceFile, decode
from tb_diagnostics.trace.interner import Interner
from tb_diagnostics.trace.launches import launch_resources, launch_shapes
from tb_diagnostics.trace.model import NO_ID


class _NaiveInterner:
    """The table as it was: a dict look-up per value, raw texts composed per row."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []
        self.raw_ids = {mode: {b"": NO_ID, b"null": NO_ID} for mode in (False, True)}

    def many(self, values):
        out = []
        for v in values:
            if v not in self.ids:
                self.ids[v] = len(self.strings)
                self.strings.append(v)
            out.append(self.ids[v])
        return out

    def raw(self, values, compact=False):
        known = self.raw_ids[compact]
        out = []
        for v in values:
            k = bytes(v)
            if k not in known:
                text = (k.translate(None, b" \t\r\n") if compact else k).decode(
                    "utf-8", "replace")
                known[k] = self.many([text])[0]
            out.append(known[k])
        return out


def _shape_text(a) -> bytes:
    if (a.grid is NO_RAW and a.block is NO_RAW) or (not a.grid and not a.block):
        return b""
    return b"[" + (bytes(a.grid) or b"null") + b"," + (bytes(a.block) or b"null") + b"]"


def _resources_text(a) -> bytes:
    if a.registers is NO_RAW and a.shared_memory is NO_RAW and a.occupancy is NO_RAW:
        return b""
    return (b"[" + (bytes(a.registers) or b"null") + b"," + (bytes(a.shared_memory) or b"null")
            + b"," + (bytes(a.occupancy) or b"null") + b"]")


def test_many_numbers_new_strings_in_order_and_keeps_the_table_whole():
    table, naive = Interner(), _NaiveInterner()
    batches = [["a", "b", "a"], [], ["b"], ["c", "c", "d", "a", "e", "d"], ["x"] * 5,
               [f"s{k % 7}" for k in range(50)], ["", "a", ""]]
    for batch in batches:
        assert table.many(batch).tolist() == naive.many(batch)
        assert table.strings == naive.strings
        assert len(table.ids) == len(table.strings)
    assert table.many([]).dtype == np.int32


def test_raw_interns_new_texts_in_order_with_known_and_absent_ones():
    table, naive = Interner(), _NaiveInterner()
    R = msgspec.Raw
    batches = [[R(b"[1, 2]"), NO_RAW, R(b"[1,2]"), R(b"null"), R(b"[3]")],
               [R(b"[3]"), R(b"[4]"), NO_RAW, R(b"[4]")], [], [NO_RAW, NO_RAW]]
    for compact in (True, False):
        for batch in batches:
            assert table.raw(batch, compact).tolist() == naive.raw(batch, compact)
            assert table.strings == naive.strings


def _args(**kw) -> Args:
    return Args(**{k: msgspec.Raw(v) if isinstance(v, bytes) else v for k, v in kw.items()})


def _launch_batches() -> list[list[Args]]:
    g, b = b"[4, 1, 1]", b"[128,1,1]"
    return [
        [_args(), _args(grid=g, block=b), _args(), _args(grid=g, block=b)],
        [_args(grid=b"[4,1,1]", block=b), _args(grid=g), _args(block=b), _args(grid=g)],
        [_args(grid=b"null", block=b"null"), _args(grid=b"[2]", block=g), _args()],
        [_args()], [],
        [_args(registers=b"32", shared_memory=b"0", occupancy=b"50"),
         _args(registers=b"32"), _args(occupancy=b"12.5"), _args(),
         _args(registers=b"32", shared_memory=b"0", occupancy=b"50"),
         _args(shared_memory=b"1024", grid=g, block=b)],
        [_args(registers=b'"inf"', shared_memory=b"0"), _args(occupancy=b"7")],
    ]


def test_launch_texts_are_the_ones_composed_per_kernel_in_the_same_order():
    table, naive = Interner(), _NaiveInterner()
    for args in _launch_batches():
        for composed, text in ((launch_shapes, _shape_text),
                               (launch_resources, _resources_text)):
            got = composed(table, args)
            want = naive.raw([text(a) for a in args], compact=True)
            # A batch without any is given as its number of rows, all absent.
            if (not [a for a in args if a.grid is not NO_RAW or a.block is not NO_RAW]
                    if composed is launch_shapes else
                    not [a for a in args if a.registers is not NO_RAW
                         or a.shared_memory is not NO_RAW]):
                assert got == len(args) and set(want) <= {NO_ID}
                continue
            assert got.tolist() == want
            assert table.strings == naive.strings


def test_composed_shares_strings_with_the_raw_texts():
    table = Interner()
    dims = table.raw([msgspec.Raw(b"[[4,1,1],[128,1,1]]")], compact=True)
    shape = table.composed([[msgspec.Raw(b"[4, 1, 1]")], [msgspec.Raw(b"[128,1,1]")]])
    assert shape.tolist() == dims.tolist() == [0]
    assert table.composed([[NO_RAW], [NO_RAW]]).tolist() == [NO_ID]
    assert table.composed([[NO_RAW], [NO_RAW], [NO_RAW]]).tolist() == [NO_ID]
    assert table.composed([[], []]).tolist() == []


_ADVERSARIAL = [
    "", "\n", "aten::sum", "aten::sum\n", "aten::sum\n\n", "x\naten::sum", "aten::sum\nx",
    "aten::summ", " aten::sum", "aten::", "aten::max", "aten::max_pool2d", "conv",
    "aten::conv2d", "xconvx", "a\nconv", "attention\n", "ProfilerStep#12", "aten::add",
    "flash_attn::fwd", "flash_attn_3::fwd", "flash_attn_2::fwd", "xflash_attn::",
    "FlashAttnFunc", "_C::rotary_embedding", "_C::rotary_embedding\n",
    "_C::rotary_embedding_x", "tex_ts::te_gemm_ts", "xformers::x", "xformers_flash3::y",
    "flashinfer::run", "aten::_scaled_mm", "aten::_scaled_mm\nx", "ÄÖconv", "aten::sum" * 3,
]


def test_concrete_mask_is_a_search_per_name_on_adversarial_names():
    want = [keeps_concrete_inputs(n) for n in _ADVERSARIAL]
    assert concrete_input_mask(_ADVERSARIAL).tolist() == want
    for k in range(len(_ADVERSARIAL)):  # every slice, one name, none
        names = _ADVERSARIAL[k:] + _ADVERSARIAL[:k]
        assert concrete_input_mask(names).tolist() == [keeps_concrete_inputs(n) for n in names]
        assert concrete_input_mask(names[:1]).tolist() == [keeps_concrete_inputs(names[0])]
    assert concrete_input_mask([]).shape == (0,)


@pytest.mark.parametrize("pattern", [
    re.compile(r"^ab$"), re.compile(r"b$"), re.compile(r"(?m)^b$"), re.compile(r"a|b\n"),
    re.compile(r"\d+"), re.compile(r"AB", re.I), re.compile(r"^(?:x|y)z")])
def test_search_mask_is_a_search_per_string(pattern):
    strings = ["ab", "ab\n", "a\nb", "b", "xz", "yz", "zz", "12", "", "AB", "b\nb", "\n"]
    assert search_mask(pattern, strings).tolist() == [
        pattern.search(s) is not None for s in strings]


def test_ids_from_fromiter_are_those_of_asarray():
    values = [0, 5, 2**63 - 1, -1, 7]
    assert np.array_equal(ints(values), np.asarray(values, dtype=np.int64))
    column, big = link_ids(values)
    assert big is None and np.array_equal(column, np.asarray(values, dtype=np.int64))
    assert ints([1, 2**64, None]).tolist() == [1, NO_ID, NO_ID]
    column, big = link_ids([2**64 + 5, 3])
    assert big.tolist() == [True, False] and column[1] == 3
    assert ints([]).shape == link_ids([])[0].shape == (0,)


def _x(name, ts, pid=1, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": 1.0, "args": args}


def test_a_batch_split_by_phase_keeps_the_complete_events_in_order():
    rows = [_x("a", 1), {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                         "ts": 1.5, "args": {"Bytes": 8}},
            _x("b", 2, cat="new_category"), {"ph": "M", "name": "thread_name", "pid": 1,
                                               "tid": 1, "args": {"name": "main"}},
            _x("c", 3, pid=2, tid=5, cat="kernel")]
    builder = ModelBuilder("t.json")
    builder.add(decode(json.dumps({"traceEvents": rows}).encode(), "t.json").events)
    m = builder.finish(TraceFile())
    assert [m.strings[i] for i in m.name.tolist()] == ["a", "b", "c"]
    assert m.kind.tolist() == [1, 13, 6]
    assert m.lane.tolist() == [0, 0, 1] and len(m.memory) == 1


def test_packed_is_asarray_for_ints_and_floats_and_refuses_other_values():
    from tb_diagnostics.trace.columns import packed

    floats = [0.0, -0.0, 1.5, float("nan"), float("inf"), -1e300, 7]
    got = packed(floats, "d")
    assert got.dtype == np.float64 and got.flags.writeable
    assert got.tobytes() == np.asarray(floats, dtype=np.float64).tobytes()
    ids = [0, -1, 2**63 - 1, -(2**63), 12]
    assert np.array_equal(packed(ids, "q"), np.asarray(ids, dtype=np.int64))
    assert np.array_equal(packed(iter([3, 0, 255]), "B", 3), np.array([3, 0, 255], np.uint8))
    assert packed(map(int, "123"), "i", 3).tolist() == [1, 2, 3]
    assert packed([], "q").shape == (0,) and packed(iter([]), "i", 0).dtype == np.int32
    for bad in ([2**63], [1.5], ["12"], [None]):
        with pytest.raises((OverflowError, TypeError, ValueError, struct.error)):
            packed(bad, "q")


def test_kind_of_category_adds_a_category_as_it_is_first_looked_up():
    from tb_diagnostics.trace.categories import KindOfCategory, kind_of

    kinds = KindOfCategory()
    assert kinds["kernel"] == int(kind_of("kernel")) and kinds["no such"] == int(kind_of(""))
    assert dict(kinds) == {"kernel": int(kind_of("kernel")), "no such": int(kind_of(""))}
