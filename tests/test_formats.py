"""Every trace generation loads: categories, time formats, ids, shapes, and bad files."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from conftest import TraceBuilder
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.engine import build_document
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.trace import load_trace, load_trace_bytes
from tb_diagnostics.trace.categories import Kind


def legacy_2021() -> dict:
    """The Jan-2021 shape: Operator/Runtime/Kernel, string tids, `async` flows, no metadata."""
    return {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 25738, "tid": "25738",
         "ts": 1623142623460000, "dur": 1000},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 25738, "tid": "25738",
         "ts": 1623142623460100, "dur": 50, "args": {"External id": 5}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 25738,
         "tid": "25738", "ts": 1623142623460110, "dur": 10,
         "args": {"correlation": 77, "external id": 5}},
        {"ph": "X", "cat": "Kernel", "name": "volta_sgemm", "pid": 0, "tid": "stream 7",
         "ts": 1623142623460200, "dur": 600,
         "args": {"correlation": 77, "external id": 5, "stream": 7, "device": 0}},
        {"ph": "s", "id": 77, "pid": 25738, "tid": 25738, "ts": 1623142623460110,
         "cat": "async", "name": "launch"},
        {"ph": "f", "id": 77, "pid": 0, "tid": "stream 7", "ts": 1623142623460200,
         "cat": "async", "name": "launch", "bp": "e"},
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 25738, "tid": 25738,
         "ts": 1623142623460120, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 4096}},
        {"ph": "X", "cat": "Trace", "ts": 1623142623459990, "dur": 2000, "pid": "Traces",
         "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)"},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 25738, "tid": 0,
         "args": {"name": "python"}},
    ]}


def relative_2024() -> dict:
    """The 2024+ shape: float relative ts, baseTimeNanoseconds, ac2g, cuda_driver, python."""
    return {"schemaVersion": 1, "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1751410836000000000,
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85e9}],
            "traceEvents": [
                {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#6", "pid": 9,
                 "tid": 9, "ts": 1428625731896.179, "dur": 500.5},
                {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 9,
                 "tid": 9, "ts": 1428625731897.0, "dur": 400.0,
                 "args": {"Python id": 3, "Python parent id": 1}},
                {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 9, "tid": 9,
                 "ts": 1428625731900.25, "dur": 6.5, "args": {"correlation": 5}},
                {"ph": "X", "cat": "kernel", "name": "triton_poi_fused", "pid": 0, "tid": 7,
                 "ts": 1428625731910.5, "dur": 100.25,
                 "args": {"correlation": 5, "stream": 7, "device": 0}},
                {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#6", "pid": 0,
                 "tid": 7, "ts": 1428625731910.5, "dur": 100.25},
            ]}


def test_2021_format_categories_string_tids_and_lowercase_external_id():
    m = load_trace_bytes(json.dumps(legacy_2021()).encode(), "legacy.json")
    kinds = {m.name_of(i): Kind(int(m.kind[i])) for i in range(len(m))}
    assert kinds["aten::mm"] == Kind.CPU_OP
    assert kinds["cudaLaunchKernel"] == Kind.RUNTIME
    assert kinds["volta_sgemm"] == Kind.KERNEL
    k = m.name_index["volta_sgemm"]
    krow = int(np.flatnonzero(m.name == k)[0])
    assert m.name_of(int(m.launcher[krow])) == "cudaLaunchKernel"
    assert m.external_id[krow] == 5 and m.stream[krow] == 7 and m.device[krow] == 0
    assert len(m.memory) == 1 and m.memory.nbytes[0] == 4096
    assert m.device_kind == "cuda" and m.device_name is None
    (w,) = SpanAnalysis(m).windows
    assert w.step == 3 and w.device_busy_us == 600 and w.ops == 1


def test_2024_relative_float_times_driver_launches_and_python():
    m = load_trace_bytes(json.dumps(relative_2024()).encode(), "new.json")
    assert m.origin_us == pytest.approx(1751410836000000 + 1428625731896.179)
    a = SpanAnalysis(m)
    (w,) = a.windows
    assert w.step == 6
    assert w.device_busy_us == pytest.approx(100.25)
    assert m.device_name == "NVIDIA H100"
    # The gpu_user_annotation twin is neither a step nor device work.
    assert len(a.host_steps) == 1


def test_bare_array_form_and_missing_metadata():
    events = legacy_2021()["traceEvents"]
    m = load_trace_bytes(json.dumps(events).encode(), "bare.json")
    assert len(m) == 5 and m.meta.device_properties == []


def test_gzip_is_sniffed_not_guessed_from_the_name(tmp_path):
    data = json.dumps(legacy_2021()).encode()
    plain_named_gz = tmp_path / "a.pt.trace.json.gz"
    plain_named_gz.write_bytes(data)
    gz_named_plain = tmp_path / "b.pt.trace.json"
    gz_named_plain.write_bytes(gzip.compress(data))
    assert len(load_trace(str(plain_named_gz))) == len(load_trace(str(gz_named_plain))) == 5


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', "truncated JSON"),
    (gzip.compress(b'{"traceEvents": []}')[:-12], "truncated gzip"),
    (b"\x1f\x8b\x08\x00garbage", "gzip"),
    (b"[1, 2, 3]", "not a trace"),
    (b"42", "not a trace"),
    (b'{"traceEvents": 5}', "traceEvents is not a list"),
    (b"{not json}", "not valid JSON"),
])
def test_bad_files_raise_an_error_naming_the_file(content, problem):
    with pytest.raises(TraceLoadError) as err:
        load_trace_bytes(content, "run/worker0.1.pt.trace.json")
    assert err.value.path == "run/worker0.1.pt.trace.json"
    assert problem in err.value.problem
    assert str(err.value).startswith("run/worker0.1.pt.trace.json: ")


def test_events_with_unusable_fields_are_skipped_not_fatal():
    doc = legacy_2021()
    doc["traceEvents"] += [
        {"ph": "X", "cat": "cpu_op", "name": "bad-ts", "pid": 1, "tid": 1, "ts": "soon"},
        {"ph": "X", "cat": "cpu_op", "name": "nan-ts", "pid": 1, "tid": 1, "ts": None},
        {"ph": "X", "cat": "weird", "name": "neg", "pid": 1, "tid": 1, "ts": 1623142623460001,
         "dur": -5},
        {"ph": "Q", "name": "unknown phase"},
    ]
    m = load_trace_bytes(json.dumps(doc).encode(), "x.json")
    assert "bad-ts" not in m.name_index
    assert any("without a usable ts" in w for w in m.warnings)
    neg = int(np.flatnonzero(m.name == m.name_index["neg"])[0])
    assert m.dur[neg] == 0 and m.kind[neg] == Kind.OTHER


def test_a_bad_file_does_not_stop_the_others(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.write(tmp_path / "run" / "worker0.1.pt.trace.json")
    (tmp_path / "run" / "worker0.2.pt.trace.json").write_bytes(b'{"traceEvents": [{"ph"')
    doc = build_document(scan_logdir(str(tmp_path)))
    good, bad = doc["runs"][0]["workers"][0]["spans"]
    assert good["steps"] and not good["errors"]
    assert bad["steps"] == [] and bad["errors"] == [
        "run/worker0.2.pt.trace.json: truncated JSON (the profiler may still be writing this "
        "file)"]


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file"),
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1', "truncated JSON"),
    (gzip.compress(b'{"traceEvents": []}')[:-12], "truncated gzip"),
    (b"\x1f\x8b\x08\x00garbage", "gzip"),
    (b"[1, 2, 3]", "not a trace"),
    (b'{"traceEvents": 5}', "traceEvents is not a list"),
])
def test_bad_files_on_disk_give_the_same_messages(tmp_path, content, problem):
    p = tmp_path / "w.1.pt.trace.json"
    p.write_bytes(content)
    with pytest.raises(TraceLoadError) as err:
        load_trace(str(p), display_path="r/w.1.pt.trace.json")
    assert err.value.path == "r/w.1.pt.trace.json"
    assert problem in err.value.problem


def test_files_above_the_size_limit_are_refused_with_a_message(tmp_path, monkeypatch):
    p = tmp_path / "w.1.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(legacy_2021()).encode() + b" " * 3_000_000))
    monkeypatch.setenv("TB_DIAGNOSTICS_MAX_TRACE_MB", "1")
    with pytest.raises(TraceLoadError, match="larger than the 1 MiB limit"):
        load_trace(str(p))
    monkeypatch.setenv("TB_DIAGNOSTICS_MAX_TRACE_MB", "10")
    assert len(load_trace(str(p))) == 5
