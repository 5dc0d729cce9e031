"""TraceModel.name_index answers as the dict of every string did (the last id of a
repeated string), looking names up one at a time."""

from __future__ import annotations

import gc

import pytest

from tb_diagnostics.trace.name_index import NameIndex


class _Model:
    def __init__(self, strings: list[str]) -> None:
        self.strings = strings


CASES = [
    [],
    ["a"],
    ["aten::add", "ProfilerStep#1", "aten::add", "add", "aten::add_", ""],
    ["x\nadd", "add", "add\ny", "add\n", "\nadd", "", "", "ad", "d"],
    ["ab", "b", "abab", "bab", "b\nb", "b"],
]


@pytest.mark.parametrize("strings", CASES)
def test_every_lookup_matches_the_dict(strings):
    want = dict(zip(strings, range(len(strings)), strict=True))
    model = _Model(strings)
    index = NameIndex(model)
    probes = {*strings, "missing", "a", "b", "add", "\n", "", "x", "ab\nab"}
    for name in sorted(probes):
        assert (name in index) == (name in want), name
        assert index.get(name) == want.get(name), name
        if name in want:
            assert index[name] == want[name]
        else:
            with pytest.raises(KeyError):
                index[name]
    assert 3 not in index and index.get(None) is None
    assert dict(index) == want and len(index) == len(want)
    # Once the whole dict is made it answers, the same.
    assert all(index[k] == v for k, v in want.items())


def test_without_the_model_it_still_answers():
    model = _Model(["a", "b", "a"])
    index = NameIndex(model)
    del model
    gc.collect()
    assert index["a"] == 2 and "c" not in index


def test_the_model_builds_it_lazily():
    import json

    from conftest import TraceBuilder
    from tb_diagnostics.trace import load_trace_bytes

    t = TraceBuilder()
    t.step(1, 0, 100)
    t.op("aten::mm", 10, 5)
    m = load_trace_bytes(json.dumps(t.document()).encode(), "t.json")
    assert isinstance(m.name_index, NameIndex)
    assert m.name_index["aten::mm"] == max(i for i, s in enumerate(m.strings) if s == "aten::mm")
    assert m.rows_named({"aten::mm", "nothing"}).size == 1
