"""views.activity_coverage: launches without device activity, activity without a launch,
and backlog launched before the record window (no step's kernels)."""

from __future__ import annotations

from conftest import GPU_PID, GPU_STREAM, analyse
from tb_diagnostics.analysis.views.activity_coverage import activity_coverage


def _kernel(trace, name: str, ts: float, dur: float, corr: int | None) -> None:
    args = {"stream": GPU_STREAM, "device": 0}
    if corr is not None:
        args["correlation"] = corr
    trace.x("kernel", name, ts, dur, pid=GPU_PID, tid=GPU_STREAM, **args)


def test_launches_without_device_activity(trace, tmp_path):
    trace.step(1, 0, 1000)
    for i in range(30):
        c = trace.launch(10 + i * 30, 5, "k", 20 + i * 30, 10)
        if i >= 10:  # 20 kernels were not recorded
            trace.events.pop()
            assert trace.events[-1]["args"]["correlation"] == c
    cov = activity_coverage(analyse(trace, tmp_path))
    assert (cov.kernel_launches, cov.kernel_launches_missing, cov.kernels) == (30, 20, 10)
    assert not cov.complete
    assert cov.notes() == [
        "30 kernel launches and copies, 10 with device activity: 20 have none in the trace "
        "(work ran unseen: CUPTI dropped activities when its buffers filled, the trace "
        "records one device of a model split over several GPUs, or the profiler recorded "
        "counters instead of activities); device utilisation is a lower bound"]


def test_empty_memsets_do_not_make_the_activity_incomplete(trace, tmp_path):
    trace.step(1, 0, 1000)
    for i in range(20):
        trace.launch(10 + i * 40, 5, "k", 20 + i * 40, 10)
        trace.x("cuda_runtime", "cudaMemsetAsync", 30 + i * 40, 0.3, correlation=900 + i)
    cov = activity_coverage(analyse(trace, tmp_path))
    assert cov.complete and (cov.memset_launches, cov.memset_launches_missing) == (20, 20)
    assert cov.notes() == []


def test_backlog_launched_before_the_window_is_no_steps_kernels(trace, tmp_path):
    # Three kernels launched before the profiler started (correlation ids 1-3, below the
    # first launch's 4) run at the start of step 1, then step 1's and step 2's own.
    for i in range(3):
        _kernel(trace, "pre_window_kernel", i * 100, 100, 1 + i)
    trace._corr = 3
    trace.step(1, 0, 500)
    trace.launch(10, 5, "k", 300, 50)
    trace.step(2, 500, 500)
    trace.launch(510, 5, "k", 520, 50)
    a = analyse(trace, tmp_path)
    cov = activity_coverage(a)
    assert cov.pre_window.tolist() == [True, True, True, False, False]
    assert cov.complete and cov.no_launch_count == 0
    assert cov.notes() == ["3 device activities were launched before the record window and "
                           "ran inside it: backlog, not any step's kernels"]
    assert a.activity_step.tolist() == [-1, -1, -1, 0, 1]
    # ...and step 1's dispatch chain holds its own kernel only, not the backlog.
    assert [a.model.name_of(r) for r in a.window_activity_rows(0)] == ["k"]
    w = a.windows
    # Step 1's kernels are its own one; the device was busy on the backlog too.
    assert (w[0].kernels, w[0].self_device_us, w[0].device_busy_us) == (1, 50.0, 350.0)


def test_activity_without_a_launch_inside_the_window(trace, tmp_path):
    trace.step(1, 0, 2000)
    for i in range(20):
        trace.launch(10 + i * 50, 5, "k", 20 + i * 50, 10)
    for i in range(12):  # correlation ids above every launch's: not backlog
        _kernel(trace, "unlaunched_kernel", 1100 + i * 20, 10, 500 + i)
    cov = activity_coverage(analyse(trace, tmp_path))
    assert cov.no_launch_count == 12 and cov.pre_window_count == 0 and not cov.complete
    assert cov.notes() == ["12 device activities have no launch call in the trace (a "
                           "launching thread not recorded?); device utilisation is not "
                           "complete"]


def test_shared_traces(shared_traces):
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    def cov(run):
        (path,) = sorted((shared_traces / run).glob("*.pt.trace.json*"))
        return activity_coverage(SpanAnalysis(load_trace(str(path))))

    # Backlog from before the window, counted by correlation id (HTA's own test trace for
    # negative queue lengths is one of them).
    assert {run: cov(run).pre_window_count for run in (
        "hta_2022_v100_rank1_of2", "hta_a100_compiled_train_rank0_of16",
        "kineto_2021jan_resnet50_profiler_api", "tracelens_h100_qwen1.5_0.5b_inference",
    )} == {"hta_2022_v100_rank1_of2": 614, "hta_a100_compiled_train_rank0_of16": 872,
           "kineto_2021jan_resnet50_profiler_api": 733,
           "tracelens_h100_qwen1.5_0.5b_inference": 509}
    # Counter mode records ranges, not kernels: no launch has its activity.
    counters = cov("hta_a100_cupti_counters")
    assert not counters.complete and counters.launches_missing == 94
    # Empty memsets only: complete.
    owl = cov("tracelens_h100_owlv2_large_inference")
    assert owl.complete and owl.memset_launches_missing == 305
