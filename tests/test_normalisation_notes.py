"""Every normalisation the loader or the step finder makes is counted in the span's notes,
and none changes a figure silently (issue 22, case 14): ids beyond int64 still link,
steps that share a number stay apart, a step nested in a step does not cut it short, a
file of string timestamps is an error, and missing, NaN and absurd durations are counted.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from conftest import TraceBuilder
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.engine import build_document
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.rules import run_rules
from tb_diagnostics.trace import load_trace, load_trace_bytes

RENUMBERED = "event(s) normalised: id beyond int64 (renumbered, links kept)"


def loads(doc: Any, **dumps: Any) -> Any:
    return load_trace_bytes(json.dumps(doc, **dumps).encode(), "run/w.1.pt.trace.json")


def x(name: str, ts: Any, dur: Any, cat: str = "user_annotation", **kw: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            **kw}


# ---- a. ids beyond int64 -----------------------------------------------------------------

def _launch_across_steps(corr: int, ext: int, flow: int | None = None) -> list[dict]:
    """Step 1 launches a kernel that runs in step 2's host time: only the launch link
    charges it to step 1 (and stretches step 1 to the kernel's end)."""
    launch_args = {"External id": ext} if flow is not None else {"correlation": corr,
                                                                 "External id": ext}
    kernel_args = {"External id": ext, "device": 0, "stream": 7}
    if flow is None:
        kernel_args["correlation"] = corr
    events = [
        x("ProfilerStep#1", 0, 100), x("ProfilerStep#2", 100, 100),
        x("aten::mm", 5, 40, "cpu_op", args={"External id": ext}),
        x("cudaLaunchKernel", 10, 5, "cuda_runtime", args=launch_args),
        {**x("gemm", 120, 150, "kernel", args=kernel_args), "pid": 0, "tid": 7},
    ]
    if flow is not None:  # the launch linked by its flow only (no correlation in args)
        events += [{"ph": "s", "cat": "ac2g", "name": "launch", "id": flow, "pid": 1,
                    "tid": 1, "ts": 10},
                   {"ph": "f", "cat": "ac2g", "name": "launch", "id": flow, "pid": 0,
                    "tid": 7, "ts": 120, "bp": "e"}]
    return events


def _windows(model: Any) -> list[tuple[int | None, float, float, int]]:
    return [(w.step, w.start, w.end, w.kernels) for w in SpanAnalysis(model).windows]


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
@pytest.mark.parametrize("flow", [False, True], ids=["args", "flows"])
def test_ids_beyond_int64_still_link_the_launch_and_are_counted(lenient, flow):
    big, small = 2**64 + 5, 5
    events = _launch_across_steps(big, 2**70, flow=2**64 + 9 if flow else None)
    control = _launch_across_steps(small, 7, flow=9 if flow else None)
    if lenient:  # one stray string ts sends the file down the lenient decoder
        events.append(x("odd", "1", 1, "cpu_op"))
        control.append(x("odd", "1", 1, "cpu_op"))
    model = loads({"traceEvents": events})
    assert _windows(model) == _windows(loads({"traceEvents": control}))
    assert _windows(model)[0][1:] == (0.0, 270.0, 1)  # step 1 owns the kernel it launched
    kernel = model.name_index["gemm"]
    row = int((model.name == kernel).nonzero()[0][0])
    assert model.name_of(int(model.launcher[row])) == "cudaLaunchKernel"
    # The cpu_op, the launch and the kernel share one External id, still one id.
    assert len(set(model.external_id[model.external_id >= 0].tolist())) == 1
    count = 5 if flow else 3  # the cpu_op, the launch, the kernel; and the two flows
    assert f"{count} {RENUMBERED}" in model.warnings


def test_ids_in_the_uint64_range_are_renumbered_too():
    model = loads({"traceEvents": _launch_across_steps(2**63 + 1, 2**64 - 1)})
    assert _windows(model)[0][1:] == (0.0, 270.0, 1)
    assert f"3 {RENUMBERED}" in model.warnings


def _shift_ids(doc: dict, by: int) -> int:
    """Every correlation, External id and launch flow id of the trace moved by ``by``."""
    n = 0
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        for key in ("correlation", "External id", "external id"):
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] += by
                n += 1
        if e.get("cat") == "ac2g" and isinstance(e.get("id"), int):
            e["id"] += by
    return n


def _figures(model: Any) -> tuple[list, list]:
    a = SpanAnalysis(model)
    walls = [(w.step, round(w.wall_us, 3), w.kernels, round(w.device_busy_us, 3))
             for w in a.windows]
    return walls, sorted((f.rule, f.message) for f in run_rules(a))


V100 = "kineto_resnet50_v100_dataloader_workers0/worker0.1623143089861.pt.trace.json.gz"


@pytest.mark.shared
def test_a_real_trace_with_every_id_shifted_past_64_bits_keeps_its_figures(
        shared_traces, tmp_path):
    src = shared_traces / V100
    doc = json.loads(gzip.decompress(src.read_bytes()))
    assert _shift_ids(doc, 2**64) > 10_000
    shifted = tmp_path / "run" / "worker0.1.pt.trace.json"
    shifted.parent.mkdir()
    shifted.write_text(json.dumps(doc))
    original, moved = load_trace(str(src)), load_trace(str(shifted))
    assert _figures(moved) == _figures(original)
    assert _figures(moved)[0][0][:2] == (5, 187948.0)  # step 5 as in the original
    assert any(w.endswith(RENUMBERED) for w in moved.warnings)


# ---- b, c. steps that share a number, steps inside a step --------------------------------

def test_six_steps_with_one_number_stay_six_steps_with_a_note(tmp_path):
    t = TraceBuilder(device_properties=[{"id": 0, "name": "G"}])
    for k in range(6):
        t.step(7, k * 1000.0, 900)
        t.op("aten::mm", k * 1000.0 + 10, 100 + k)
        t.launch(k * 1000.0 + 20, 5, "gemm", k * 1000.0 + 30, 500)
    t.write(tmp_path / "run" / "w.1.pt.trace.json")
    span = build_document(scan_logdir(str(tmp_path)))["runs"][0]["workers"][0]["spans"][0]
    assert [s["step"] for s in span["steps"]] == [7] * 6
    assert [s["kernels"] for s in span["steps"]] == [1] * 6
    assert [s["wall_us"] for s in span["steps"]] == [1000.0] * 5 + [900.0]
    assert "6 ProfilerStep#7 events: kept apart by time, each its own step" in span["notes"]


def test_several_repeated_numbers_are_named_in_one_note():
    events = [x(f"ProfilerStep#{n}", k * 100, 90) for k, n in enumerate([1, 2, 1, 2, 3, 3])]
    a = SpanAnalysis(loads({"traceEvents": events}))
    assert [w.step for w in a.windows] == [1, 2, 1, 2, 3, 3]
    assert a.host_steps.notes == (
        "6 ProfilerStep# events share 3 numbers (#1 ×2, #2 ×2, #3 ×2): kept apart by time, "
        "each its own step",)


def test_a_step_nested_in_a_step_does_not_cut_it_short(tmp_path):
    t = TraceBuilder(device_properties=[{"id": 0, "name": "G"}])
    t.step(5, 0, 10_000)
    t.step(6, 10, 1_000)  # an artefact: the profiler's steps follow one another
    t.op("aten::mm", 20, 8_000)
    t.step(7, 10_000, 5_000)
    t.op("aten::mm", 10_010, 4_000)
    t.write(tmp_path / "run" / "w.1.pt.trace.json")
    span = build_document(scan_logdir(str(tmp_path)))["runs"][0]["workers"][0]["spans"][0]
    assert [(s["step"], s["wall_us"]) for s in span["steps"]] == [(5, 10_000.0), (7, 5_000.0)]
    assert ("1 ProfilerStep# event(s) inside another step: not steps, and the enclosing "
            "step keeps its length") in span["notes"]


def test_a_step_recorded_on_two_threads_counts_once_with_a_note():
    events = [x("ProfilerStep#1", 0, 100), {**x("ProfilerStep#1", 1, 100), "tid": 2},
              x("ProfilerStep#2", 100, 100), {**x("ProfilerStep#2", 101, 99), "tid": 2}]
    a = SpanAnalysis(loads({"traceEvents": events}))
    assert [(w.step, w.start, w.end) for w in a.windows] == [(1, 0.0, 100.0),
                                                               (2, 100.0, 200.0)]
    assert a.host_steps.notes == (
        "2 ProfilerStep# event(s) recorded twice (the same number, overlapping in time, "
        "e.g. on two threads): counted once",)


# ---- d. timestamps that are not numbers --------------------------------------------------

def _stringify_ts(doc: dict, every: int = 1) -> int:
    n = 0
    for k, e in enumerate(doc["traceEvents"]):
        if "ts" in e and k % every == 0:
            e["ts"] = str(e["ts"])
            n += 1
    return n


def test_a_file_of_string_timestamps_is_an_error_not_a_cpu_only_trace(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.launch(10, 5, "gemm", 20, 50)
    doc = trace.document()
    _stringify_ts(doc)
    with pytest.raises(TraceLoadError,
                       match=r"timestamps are not numbers \(ts is not a number in 3 of 3 "
                             r"events\)"):
        loads(doc)


def test_device_events_without_usable_timestamps_are_an_error(trace):
    trace.step(1, 0, 1000)
    for k in range(10):
        trace.op("aten::add", 10 + k * 50, 20)
    trace.launch(600, 5, "gemm", 620, 50)
    doc = trace.document()
    for e in doc["traceEvents"]:
        if e["cat"] == "kernel":
            e["ts"] = str(e["ts"])
    with pytest.raises(TraceLoadError, match="the device events have no usable timestamps"):
        loads(doc)


def test_a_few_stray_string_timestamps_are_still_skipped_and_counted(trace):
    trace.step(1, 0, 1000)
    for k in range(10):
        trace.op("aten::add", 10 + k * 50, 20)
    trace.launch(600, 5, "gemm", 620, 50)
    doc = trace.document()
    doc["traceEvents"][3]["ts"] = "60"
    model = loads(doc)
    assert "1 event(s) normalised: ts not a number" in model.warnings
    assert "1 complete event(s) without a usable ts were skipped" in model.warnings


@pytest.mark.shared
def test_the_v100_trace_with_string_timestamps_is_an_error(shared_traces, tmp_path):
    doc = json.loads(gzip.decompress((shared_traces / V100).read_bytes()))
    n = _stringify_ts(doc)
    with pytest.raises(TraceLoadError, match=f"ts is not a number in {n} of "):
        loads(doc)


# ---- e. missing, NaN, infinite and absurd durations --------------------------------------

def _with_bad_dur(dur: Any = None, *, drop: bool = False) -> dict:
    events = [x("ProfilerStep#1", 0, 1000), x("aten::mm", 10, 100, "cpu_op"),
              x("aten::add", 200, dur, "cpu_op")]
    if drop:
        del events[-1]["dur"]
    return {"traceEvents": events}


@pytest.mark.parametrize("doc, notes", [
    (_with_bad_dur(drop=True), ["complete event without a usable dur (taken as 0)"]),
    (_with_bad_dur(None), ["complete event without a usable dur (taken as 0)"]),
    (_with_bad_dur("12"), ["complete event without a usable dur (taken as 0)"]),
    (_with_bad_dur(math.nan), ["NaN or Infinity, which JSON does not have (read as null)",
                               "complete event without a usable dur (taken as 0)"]),
    (_with_bad_dur(math.inf), ["NaN or Infinity, which JSON does not have (read as null)",
                               "complete event without a usable dur (taken as 0)"]),
    (_with_bad_dur(1e300), ["negative or absurd dur (taken as 0)"]),
    (_with_bad_dur(1e16), ["negative or absurd dur (taken as 0)"]),  # 317 years
    (_with_bad_dur(-5), ["negative or absurd dur (taken as 0)"]),
], ids=["missing", "null", "string", "NaN", "Infinity", "1e300", "1e16", "negative"])
def test_unusable_durations_are_counted_and_taken_as_zero(doc, notes):
    model = loads(doc)  # json.dumps writes NaN and Infinity, as Python writers do
    assert [f"1 event(s) normalised: {n}" for n in notes] == [
        w for w in model.warnings if "dur" in w or "NaN" in w]
    assert model.dur[model.name == model.name_index["aten::add"]].tolist() == [0.0]
    (w,) = SpanAnalysis(model).windows
    assert (w.start, w.end) == (0.0, 1000.0)


def test_a_long_but_plausible_duration_is_kept():
    # Longer than a day, but not longer than the trace (its first start to its last).
    events = [x("train", 0, 90_000e6, "user_annotation"),
              x("aten::mm", 90_000e6 + 10, 10, "cpu_op")]
    model = loads({"traceEvents": events})
    assert model.warnings == [] and model.dur.max() == 90_000e6


def test_nan_inside_a_string_is_left_alone():
    events = [x("NaN Infinity", 0, 100, "cpu_op"), x("aten::add", 10, math.nan, "cpu_op")]
    model = loads({"traceEvents": events})
    assert "NaN Infinity" in model.name_index
    assert "1 event(s) normalised: NaN or Infinity, which JSON does not have (read as null)" \
        in model.warnings


def test_a_streamed_file_with_nan_loads_too(tmp_path):
    events = [x("aten::add", float(k), 0.5, "cpu_op") for k in range(20_000)]
    events[12_345]["dur"] = math.nan
    path = tmp_path / "w.1.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    model = load_trace(str(path))
    assert len(model) == 20_000
    assert "1 event(s) normalised: complete event without a usable dur (taken as 0)" \
        in model.warnings


def test_the_notes_reach_the_report_through_the_cache(tmp_path):
    from tb_diagnostics.cache import TraceCache

    Path(tmp_path / "run").mkdir()
    (tmp_path / "run" / "w.1.pt.trace.json").write_text(json.dumps(
        {"traceEvents": _launch_across_steps(2**64 + 5, 2**70)}))
    cache = TraceCache(tmp_path / "cache")
    for _ in range(2):  # cold, then from the cached model and results
        span = build_document(scan_logdir(str(tmp_path / "run")), cache=cache)[
            "runs"][0]["workers"][0]["spans"][0]
        assert f"3 {RENUMBERED}" in span["notes"]
        assert span["steps"][0]["wall_us"] == 270.0


def test_the_counts_and_renumbered_ids_are_the_same_on_several_cores(tmp_path, monkeypatch):
    """Each range of a parallel load renumbers and counts on its own: the merged model
    is still the one-core model, notes included."""
    from test_parallel_load import assert_same_model, on_cores, one_core, synthetic

    path = Path(synthetic(tmp_path))
    doc = json.loads(path.read_text())
    _shift_ids(doc, 2**64)
    for e in doc["traceEvents"][::97]:
        if e.get("ph") == "X":
            e.pop("dur")
    doc["traceEvents"][500]["ts"] = "500"
    path.write_text(json.dumps(doc, indent=1))
    model = on_cores(str(path), 3, monkeypatch)
    assert_same_model(model, one_core(str(path)))
    assert any(w.endswith(RENUMBERED) for w in model.warnings)
    assert any("without a usable dur" in w for w in model.warnings)
