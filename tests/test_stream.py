"""Piecewise decoding gives exactly the model of whole-file decoding, whatever the cut points."""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import fields

import numpy as np
import pytest

from conftest import SHARED_TRACES, TraceBuilder
from tb_diagnostics.trace import load_trace, load_trace_bytes
from tb_diagnostics.trace.build import ModelBuilder
from tb_diagnostics.trace.model import MemoryEvents, TraceModel
from tb_diagnostics.trace.stream import NotStreamable, iter_event_batches, read_blocks


def streamed(data: bytes, block: int) -> TraceModel:
    builder = ModelBuilder("x")
    for item in iter_event_batches(read_blocks(io.BytesIO(data), block)):
        if isinstance(item, list):
            builder.add(item)
        else:
            return builder.finish(item)
    raise AssertionError("no top-level document")


STRING_COLUMNS = ("name", "call_stack", "input_dims", "input_types", "concrete_inputs",
                  "launch_shape", "launch_resources")


def assert_same(a: TraceModel, b: TraceModel) -> None:
    """Equal models; string ids may differ (interning order), the strings they name may not."""
    for fld in fields(TraceModel):
        x, y = getattr(a, fld.name), getattr(b, fld.name)
        if fld.name in STRING_COLUMNS:
            assert [a.string(i) for i in x.tolist()] == [b.string(i) for i in y.tolist()]
        elif fld.name == "strings":
            assert set(x) == set(y)
        elif fld.name == "memory":
            for m in fields(MemoryEvents):
                assert np.array_equal(getattr(x, m.name), getattr(y, m.name), equal_nan=True)
        elif isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), fld.name
        elif fld.name != "path":
            assert x == y, fld.name


def sample(pretty: bool) -> bytes:
    t = TraceBuilder(device_properties=[{"id": 0, "name": "G"}])
    for n in range(1, 30):
        t.step(n, n * 100, 100)
        t.op("aten::mm", n * 100 + 5, 40, **{"Input Dims": [[2, 3], [3, 4]]})
        t.launch(n * 100 + 10, 5, "gemm", n * 100 + 20, 50)
    t.events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 150,
                     "args": {"Bytes": 64, "Total Allocated": 64, "Device Type": 1}})
    doc = {**t.document(), "traceName": "after the events", "baseTimeNanoseconds": 5000}
    return json.dumps(doc, indent=2 if pretty else None).encode()


@pytest.mark.parametrize("pretty", [True, False])
@pytest.mark.parametrize("block", [7, 64, 1000, 1 << 20])
def test_any_block_size_gives_the_whole_file_model(pretty, block):
    data = sample(pretty)
    whole = load_trace_bytes(data, "x")
    assert_same(streamed(data, block), whole)
    assert_same(streamed(gzip.compress(data), block), whole)
    assert whole.meta.base_time_ns == 5000


def test_bare_array_streams():
    events = json.loads(sample(True))["traceEvents"]
    data = json.dumps(events).encode()
    assert_same(streamed(data, 50), load_trace_bytes(data, "x"))


@pytest.mark.parametrize("data", [
    b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "na',
    b'{"schemaVersion": 1}',
])
def test_what_cannot_stream_says_so(data):
    with pytest.raises(NotStreamable):
        streamed(data, 16)


def test_an_event_of_the_wrong_shape_is_normalised_while_streaming():
    """One bad event does not send the file to the whole-file decoder, nor reject it."""
    data = (b'{"traceEvents": [{"ph": "X", "ts": "late"}, {"ph": "X", "name": "a", "ts": 3,'
            b' "dur": 1, "args": "oops"}, {"ph": "X", "name": "b", "ts": 5, "dur": 1}]}')
    model = streamed(data, 16)
    assert_same(model, load_trace_bytes(data, "x"))
    assert "1 event(s) normalised: ts not a number" in model.warnings
    assert "1 event(s) normalised: args not an object" in model.warnings


def test_load_trace_falls_back_for_files_that_do_not_stream(tmp_path):
    p = tmp_path / "w.pt.trace.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x"},'
                  b' {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3,'
                  b' "dur": 1}]}')
    m = load_trace(str(p))
    assert [m.name_of(i) for i in range(len(m))] == ["b"]


@pytest.mark.shared
def test_every_shared_trace_streams_to_the_same_model(shared_traces):
    for path in sorted(shared_traces.rglob("*.pt.trace.json.gz")):
        raw = path.read_bytes()
        assert_same(streamed(raw, 1 << 18), load_trace_bytes(raw, "x"))


def test_shared_marker_constant_is_used():
    assert SHARED_TRACES.name == "traces"
