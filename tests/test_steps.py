"""Exact figures of the step spec on hand-written traces: partition, clipping, idle, verdicts."""

from __future__ import annotations

import json

import pytest

from conftest import GPU_PID, analyse
from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir


def figures(w) -> dict:
    assert w.idle["profiler"] == 0  # no profiler artefact in these traces
    assert w.idle["comm"] == 0  # nor collectives
    assert w.idle["compile"] == w.idle["module_load"] == 0  # nor one-time costs
    idle = {k: v for k, v in w.idle.items()
            if k not in ("profiler", "comm", "compile", "module_load")}
    return {"step": w.step, "start": w.start, "wall": w.wall_us, "busy": w.device_busy_us,
            "idle": idle, "verdict": w.verdict}


def test_gpu_lag_moves_the_boundary_to_the_end_of_the_previous_steps_work(trace, tmp_path):
    # Step 1 launches work that runs until 150, after step 2's host window opened at 100.
    trace.step(1, 0, 100)
    trace.launch(10, 4, "gemm", 15, 65)
    trace.launch(20, 4, "elementwise", 80, 70)
    trace.step(2, 100, 100)
    trace.op("aten::add", 105, 90)
    trace.launch(110, 4, "elementwise", 150, 20)
    s1, s2 = analyse(trace, tmp_path).windows
    assert figures(s1) == {"step": 1, "start": 0, "wall": 150, "busy": 135,
                           "idle": {"input": 0, "sync": 0, "launch": 4, "other": 11},
                           "verdict": "compute-bound"}
    assert figures(s2) == {"step": 2, "start": 150, "wall": 50, "busy": 20,
                           "idle": {"input": 0, "sync": 0, "launch": 25, "other": 5},
                           "verdict": "overhead-bound"}
    assert s1.device_busy == pytest.approx(0.9)
    assert s2.device_busy == pytest.approx(0.4)


def test_last_step_ends_at_its_last_device_activity(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.launch(10, 5, "k", 50, 200)  # runs long after the host is done
    (w,) = analyse(trace, tmp_path).windows
    assert (w.start, w.end, w.device_busy_us) == (0, 250, 200)


def test_busy_is_the_union_over_streams_clipped_to_the_window(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.launch(1, 2, "a", 10, 60, stream=7)
    trace.launch(4, 2, "b", 40, 40, stream=8)  # overlaps a: [10, 80) once, not 100 µs
    trace.step(2, 100, 100)
    # Step 2's kernel on another stream starts before step 1's window ends (b_2 = 100),
    # so only [100, 130) of it is inside step 2; the part before 100 counts in step 1.
    trace.launch(101, 2, "c", 90, 40, stream=9)
    s1, s2 = analyse(trace, tmp_path).windows
    assert (s1.start, s1.end) == (0, 100)
    assert s1.device_busy_us == 70 + 10  # [10, 80) ∪ [90, 100)
    assert s2.device_busy_us == 30  # [100, 130)
    assert s1.device_busy_us <= s1.wall_us and s2.device_busy_us <= s2.wall_us


def test_nested_host_activity_first_of_input_sync_launch_wins(trace, tmp_path):
    trace.step(1, 0, 1000)
    trace.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            0, 400)
    trace.op("aten::copy_", 100, 200)  # inside the DataLoader call: input, not launch
    trace.op("aten::item", 400, 100)
    trace.op("aten::_local_scalar_dense", 410, 80)
    trace.x("cuda_runtime", "cudaStreamSynchronize", 420, 60, correlation=99)
    trace.op("aten::mm", 505, 10)
    trace.launch(510, 4, "gemm", 520, 380)
    (w,) = analyse(trace, tmp_path).windows
    assert figures(w) == {"step": 1, "start": 0, "wall": 1000, "busy": 380,
                          "idle": {"input": 400, "sync": 100, "launch": 10, "other": 110},
                          "verdict": "input-bound"}
    assert w.main_idle_cause == "input"


def test_the_profilers_flush_sync_is_labelled_and_left_out_of_the_verdict(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.op("aten::mm", 2, 10)
    trace.launch(5, 2, "gemm", 10, 140)  # [10, 150)
    trace.op("aten::add", 80, 15)
    trace.launch(85, 2, "late", 290, 10)  # queued behind nothing: runs [290, 300)
    # After the last step the profiler synchronises the device to collect its events.
    trace.x("cuda_runtime", "cudaDeviceSynchronize", 120, 175, correlation=99)
    (w,) = analyse(trace, tmp_path).windows
    assert (w.start, w.end, w.device_busy_us) == (0, 300, 150)
    assert w.idle["profiler"] == 140  # [150, 290): the device idles while the profiler flushes
    assert w.idle["sync"] == 0
    # Judged without the profiler's 140 µs: 150 busy of 160.
    assert w.verdict == "compute-bound"


def test_sync_bound_step(trace, tmp_path):
    trace.step(1, 0, 1000)
    trace.launch(10, 5, "k", 20, 100)
    trace.x("cuda_runtime", "cudaDeviceSynchronize", 20, 900, correlation=50)
    (w,) = analyse(trace, tmp_path).windows
    # The sync overlaps the kernel for 100 µs: only the idle part is charged to it.
    assert w.idle == {"input": 0, "sync": 800, "comm": 0, "launch": 5, "other": 95,
                      "profiler": 0, "compile": 0, "module_load": 0}
    assert w.verdict == "sync-bound"


def test_mixed_step_names_its_main_cause(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.op("aten::add", 0, 30)
    trace.launch(31, 2, "k", 35, 60)
    (w,) = analyse(trace, tmp_path).windows
    assert w.device_busy == pytest.approx(0.6)
    assert w.verdict == "mixed"
    assert w.main_idle_cause == "launch"


def test_a_step_with_nothing_recorded_falls_back_to_overhead_bound(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.launch(0, 1, "k", 1, 10)
    (w,) = analyse(trace, tmp_path).windows
    assert w.main_idle_cause == "other"
    assert w.verdict == "overhead-bound"


def test_thresholds_are_overridable(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.op("aten::add", 0, 30)
    trace.launch(31, 2, "k", 35, 60)
    (w,) = analyse(trace, tmp_path, compute_bound=0.55).windows
    assert w.verdict == "compute-bound"
    (w,) = analyse(trace, tmp_path, low_busy=0.7, compute_bound=0.9).windows
    assert w.verdict == "overhead-bound"


def test_gpu_user_annotation_twin_is_not_a_step_and_not_work(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.x("gpu_user_annotation", "ProfilerStep#1", 5, 95, pid=GPU_PID, tid=7)
    trace.launch(10, 5, "k", 20, 10)
    a = analyse(trace, tmp_path)
    (w,) = a.windows
    assert w.step == 1 and w.device_busy_us == 10


def test_cpu_only_busy_is_self_time_of_heavy_ops(cpu_trace, tmp_path):
    t = cpu_trace
    t.step(1, 0, 1000)
    t.op("aten::matmul", 10, 690)
    t.op("aten::mm", 20, 670)
    t.op("aten::resolve_conj", 25, 2)
    t.op("aten::add", 710, 30)
    t.op("aten::sum", 750, 100)
    t.op("aten::fill_", 760, 10)
    a = analyse(t, tmp_path)
    assert a.cpu_only and a.model.device_kind == "cpu"
    (w,) = a.windows
    assert figures(w) == {"step": 1, "start": 0, "wall": 1000, "busy": 758,
                          "idle": {"input": 0, "sync": 0, "launch": 62, "other": 180},
                          "verdict": "mixed"}
    assert w.self_device_us is None
    # A lower heavy threshold makes matmul's 20 µs and add's 30 µs of self time work too.
    (w,) = analyse(t, tmp_path, cpu_heavy_self_us=20).windows
    assert w.device_busy_us == 758 + 20 + 30


def test_span_without_steps_is_one_window(trace, tmp_path):
    trace.op("aten::mm", 100, 50)
    trace.launch(110, 5, "k", 120, 100)
    a = analyse(trace, tmp_path)
    (w,) = a.windows
    assert w.step is None
    # Times are µs since the trace's first event (here the op at 100).
    assert (w.start, w.end, w.device_busy_us) == (0, 120, 100)
    assert a.model.origin_us == 100
    assert w.kernels == 1 and w.ops == 1


def test_per_step_totals(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.op("aten::linear", 5, 50)
    trace.op("aten::addmm", 10, 40)
    trace.launch(15, 5, "gemm", 20, 30)
    trace.launch(25, 5, "Memcpy DtoD (Device -> Device)", 50, 2, runtime="cudaMemcpyAsync",
                 cat="gpu_memcpy")
    (w,) = analyse(trace, tmp_path).windows
    assert w.ops == 2 and w.kernels == 1
    assert w.self_device_us == 32
    # Self CPU: step 100-50=50, linear 50-40=10, addmm 40-10=30 (the runtime calls are children).
    assert w.self_cpu_us == 90


def test_gpu_activity_without_correlation_uses_launch_flows(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.step(2, 100, 100)
    trace.x("cuda_runtime", "cudaLaunchKernel", 10, 5)
    trace.x("kernel", "late", 120, 30, pid=GPU_PID, tid=7)
    trace.events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 1, "tid": 1,
                         "ts": 10})
    trace.events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": GPU_PID,
                         "tid": 7, "ts": 120, "bp": "e"})
    s1, s2 = analyse(trace, tmp_path).windows
    # Launched in step 1, so step 1 stretches to the kernel's end.
    assert (s1.end, s1.kernels, s2.kernels) == (150, 1, 0)


@pytest.mark.shared
def test_spec_worked_examples_exactly(shared_spec):
    expected = json.loads((shared_spec / "expected.json").read_text())
    doc = build_document(scan_logdir(str(shared_spec / "log")))
    got = {s["file"]: s["steps"] for r in doc["runs"] for w in r["workers"] for s in w["spans"]}
    assert set(got) == set(expected)
    for f, steps in expected.items():
        assert len(got[f]) == len(steps), f
        for g, e in zip(got[f], steps, strict=True):
            flat = {**{k: g[k] for k in e if k != "idle"},
                    **{k: g["idle"][k] for k in e["idle"]}}
            assert g["idle"]["profiler_us"] == 0
            want = {**{k: v for k, v in e.items() if k != "idle"}, **e["idle"]}
            assert flat == pytest.approx(want), f
