"""The critical path of every step (issue 27 items 1, 2, 5): each edge kind on a hand-made
trace, exact segments; on every step of every shared trace the path's length is the
step's wall, its kinds add up and every segment is an event of the trace; the physics of
the shared pairs and of the TimeSformer inference step."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from rules.conftest import SHARED_TRACES, TraceBuilder, shared_analysis, shared_file_ids

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.critpath import KIND_NAMES, critical_paths
from tb_diagnostics.report.critical_path import TOP_SEGMENTS, critical_path_document
from tb_diagnostics.trace import load_trace

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
PAIR = SHARED_TRACES.parent / "pairs" / "h100_toyblocks_eager_vs_compile"


def segments(a: SpanAnalysis, k: int = 0) -> list[tuple[str, str, float, float]]:
    """Step ``k``'s path as (kind, event name, start, duration), in time order."""
    cp = critical_paths(a)
    sl = cp.step(k)
    m = a.model
    return [(KIND_NAMES[kind], m.name_of(r), round(s, 3), round(d, 3)) for kind, r, s, d in
            zip(cp.kind[sl].tolist(), cp.row[sl].tolist(), cp.start[sl].tolist(),
                cp.dur[sl].tolist(), strict=True)]


def _launch_head(b: TraceBuilder) -> None:
    """Step 1 from 0 to 100 µs: ``aten::mm`` at 5-15 launches (at 10) ``k1``, 18-518."""
    b.step(1, 0, 100)
    b.op("aten::mm", 5, 10)
    b.launch("k1", 10, 18, 500)


HEAD = [("host", "ProfilerStep#1", 0.0, 5.0), ("host", "aten::mm", 5.0, 5.0),
        ("latency", "cudaLaunchKernel", 10.0, 8.0), ("device", "k1", 18.0, 500.0)]


def test_a_kernel_waiting_for_its_launch(tmp_path):
    b = TraceBuilder(tmp_path)
    _launch_head(b)
    a = b.analysis()
    # The kernel ends the step (after the host's end): back through its launch call's
    # start, then the dispatch of the op that made the call, then the step before it.
    assert critical_paths(a).ended_by == ["device"]
    assert segments(a) == HEAD


def test_a_kernel_waiting_for_the_previous_kernel_on_its_stream(tmp_path):
    b = TraceBuilder(tmp_path)
    _launch_head(b)
    b.op("aten::add", 25, 10)
    b.launch("k2", 30, 519, 100)  # launched at 30, queued behind k1
    a = b.analysis()
    # k2 started 1 µs after k1 ended, 489 µs after its launch: the stream bound it.
    assert segments(a) == [*HEAD, ("latency", "k2", 518.0, 1.0), ("device", "k2", 519.0, 100.0)]


def test_a_kernel_waiting_for_an_event_on_another_stream(tmp_path):
    b = TraceBuilder(tmp_path)
    _launch_head(b)
    b.op("aten::add", 25, 10)
    b.runtime("cudaStreamWaitEvent", 28, 1)
    b.launch("k2", 30, 518.5, 100, stream=8)  # an idle stream, but it waited for k1
    a = b.analysis()
    assert segments(a) == [*HEAD, ("latency", "k2", 518.0, 0.5), ("device", "k2", 518.5, 100.0)]


def test_a_host_waiting_in_a_sync(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 600)
    b.op("aten::mm", 5, 10)
    b.launch("k1", 10, 18, 500)
    b.runtime("cudaStreamSynchronize", 100, 420)  # returns at 520, 2 µs after k1 ends
    b.op("aten::relu", 530, 30)  # CPU work after the sync, no launch
    a = b.analysis()
    # The host ends the step; back from there it meets the sync's return, which binds to
    # k1: the sync's wait is not on the path, the device work it waited for is.
    assert critical_paths(a).ended_by == ["host"]
    assert segments(a) == [*HEAD, ("host", "cudaStreamSynchronize", 518.0, 2.0),
                           ("host", "ProfilerStep#1", 520.0, 80.0)]


def test_a_host_waiting_for_the_dataloader(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 450)
    b.annotation(LOADER, 5, 400)
    b.op("aten::mm", 410, 10)
    b.launch("k1", 415, 423, 100)
    a = b.analysis()
    # Back from the kernel to its launch, the op, then the host time before the op: the
    # step's, except the DataLoader's call (input).
    assert segments(a) == [("host", "ProfilerStep#1", 0.0, 5.0), ("input", LOADER, 5.0, 400.0),
                           ("host", "ProfilerStep#1", 405.0, 5.0),
                           ("host", "aten::mm", 410.0, 5.0),
                           ("latency", "cudaLaunchKernel", 415.0, 8.0),
                           ("device", "k1", 423.0, 100.0)]


def test_a_host_waiting_in_a_collective_on_its_own_thread_or_another(tmp_path):
    """A collective's host call on the training thread is comm; so is the time a thread
    that records nothing but its step spends while gloo runs the collective on its own
    thread (the training thread waits for it)."""
    b = TraceBuilder(tmp_path / "own")
    b.step(1, 0, 1000)
    b.op("c10d::allreduce_", 100, 800)
    assert segments(b.analysis()) == [("host", "ProfilerStep#1", 0.0, 100.0),
                                      ("comm", "c10d::allreduce_", 100.0, 800.0),
                                      ("host", "ProfilerStep#1", 900.0, 100.0)]
    b = TraceBuilder(tmp_path / "other")
    b.step(1, 0, 1000)
    b.op("gloo:all_reduce", 100, 800, tid=200)
    b.op("aten::add", 950, 20)  # the thread's own work: host, whatever else runs
    b.op("gloo:all_reduce", 940, 50, tid=200)
    assert segments(b.analysis()) == [("host", "ProfilerStep#1", 0.0, 100.0),
                                      ("comm", "gloo:all_reduce", 100.0, 800.0),
                                      ("host", "ProfilerStep#1", 900.0, 40.0),
                                      ("comm", "gloo:all_reduce", 940.0, 10.0),
                                      ("host", "aten::add", 950.0, 20.0),
                                      ("comm", "gloo:all_reduce", 970.0, 20.0),
                                      ("host", "ProfilerStep#1", 990.0, 10.0)]


def test_a_burst_on_another_thread_follows_the_main_thread(tmp_path):
    """The autograd engine's thread starts a burst 40 µs after the main thread's last
    launch (as the replay has it): the path runs from its kernel back through that
    thread's call to the main thread's time before it."""
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 150)
    b.op("aten::mm", 5, 10)
    b.launch("k1", 10, 18, 10)
    name = "autograd::engine::evaluate_function: MmBackward0"
    b.op(name, 50, 40, tid=200)
    b.op("aten::mm", 57, 28, tid=200)
    corr = b.runtime("cudaLaunchKernel", 60, 5, tid=200)
    b.kernel("k2", 68, 200, corr)
    a = b.analysis()
    assert segments(a) == [("host", "ProfilerStep#1", 0.0, 5.0), ("host", "aten::mm", 5.0, 5.0),
                           ("host", "ProfilerStep#1", 10.0, 40.0), ("host", name, 50.0, 10.0),
                           ("latency", "cudaLaunchKernel", 60.0, 8.0),
                           ("device", "k2", 68.0, 200.0)]


def test_a_host_ended_step_before_its_device_work_ends_is_host_time(tmp_path):
    """Two steps; step 1's kernel ends before step 2 starts on the host: the host ends
    step 1, and the kernel is not on its path (shortening it saves nothing)."""
    b = TraceBuilder(tmp_path)
    for s in range(2):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 1000)
        b.op("aten::mm", t0 + 5, 10)
        b.launch("k", t0 + 10, t0 + 18, 100)
    a = b.analysis()
    cp = critical_paths(a)
    assert cp.ended_by[0] == "host"
    assert segments(a)[-1] == ("host", "ProfilerStep#1", 10.0, 990.0)
    assert cp.by_kind[0, KIND_NAMES.index("device")] == 0.0


def test_the_document_is_bounded_and_the_whole_path_is_there_on_request(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    for k in range(30):  # 30 kernels back to back: 60 segments on the path, at least
        b.op("aten::add", 5 + 3 * k, 2)
        b.launch("add_kernel", 5.5 + 3 * k, 20 + 40 * k, 39)
    a = b.analysis()
    doc = critical_path_document(a, 0)
    full = critical_path_document(a, 0, limit=None, in_time_order=True)
    assert len(doc["segments"]) == TOP_SEGMENTS
    assert doc["segments_total"] == len(full["segments"]) > TOP_SEGMENTS
    assert doc["segments_omitted"] == doc["segments_total"] - TOP_SEGMENTS
    durs = [s["dur_us"] for s in doc["segments"]]
    assert durs == sorted(durs, reverse=True)
    assert sum(s["dur_us"] for s in full["segments"]) == pytest.approx(doc["total_us"])
    starts = [s["start_us"] for s in full["segments"]]
    assert starts == sorted(starts) and full["whole_path"] and not doc["whole_path"]
    assert doc["by_op"][0] == {"op": "aten::add", "kind": "device",
                               "us": pytest.approx(30 * 39.0), "segments": 30}
    json.dumps(doc)  # plain JSON types only


# ---- every step of every shared trace ---------------------------------------------------
def check_paths(a: SpanAnalysis) -> None:
    m = a.model
    cp = critical_paths(a)
    lo, hi = a.bounds
    wall = hi - lo
    assert np.all(np.abs(cp.total_us - wall) <= 0.01 * np.maximum(wall, 1e-9))
    for k in range(wall.shape[0]):
        sl = cp.step(k)
        s, d, rows, kind = cp.start[sl], cp.dur[sl], cp.row[sl], cp.kind[sl]
        assert d.sum() == pytest.approx(cp.by_kind[k].sum(), rel=1e-9, abs=1e-6)
        assert np.all(d > 0)
        assert np.all(s >= lo[k] - 1e-6) and np.all(s + d <= hi[k] + 1e-6)
        # Every segment is an event of the trace; device work and the DataLoader's and
        # collectives' host calls hold their segments.
        assert np.all((rows >= 0) & (rows < len(m)))
        held = np.isin(kind, [KIND_NAMES.index(x) for x in ("device", "input")])
        r = rows[held]
        assert np.all(m.start[r] <= s[held] + 1e-6) and np.all(s[held] + d[held] <= m.end[r] + 1e-6)
        dev = kind == KIND_NAMES.index("device")
        assert not np.any(m.is_host[rows[dev]])
        host = kind == KIND_NAMES.index("host")
        assert np.all(m.is_host[rows[host]])


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_every_shared_step_path_is_its_wall_and_made_of_trace_events(run, index):
    check_paths(shared_analysis(run, index))


def _pair(side: str) -> SpanAnalysis:
    files = sorted((PAIR / side).glob("*.pt.trace.json*")) if PAIR.is_dir() else []
    if not files:
        pytest.skip("../shared/pairs/h100_toyblocks_eager_vs_compile is not present")
    return SpanAnalysis(load_trace(str(files[0])))


def _warm_host(a: SpanAnalysis) -> tuple[float, float]:
    """(the host's share of the warm steps' path, its mean µs per warm step)."""
    by = critical_paths(a).by_kind[1:]  # step 0 is the cold one in both files
    host = by[:, [KIND_NAMES.index("host"), KIND_NAMES.index("input")]].sum(axis=1)
    return float(host.sum() / by.sum()), float(host.mean())


@pytest.mark.shared
def test_the_eager_and_compiled_pair_are_host_bound_and_compile_shortens_the_host():
    """Both files' steps end with the host reaching the next iteration while the device
    idles (busy 22 % and 33 %), with no sync inside a step: the host never waits for the
    device, so the path is the host's time in both; what compile removes is host time."""
    for c in (eager := _pair("before"), compiled := _pair("after")):
        check_paths(c)
    eager_share, eager_us = _warm_host(eager)
    compiled_share, compiled_us = _warm_host(compiled)
    assert eager_share >= 0.95 and compiled_share >= 0.95
    assert compiled_us < 0.8 * eager_us  # 542 → 346 µs of host time per step


@pytest.mark.shared
def test_timesformer_runs_through_the_device_once_the_model_starts():
    """One 383 ms step: 218 ms of video decoding and preprocessing on the host (the device
    idles), then the model, whose kernels follow one another: the path goes through the
    device for nearly all of the device's busy time."""
    a = shared_analysis("tracelens_h100_timesformer_inference")
    cp = critical_paths(a)
    w = a.windows[0]
    dev = cp.by_kind[0, KIND_NAMES.index("device")]
    assert dev >= 0.9 * w.device_busy_us
    # Nothing can be on the path longer than it ran: the device's share is at most busy.
    assert dev <= w.device_busy_us + 1e-6


# ---- the report, --step and the step route ----------------------------------------------
def _two_steps(tmp_path) -> None:
    b = TraceBuilder(tmp_path / "logs" / "run")
    for s in range(2):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 1000)
        for k in range(8):
            b.op("aten::add", t0 + 5 + 20 * k, 10)
            b.launch("add_kernel", t0 + 10 + 20 * k, t0 + 18 + 20 * k, 5)
    b.write()


def test_report_lists_the_path_per_step_and_the_whole_path_with_step(tmp_path, capsys):
    from tb_diagnostics.cli import main

    _two_steps(tmp_path)
    logdir = str(tmp_path / "logs")
    assert main(["report", logdir, "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    steps = doc["runs"][0]["workers"][0]["spans"][0]["steps"]
    for s in steps:
        cp = s["critical_path"]
        assert cp["total_us"] == pytest.approx(s["wall_us"], rel=0.01)
        assert sum(cp["by_kind"].values()) == pytest.approx(cp["total_us"], abs=1e-3)
        assert len(cp["segments"]) == min(TOP_SEGMENTS, cp["segments_total"])
        assert not cp["whole_path"]
    assert main(["report", logdir, "--no-cache", "--format", "json", "--step", "2"]) == 0
    whole = json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["spans"][0]["steps"]
    assert whole[0]["critical_path"] == steps[0]["critical_path"]  # only step 2 changes
    cp = whole[1]["critical_path"]
    assert cp["whole_path"] and len(cp["segments"]) == cp["segments_total"] > TOP_SEGMENTS
    assert main(["report", logdir, "--no-cache", "--step", "2"]) == 0
    text = capsys.readouterr().out
    section = text[text.index("  critical path"):]
    section = section[:re.search(r"\n  \S", section).start()]  # up to what follows
    assert "#1 1.00 ms, ended by the host: host 100%" in section
    assert "add_kernel" not in section  # host-bound: no kernel is on the path
    # Step 1: its 3 longest segments and a count of the rest; step 2: every segment.
    assert section.count("\n        host ") == 3 + cp["segments_total"]


def test_the_step_route_gives_the_whole_path(tmp_path):
    from tb_diagnostics.server.provider import DataProvider

    _two_steps(tmp_path)
    p = DataProvider(str(tmp_path / "logs"))
    f = p.find("run", "worker0", "1")
    p.loader.wait(f)
    code, detail = p.step("run", "worker0", "1", "1")
    assert code == 200
    cp = detail["critical_path"]
    assert cp["whole_path"] and len(cp["segments"]) == cp["segments_total"]
    assert sum(s["dur_us"] for s in cp["segments"]) == pytest.approx(cp["total_us"], abs=1e-3)


def test_a_span_of_many_steps_gives_the_tab_each_path_by_kind_only():
    from tb_diagnostics.server.bounded import bound_steps

    path = {"total_us": 100.0, "by_kind": dict.fromkeys(KIND_NAMES, 20.0), "ended_by": "host",
            "segments": [{"kind": "host", "name": "x", "row": 1, "start_us": 0.0,
                          "dur_us": 100.0, "op": None}], "segments_total": 1,
            "segments_omitted": 0, "whole_path": False, "by_op": [{"op": "x"}]}
    doc = {"steps": [{"step": k, "wall_us": 100.0, "device_busy": 0.5, "verdict": "mixed",
                      "critical_path": path} for k in range(30)],
           "findings": [], "whatif": [], "notes": []}
    lean = bound_steps(doc, limit=10)["steps"]
    assert len(lean) == 10
    for s in lean:
        cp = s["critical_path"]
        assert cp["by_kind"] == path["by_kind"] and cp["total_us"] == 100.0
        assert cp["segments"] == [] and cp["by_op"] == [] and cp["segments_omitted"] == 1
    assert bound_steps(doc, limit=30)["steps"][0]["critical_path"] is path  # few: as it is


def test_every_step_document_at_once_is_each_step_document(tmp_path):
    """add_critical_path builds all steps' documents in one pass: the same as one at a
    time, ties (equal segments, equal ops) in the same order."""
    from tb_diagnostics.report.critical_path import add_critical_path

    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = 1000.0 * s
        b.step(s + 1, t0, 1000)
        for k in range(4 + s):  # equal kernels and equal dispatch: ties everywhere
            b.op("aten::add" if k % 2 else "aten::mul", t0 + 5 + 100 * k, 10)
            b.launch("k", t0 + 10 + 100 * k, t0 + 18 + 100 * k, 20)
    analyses = [b.analysis()]
    if PAIR.is_dir():
        analyses += [_pair("before"), _pair("after")]
    for a in analyses:
        steps = [{} for _ in a.windows]
        add_critical_path(steps, a)
        assert [s["critical_path"] for s in steps] == [
            critical_path_document(a, k) for k in range(len(steps))]


def test_the_critical_path_frame_has_one_row_per_segment(tmp_path):
    pytest.importorskip("pandas")
    import tb_diagnostics

    _two_steps(tmp_path)
    report = tb_diagnostics.analyze(tmp_path / "logs", cache=False)
    df = report.critical_path_frame()
    steps = report.steps()
    assert list(df.columns[:5]) == ["run", "worker", "span", "file", "step"]
    assert len(df) == sum(s["critical_path"]["segments_total"] for s in steps)
    for s in steps:
        rows = df[df["step"] == s["step"]]
        assert rows["dur_us"].sum() == pytest.approx(s["wall_us"], abs=0.01)
        assert list(rows["start_us"]) == sorted(rows["start_us"])  # in time order
        by_kind = rows.groupby("kind")["dur_us"].sum().to_dict()
        assert by_kind == pytest.approx({k: v for k, v in s["critical_path"]["by_kind"].items()
                                         if v > 0}, abs=0.01)
        assert s["path_host_us"] == s["critical_path"]["by_kind"]["host"]  # steps(), flat
    one = report.critical_path_frame(step=2)
    assert set(one["step"]) == {2} and len(one) == (df["step"] == 2).sum()


ODD_TRACES = {
    # A device activity and no host event at all (no thread, no timepoint: nothing binds).
    "kernel_only": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0,
                     "dur": 10, "args": {"stream": 7, "device": 0}}],
    # A step that holds one op and a step number no integer type holds.
    "absurd_step": [{"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0,
                     "dur": 100, "name": "ProfilerStep#99999999999999999999999"},
                    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
                     "ts": 10, "dur": 50}],
    "python_only": [{"ph": "X", "cat": "python_function", "name": "a.py(1): f", "pid": 1,
                     "tid": 1, "ts": 0, "dur": 10, "args": {"Python id": 1}}],
}


@pytest.mark.parametrize("name", sorted(ODD_TRACES))
def test_odd_traces_get_a_path_their_walls_long(tmp_path, name):
    # Empty columns (no host timepoint, no launch) once raised IndexError here and cost the
    # file its whole report.
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": ODD_TRACES[name]}))
    check_paths(SpanAnalysis(load_trace(str(path))))


def _backward(b: TraceBuilder, busy_main: bool = False) -> tuple[str, str]:
    """Step 1 (0-1000 µs): ``## backward ##`` on the main thread (100-900) launches one
    fill, then blocks while the autograd thread runs two backward functions (150-400,
    410-850); after it, ``aten::add_`` (905) launches at 910. ``busy_main``: the main
    thread records an op at 200 instead of waiting."""
    b.step(1, 0, 1000)
    b.annotation("## backward ##", 100, 800)
    b.op("aten::ones_like", 105, 10)
    b.launch("fill", 110, 118, 2)
    first = "autograd::engine::evaluate_function: AddmmBackward0"
    second = "autograd::engine::evaluate_function: MmBackward0"
    for name, t0, dur in ((first, 150, 250), (second, 410, 440)):
        b.op(name, t0, dur, tid=200)
        b.op("aten::mm", t0 + 10, 30, tid=200)
        corr = b.runtime("cudaLaunchKernel", t0 + 20, 5, tid=200)
        b.kernel("k", t0 + 30, 5, corr)
    if busy_main:
        b.op("aten::cat", 200, 50)
    b.op("aten::add_", 905, 20)
    b.launch("add", 910, 918, 2)
    return first, second


def test_a_thread_waiting_for_the_autograd_thread_binds_to_its_last_burst(tmp_path):
    """``backward()`` blocks the main thread, which records nothing while the autograd
    engine's thread runs the backward functions: the path runs through them (back to
    back: the second one waited for the first, not for the main thread), not through
    800 µs of ``## backward ##``."""
    b = TraceBuilder(tmp_path)
    first, second = _backward(b)
    a = b.analysis()
    assert segments(a) == [
        ("host", "ProfilerStep#1", 0.0, 105.0), ("host", "aten::ones_like", 105.0, 5.0),
        ("host", "## backward ##", 110.0, 40.0), ("host", "aten::mm", 150.0, 20.0),
        ("host", first, 170.0, 250.0), ("host", "aten::mm", 420.0, 10.0),
        ("host", second, 430.0, 420.0), ("host", "## backward ##", 850.0, 55.0),
        ("host", "aten::add_", 905.0, 5.0), ("host", "ProfilerStep#1", 910.0, 90.0)]


def test_a_thread_that_keeps_recording_waits_for_no_other(tmp_path):
    """The same, but the main thread records an op while the other thread runs: it was
    not blocked on it, so its own time stays on the path."""
    b = TraceBuilder(tmp_path)
    _backward(b, busy_main=True)
    a = b.analysis()
    names = {name for _, name, _, _ in segments(a)}
    assert "autograd::engine::evaluate_function: MmBackward0" not in names
    assert sum(d for _, name, _, d in segments(a) if name == "## backward ##") > 700
