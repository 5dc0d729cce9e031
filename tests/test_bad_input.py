"""The bad-input corpus: every case loads or gives a clear error naming the file, and the
other files of the log dir are unaffected. Generated here, never stored as large files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import TraceBuilder, tree_digest
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.engine import build_document
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.trace import load_trace, load_trace_bytes


def good_trace() -> TraceBuilder:
    t = TraceBuilder(device_properties=[{"id": 0, "name": "G"}])
    t.step(1, 0, 100)
    t.op("aten::mm", 5, 40)
    t.launch(10, 5, "gemm", 20, 50)
    return t


def event(**kw) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0,
            "dur": 2.0, **kw}


def loads(doc) -> object:
    return load_trace_bytes(json.dumps(doc).encode(), "run/w.1.pt.trace.json")


@pytest.mark.parametrize("events, problem", [
    ([1, "x", None], "unexpected JSON shape"),
    ([event(), [event()]], "unexpected JSON shape"),
])
def test_events_that_are_not_objects(events, problem):
    with pytest.raises(TraceLoadError, match=problem):
        loads({"traceEvents": events})


@pytest.mark.parametrize("bad", [
    {"ts": None}, {"ts": "12"}, {"ts": -5.0, "dur": "x"}, {"dur": None}, {"dur": -3},
    {"ts": 1e308, "dur": 1e308}, {"ph": "Z"}, {"cat": "nonsense"}, {"cat": 7},
    {"args": {"correlation": "abc", "External id": 2**70}},
    {"args": {"correlation": 1.5, "Python parent id": "x"}}, {"pid": [1], "tid": {"a": 1}},
    {"id": 2**80},
])
def test_odd_fields_are_skipped_or_normalised(bad):
    model = loads({"traceEvents": [event(name="ok"), event(**bad)]})
    assert "ok" in model.name_index
    SpanAnalysis(model).windows  # noqa: B018 - the analysis runs on what loaded


def test_duplicated_unsorted_and_overlapping_events_keep_the_figures():
    t = good_trace()
    base = SpanAnalysis(loads(t.document())).windows[0]
    doc = t.document()
    doc["traceEvents"] = list(reversed(doc["traceEvents"])) + doc["traceEvents"]
    doc["traceEvents"].append(event(name="aten::overlap", ts=30.0, dur=100.0))  # crosses mm
    w = SpanAnalysis(loads(doc)).windows[0]
    assert (w.start, w.end, w.device_busy_us) == (base.start, base.end, base.device_busy_us)


def test_deeply_nested_args_are_refused_with_a_message():
    depth = 50_000
    raw = (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "args": {"x": '
           + b"[" * depth + b"]" * depth + b"}}]}")
    with pytest.raises(TraceLoadError, match="nested too deeply"):
        load_trace_bytes(raw, "deep.json")


def test_deeply_nested_args_through_the_streaming_reader(tmp_path):
    depth = 50_000
    p = tmp_path / "w.1.pt.trace.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "args": {"x": '
                  + b"[" * depth + b"]" * depth + b"}}]}")
    with pytest.raises(TraceLoadError, match="nested too deeply"):
        load_trace(str(p))


def test_a_100_mb_name_loads_cut_to_its_first_mib(tmp_path):
    p = tmp_path / "w.1.pt.trace.json"
    big = "x" * (100 << 20)
    p.write_text(json.dumps({"traceEvents": [event(name=big), event(name="small", ts=5.0)]}))
    m = load_trace(str(p))
    assert len(m) == 2
    assert max(m.strings, key=len) == "x" * (1 << 20) + "…"
    assert any("a string longer than 1 MiB cut" in w for w in m.warnings)


@pytest.mark.slow
def test_a_million_tiny_events(tmp_path):
    p = tmp_path / "w.1.pt.trace.json"
    with open(p, "w") as fh:
        fh.write('{"traceEvents": [')
        fh.write(",".join(f'{{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":{i},'
                          f'"dur":1}}' for i in range(1_000_000)))
        fh.write("]}")
    m = load_trace(str(p))
    assert len(m) == 1_000_000
    # A top-level op repeated back to back is a benchmark loop: one iteration per call
    # (the issue-23 rule); every op is in a window either way.
    windows = SpanAnalysis(m).windows
    assert sum(w.ops for w in windows) == 1_000_000


def test_names_with_markup_quotes_newlines_rtl_and_bad_utf8(tmp_path):
    names = ["<script>alert(1)</script>", '<img src=x onerror="alert(1)">', 'a "quoted" \\ name',
             "two\nlines\ttab", "\u202eevil\u202c rtl", "名前 😀"]
    doc = good_trace().document()
    doc["traceEvents"] += [event(name=n, ts=10.0 + i) for i, n in enumerate(names)]
    raw = json.dumps(doc, ensure_ascii=False).encode()
    raw = raw.replace(b"aten::mm", b"aten::\xff\xfemm")  # bytes that are not UTF-8
    p = tmp_path / "run" / "w.1.pt.trace.json"
    p.parent.mkdir()
    p.write_bytes(raw)
    m = load_trace(str(p))
    for n in names:
        assert n in m.name_index  # kept exactly, as data
    assert "aten::\ufffd\ufffdmm" in m.name_index
    span = build_document(scan_logdir(str(tmp_path)))["runs"][0]["workers"][0]["spans"][0]
    assert span["errors"] == [] and span["steps"]


def test_a_file_growing_while_it_is_read(tmp_path):
    """The profiler is still writing: the scan sees one size, the read another."""
    t = good_trace()
    full = json.dumps(t.document()).encode()
    p = tmp_path / "run" / "w.1.pt.trace.json"
    p.parent.mkdir()
    p.write_bytes(full[: len(full) // 2])
    ld = scan_logdir(str(tmp_path))
    p.write_bytes(full)  # finished between the scan and the parse
    span = build_document(ld)["runs"][0]["workers"][0]["spans"][0]
    assert span["errors"] == [] and span["steps"][0]["step"] == 1
    p.write_bytes(full[: len(full) // 2])  # or caught half-way: a message, not a crash
    span = build_document(scan_logdir(str(tmp_path)))["runs"][0]["workers"][0]["spans"][0]
    assert span["errors"] == [
        "run/w.1.pt.trace.json: truncated JSON (the profiler may still be writing this file)"]


def test_a_corpus_log_dir_reports_each_bad_file_and_modifies_nothing(tmp_path):
    good_trace().write(tmp_path / "ok" / "w.1.pt.trace.json")
    bad = {
        "empty": b"",
        "truncated": json.dumps(good_trace().document()).encode()[:-40],
        "list": b"[1, 2]",
        "number": b"3",
        "no_events": b'{"traceEvents": "no"}',
    }
    for name, data in bad.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "w.1.pt.trace.json").write_bytes(data)
    before = tree_digest(tmp_path)
    doc = build_document(scan_logdir(str(tmp_path)))
    assert tree_digest(tmp_path) == before
    spans = {r["run"]: r["workers"][0]["spans"][0] for r in doc["runs"]}
    assert spans["ok"]["errors"] == [] and spans["ok"]["steps"]
    for name in bad:
        (err,) = spans[name]["errors"]
        assert err.startswith(f"{name}/w.1.pt.trace.json: ")
    assert np.isfinite(spans["ok"]["steps"][0]["device_busy"])
