"""What the step verdict reads besides compute_busy (issue 23, items 2 and 5): a warm step
whose device drains a launch backlog is limited by the host, and one-time costs
(compilation inside the window, a kernel's first launch loading its module) are labelled
idle time that no verdict is judged on."""

from __future__ import annotations

import pytest
from rules.conftest import TraceBuilder
from rules.test_launch_backlog_drain import drain_steps
from rules.test_module_load import load_in_step

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@pytest.fixture
def builder(tmp_path) -> TraceBuilder:
    return TraceBuilder(tmp_path / "log")


def _span(b: TraceBuilder) -> dict:
    b.write()
    doc = build_document(scan_logdir(str(b.directory)))
    (span,) = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    return span


def _accounted(w) -> None:
    """compute + lone collectives + every idle part (labelled ones included) = the wall."""
    assert w.device_busy_us + sum(w.idle.values()) == pytest.approx(w.wall_us)


# ---- the launch backlog -----------------------------------------------------------------
def test_a_warm_step_draining_a_backlog_is_overhead_bound(builder):
    # Steps issued every 119 µs for 60 µs of device work, behind 1 ms of work queued before
    # the window: the device is 100% busy in every step, draining that queue.
    drain_steps(builder)
    windows = builder.analysis().windows
    first, *rest = windows
    # Step 1 holds the backlog (1060 µs against 60): cold, judged as before.
    assert (first.verdict, first.verdict_by, first.compute_busy) == ("compute-bound", None, 1.0)
    for w in rest:
        assert (w.wall_us, w.compute_busy_us) == (60.0, 60.0)
        assert (w.verdict, w.verdict_by, w.main_idle_cause) == ("overhead-bound",
                                                               "launch-backlog", None)
        assert sum(w.idle.values()) == 0.0  # the time accounting is unchanged
        _accounted(w)
    span = _span(builder)
    s2 = span["steps"][1]
    assert s2["verdict"] == "overhead-bound" and s2["host_limited"] is True
    assert s2["verdict_reason"] == (
        "the host issues a step every 119 µs for 60 µs of device work; the device ran on a "
        "backlog that shrank by 59 µs (941 µs → 882 µs of queued device time)")
    assert span["steps"][0]["verdict_reason"] is None
    assert span["verdict"] == "overhead-bound"


def test_a_growing_backlog_leaves_the_device_the_limit(builder):
    # 200 µs of device work issued every 119 µs: the queue grows, the steps are compute-bound.
    drain_steps(builder, backlog=0, kernel_us=100.0)
    for w in builder.analysis().windows:
        assert (w.verdict, w.verdict_by) == ("compute-bound", None)
    assert all(s["verdict_reason"] is None for s in _span(builder)["steps"])


def test_a_host_draining_the_queue_in_the_dataloader_is_input_bound(builder):
    # The same steps, with 80 of the host's 119 µs a step waiting for the next batch.
    drain_steps(builder)
    for s in range(8):
        builder.annotation(LOADER, s * 119.0 + 30, 80)
    windows = builder.analysis().windows
    assert [(w.verdict, w.verdict_by) for w in windows[1:]] == \
        [("input-bound", "launch-backlog")] * 7
    assert windows[1].compute_busy == 1.0


def test_a_host_waiting_in_a_sync_lets_the_device_be_the_limit(builder):
    # The shape of the rule's test: the host spends 480 of its 505 µs in a sync, so the
    # queue drains for the device's sake and step 1 is not host-limited. (Two steps: the
    # first is warm, as both are as long.)
    b = builder
    for i in range(3):
        b.kernel("pre_window_kernel", i * 100, 100, corr=1 + i)
    b.step(1, 0, 505)
    b.launch("gemm_kernel", 5, 300, 100)
    b.launch("gemm_kernel", 10, 400, 100)
    b.runtime("cudaDeviceSynchronize", 20, 480)
    b.step(2, 505, 505)
    b.launch("gemm_kernel", 510, 520, 100)
    assert [w.verdict_by for w in b.analysis().windows] == [None, None]


# ---- one-time costs ---------------------------------------------------------------------
def compile_in_step(b: TraceBuilder, step: int = 3, steps: int = 4,
                    compile_us: float = 5000.0) -> None:
    """``steps`` 1 ms steps of four 220 µs kernels (88% compute); step ``step`` first
    compiles for ``compile_us`` (an ``entire_frame_compile`` holding two ``dynamo_timed``
    spans and an autotuning sync), device idle, then runs the same work."""
    t = 0.0
    for s in range(1, steps + 1):
        extra = compile_us if s == step else 0.0
        b.step(s, t, 999 + extra)
        if s == step:
            b.op("entire_frame_compile", t + 2, compile_us - 4)
            b.op("_compile.compile_inner (dynamo_timed)", t + 3, compile_us - 6)
            b.op("CachingAutotuner.benchmark_all_configs (dynamo_timed)", t + 100, 2000)
            b.runtime("cudaDeviceSynchronize", t + 200, 50)
            t += compile_us
        for k in range(4):
            ts = t + 10 + k * 240
            b.op("aten::mm", ts, 15)
            b.launch("gemm_kernel", ts + 5, ts + 12, 220)
        t += 1000.0


def test_compilation_in_a_warm_step_is_its_own_time(builder):
    compile_in_step(builder)
    w = builder.analysis().windows[2]
    # The compile spans cover [2002, 6998): 4996 µs of the step's idle time, the autotuning
    # sync inside them included; the step is judged on its other 1004 µs.
    assert w.idle["compile"] == pytest.approx(4996.0)
    assert w.idle["sync"] == 0.0 and w.idle["launch"] == pytest.approx(48.0)
    assert w.wall_us == pytest.approx(6000.0) and w.compute_busy_us == 880.0
    # 4996 µs of its 6000 µs the device idles while the host compiles: compilation, not
    # the 88% compute of the rest, bounds the step (verdict.compile_bound).
    assert (w.verdict, w.main_idle_cause, w.verdict_by) == ("compile-bound", "compile",
                                                           "compilation")
    assert w.flags == ["compiling"]
    _accounted(w)
    span = _span(builder)
    s3 = span["steps"][2]
    assert s3["idle"]["compile_us"] == pytest.approx(4996.0) and "compiling" in s3["flags"]
    assert s3["verdict_reason"] == ("the device sits idle 5.00 ms of the step's 6.00 ms (83%) "
                                    "while the host compiles (Dynamo, AOTAutograd, Inductor), "
                                    "a one-time cost")
    assert span["verdict"] == "compute-bound"  # not overhead-bound for its compile time
    assert "compile-overhead" in {f["rule"] for f in span["findings"]}


def test_a_step_mostly_compiling_is_not_overhead_bound_for_it(builder):
    # Step 3 compiles for 50 ms and runs 1 ms of work: 2% busy over its wall.
    compile_in_step(builder, compile_us=50_000.0)
    w = builder.analysis().windows[2]
    assert w.compute_busy == pytest.approx(880 / 51_000)
    assert (w.verdict, w.main_idle_cause) == ("compile-bound", "compile")


def test_a_module_load_is_kept_out_of_the_launch_idle(builder):
    # Step 3 of 5 holds a 420 ms first launch of cudnn_kernel (a lazy module load).
    load_in_step(builder, step=3, steps=5)
    w = builder.analysis().windows[2]
    assert w.idle["module_load"] == 420_000.0
    # The launch idle is its ordinary 63 µs (the loading call's own 20 µs op around it,
    # beyond the call, included), as in the steps around it.
    assert w.idle["launch"] == pytest.approx(63.0) and w.idle["other"] == pytest.approx(387.0)
    # Judged on its other 1100 µs: 650 µs of compute, mixed like its neighbours.
    assert w.compute_busy_us == 650.0 and w.verdict == "mixed"
    _accounted(w)
    span = _span(builder)
    s3 = span["steps"][2]
    assert s3["idle"]["module_load_us"] == 420_000.0 and "module-load" in s3["flags"]
    assert [s["verdict"] for s in span["steps"]] == ["mixed"] * 5


def test_nothing_changes_without_one_time_costs(builder):
    builder.steady_steps(4)
    for w in builder.analysis().windows:
        assert w.idle["compile"] == w.idle["module_load"] == 0.0
        assert w.flags == [] and w.verdict_by is None


def test_shared_traces():
    from rules.conftest import shared_analysis

    # The 2021 ResNet-50's step 5 is 83% compute on 733 activities launched before the
    # window: the only shared step the backlog judges, overhead-bound (the DataLoader holds
    # less than half of the host's time); the steps after it stay mixed.
    a = shared_analysis("kineto_2021jan_resnet50_profiler_api")
    w5, *rest = a.windows
    assert (w5.step, w5.verdict, w5.verdict_by) == (5, "overhead-bound", "launch-backlog")
    assert w5.compute_busy == pytest.approx(0.83, abs=0.005)
    assert {w.verdict for w in rest} == {"mixed"} and {w.verdict_by for w in rest} == {None}
    # AlexNet's first cuDNN launch loads its module for 3.06 s: its own time, not launch.
    alex = shared_analysis("hta_a100_alexnet_cuda_sync").windows[0]
    assert alex.idle["module_load"] == pytest.approx(3_055_564, abs=1)
