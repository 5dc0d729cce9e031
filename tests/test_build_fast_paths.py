"""The builder's shortcuts give what the general paths give: the time order without
lexsort, raw texts by one join and split, a batch on one thread or of one category in one
look-up, memory samples of one thread, a null Python parent id."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest

from tb_diagnostics.trace.build import ModelBuilder
from tb_diagnostics.trace.columns import take, time_order
from tb_diagnostics.trace.decode import TraceFile, decode
from tb_diagnostics.trace.interner import raw_texts
from tb_diagnostics.trace.model import NO_ID


def _lexsort(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    return np.lexsort((-dur, ts))


@pytest.mark.parametrize("seed", range(5))
def test_time_order_is_lexsort_of_start_then_longer_first(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    ts = np.round(rng.random(n) * 50, 0)  # many shared starts
    dur = np.round(rng.random(n) * 4, 0)
    dur[::7] = -0.0  # -0.0 and 0.0 are one duration, as in lexsort
    ts[::11] = -0.0
    order = time_order(ts, dur)
    assert order is not None and np.array_equal(order, _lexsort(ts, dur))


def test_time_order_of_rows_in_order_is_none_and_take_keeps_the_column():
    ts = np.array([1.0, 2.0, 3.5, 7.0])
    dur = np.array([5.0, 1.0, 0.0, 2.0])
    assert time_order(ts, dur) is None
    assert take(ts, None) is ts
    assert time_order(ts[:1], dur[:1]) is None and time_order(ts[:0], dur[:0]) is None


def test_time_order_sorts_shared_starts_longer_first_then_by_row():
    ts = np.array([3.0, 1.0, 1.0, 1.0, 2.0, 1.0])
    dur = np.array([1.0, 2.0, 5.0, 2.0, 1.0, 5.0])
    # Start 1: rows 2 and 5 (dur 5, row order), then rows 1 and 3 (dur 2); then 4, then 0.
    assert time_order(ts, dur).tolist() == [2, 5, 1, 3, 4, 0]
    # Sorted starts with one tie: the tie alone is reordered.
    ts = np.array([1.0, 2.0, 2.0, 3.0])
    dur = np.array([1.0, 1.0, 3.0, 1.0])
    assert time_order(ts, dur).tolist() == [0, 2, 1, 3]


def test_raw_texts_are_the_bytes_of_each_value():
    values = [msgspec.Raw(b"[[8, 8], []]"), msgspec.Raw(b""), b"[1]", msgspec.Raw(b'"x"')]
    assert raw_texts(values) == [b"[[8, 8], []]", b"", b"[1]", b'"x"']
    assert raw_texts([]) == []
    assert raw_texts([msgspec.Raw(b"")]) == [b""]
    # A value holding the separator (not JSON that a decoder passes): read one by one.
    assert raw_texts([b"a\x00b", b"c"]) == [b"a\x00b", b"c"]


def _events(rows: list[dict]) -> list:
    return decode(json.dumps({"traceEvents": rows}).encode(), "t.json").events


def _x(name: str, ts: float, pid: object = 1, tid: object = 1, cat: str = "cpu_op",
       **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": 1.0, "args": args}


def _memory(ts: float, pid: object, tid: object, nbytes: int) -> dict:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": pid,
            "tid": tid, "ts": ts, "args": {"Bytes": nbytes, "Total Allocated": 64,
                                            "Total Reserved": 128, "Device Type": 0,
                                            "Device Id": -1, "Addr": 4096 + nbytes}}


def _model(batches: list[list[dict]]):
    builder = ModelBuilder("t.json")
    for rows in batches:
        builder.add(_events(rows))
    return builder.finish(TraceFile())


def test_lanes_and_kinds_are_numbered_alike_whatever_the_batches():
    rows = [
        _x("a", 1, tid=7), _x("b", 2, tid=7),  # one thread, one category
        _x("c", 3, tid=9, cat="python_function"), _x("d", 4, tid=7),  # mixed
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 5,
         "dur": 1, "args": {"correlation": 1, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 6,
         "dur": 1, "args": {"correlation": 2, "device": 0, "stream": 7}},
        # The device's pid and tid on a host category: another lane than the kernels'.
        _x("e", 7, pid=0, tid="stream 7"),
        _memory(8, 1, 7, 16), _memory(9, 1, 7, -16), _memory(10, 1, 9, 32),
    ]
    whole = _model([rows])
    for split in ([rows[:2], rows[2:4], rows[4:6], rows[6:7], rows[7:9], rows[9:]],
                  [[r] for r in rows]):
        m = _model(split)
        assert [(ln.pid, ln.tid, ln.is_device) for ln in m.lanes] == \
            [(ln.pid, ln.tid, ln.is_device) for ln in whole.lanes]
        for col in ("kind", "lane", "name", "start"):
            assert np.array_equal(getattr(m, col), getattr(whole, col)), col
        assert np.array_equal(m.memory.lane, whole.memory.lane)
    assert [(ln.pid, ln.tid, ln.is_device) for ln in whole.lanes] == [
        ("1", "7", False), ("1", "9", False), ("0", "stream 7", True),
        ("0", "stream 7", False)]
    assert whole.lane.tolist() == [0, 0, 1, 0, 2, 2, 3]
    # Memory samples on lane 0 (thread 7), then lane 1 (thread 9).
    assert whole.memory.lane.tolist() == [0, 0, 1]
    assert whole.memory.nbytes.tolist() == [16.0, -16.0, 32.0]


def test_a_null_python_parent_id_is_no_parent():
    m = _model([[_x("f", 1, cat="python_function", **{"Python id": 5, "Python parent id": None}),
                 _x("g", 2, cat="python_function", **{"Python id": 6, "Python parent id": 5})]])
    assert m.python_parent.tolist() == [NO_ID, 5]
    m = _model([[_x("f", 1, cat="python_function", **{"Python id": 5,
                                                     "Python parent id": None})]])
    assert m.python_parent.tolist() == [NO_ID]
