"""trace.string_table.StringTable reads as the list of strings it holds as one text."""

from __future__ import annotations

import json
import pickle
import re
import sys

import numpy as np
import pytest

from conftest import TraceBuilder
from tb_diagnostics.analysis.step_names import step_numbers
from tb_diagnostics.trace import load_trace_bytes
from tb_diagnostics.trace.name_match import ids_matching
from tb_diagnostics.trace.string_table import StringTable, string_list, strings_nbytes

CASES = [
    [],
    [""],
    ["", ""],
    ["a"],
    ["aten::add", "", "ProfilerStep#7", "x\ny", "\n", "é·ü", "中文", "a\n"],
    [f"ProfilerStep#{k}" for k in range(10_000)],
    [f"s{k}\n" if k % 997 == 0 else f"s{k}" for k in range(9_000)],
]


@pytest.mark.parametrize("strings", CASES)
def test_it_reads_as_the_list(strings):
    t = StringTable(strings)
    n = len(strings)
    assert len(t) == n and list(t) == strings and t == strings and t == tuple(strings)
    assert [t[i] for i in range(n)] == strings
    assert [t[-i - 1] for i in range(n)] == strings[::-1]
    assert t[1:5] == strings[1:5] and t[::-3] == strings[::-3]
    ids = np.asarray([i for i in range(n) if i % 3 == 0] + ([0, 0] if n else []))
    assert t.take(ids) == [strings[i] for i in ids.tolist()]
    assert t.take(np.zeros(0, dtype=np.int32)) == []
    for bad in (n, -n - 1):
        with pytest.raises(IndexError):
            t[bad]
    with pytest.raises(IndexError):
        t.take([n])
    assert pickle.loads(pickle.dumps(t)) == t
    assert string_list(t) == strings and string_list(strings) is strings
    if n:
        assert strings[-1] in t and t.index(strings[-1]) == strings.index(strings[-1])
    assert "never there" not in t and 3 not in t
    assert t.text == "\n".join(strings)
    assert t.starts.tolist() == [sum(len(s) + 1 for s in strings[:i]) for i in range(n + 1)]
    assert t != [*strings, "more"]


def test_a_loaded_model_holds_one_and_searches_it_as_a_list():
    tr = TraceBuilder()
    for k in range(30):
        tr.step(k, 100 * k, 90)
        tr.op("aten::add", 100 * k + 1, 5)
        tr.op("nccl:all_reduce", 100 * k + 10, 5)
    m = load_trace_bytes(json.dumps(tr.document()).encode(), "t.json")
    assert isinstance(m.strings, StringTable)

    class _Listed:  # the same strings as a list
        def __init__(self, strings: list[str]) -> None:
            self.strings = strings

    listed = _Listed(list(m.strings))
    for pattern in (r"^ProfilerStep#(\d+)$", r"nccl", r"\d", r"^aten::add$"):
        p = re.compile(pattern)
        assert ids_matching(m, p).tolist() == ids_matching(listed, p).tolist()
    ids = m.name_ids_matching(re.compile(r"^ProfilerStep#(\d+)$"))
    got, want = step_numbers(m.strings, ids), step_numbers(list(m.strings), ids)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


@pytest.mark.parametrize("names", [
    [f"ProfilerStep#{k}" for k in range(3000)],
    ["ProfilerStep#007", "ProfilerStep#0", "ProfilerStep#1234567890123456789",
     "ProfilerStep#999999999999999", "ProfilerStep#12"],
    ["ProfilerStep#5\n", "ProfilerStep#6"],  # $ allows one newline: read one by one
    ["ProfilerStep#٣", "ProfilerStep#4"],  # other scripts' digits: not ASCII
    [],
])
def test_step_numbers_from_the_text_are_those_of_the_list(names):
    strings = ["aten::add", *names, "cudaLaunchKernel"]
    ids = np.arange(1, len(names) + 1, dtype=np.int32)
    got = step_numbers(StringTable(strings), ids)
    want = step_numbers(strings, ids)
    assert got[0].dtype == want[0].dtype == np.int32
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert got[1].dtype == np.int64


def test_its_memory_is_the_text_and_an_offset_per_string():
    # What the tab's model cache budgets (server.loader.model_nbytes): a table of 10⁵
    # step names is its text and offsets, a fraction of the same names as a list.
    names = [f"ProfilerStep#{k}" for k in range(100_000)]
    table = StringTable(names)
    assert strings_nbytes(table) == sys.getsizeof(table.text) + 8 * (len(names) + 1)
    assert strings_nbytes(names) == sum(len(s) + 56 for s in names)
    assert strings_nbytes(table) < strings_nbytes(names) / 2
    assert strings_nbytes(StringTable([])) == sys.getsizeof("") + 8
