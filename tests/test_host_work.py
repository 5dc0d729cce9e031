"""The host's own work inside the launch cause (analysis/views/host_work.py): a thread that
feeds the device and starts no op and no runtime call for 1 ms or more runs its own code,
not dispatch; the step says how much of its launch cause that is, the headline says it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rules.conftest import TraceBuilder, shared_analysis
from test_linearity_steps import GROWTH, numpy_calls

from tb_diagnostics.analysis.intervals import covered
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.host_work import HOST_WORK_MIN_US, host_work
from tb_diagnostics.report.headline import headline
from tb_diagnostics.trace.load import load_trace_bytes

MAIN, BACKGROUND, AUTOGRAD = 100, 200, 300


def _ops(b: TraceBuilder, t: float, n: int, gap: float, tid: int = MAIN,
         kernel_us: float = 50.0) -> float:
    """``n`` ops from ``t``, each 20 µs with a 5 µs launch of a ``kernel_us`` kernel that
    starts 10 µs after its call, ``gap`` µs apart; the end of the last."""
    for _ in range(n):
        b.op("aten::add", t, 20, tid=tid)
        corr = b.runtime("cudaLaunchKernel", t + 5, 5, tid=tid)
        b.kernel("add_kernel", t + 15, kernel_us, corr)
        t += 20 + gap
    return t


def preprocess_steps(b: TraceBuilder, steps: int = 3, work_us: float = 6000.0) -> None:
    """Steps of 10 ms: Python ``preprocess`` runs ``work_us`` calling no op (its children
    decode and resize, no op either), then 40 ops dispatched 10 µs apart."""
    for k in range(steps):
        t0 = 10_000.0 * k
        b.step(k, t0, 9_990)
        top = b.python("pipeline.py(10): __call__", t0 + 1, 9_980)
        pre = b.python("pipeline.py(40): preprocess", t0 + 10, work_us, parent=top)
        b.python("decode.py(5): decode", t0 + 20, work_us / 3, parent=pre)
        b.python("resize.py(7): resize", t0 + 30 + work_us / 3, work_us / 3, parent=pre)
        fwd = b.python("model.py(90): forward", t0 + 20 + work_us, 2_000, parent=top)
        del fwd
        _ops(b, t0 + 30 + work_us, 40, 10)


def test_a_long_python_frame_that_starts_no_op_is_host_work(tmp_path):
    b = TraceBuilder()
    preprocess_steps(b)
    a = b.analysis(tmp_path)
    hw = host_work(a)
    for k, w in enumerate(a.windows):
        # The device idles through preprocess: all of it is the host's own work, inside
        # the launch cause (whose total is unchanged).
        assert 5_990 <= hw.idle_us[k] <= w.idle["launch"]
        assert hw.idle_us[k] >= 0.9 * w.idle["launch"]
        assert a.model.name_of(int(hw.longest_frame[k])) == "pipeline.py(40): preprocess"
        assert hw.longest_start[k] <= w.host_start + 20 and hw.longest_us[k] >= 5_990
    assert w.verdict == "overhead-bound" and w.main_idle_cause == "launch"


def test_many_tiny_ops_with_short_gaps_are_dispatch_not_host_work(tmp_path):
    b = TraceBuilder()
    for k in range(3):
        t0 = 5_000.0 * k
        b.step(k, t0, 4_990)
        b.python("train.py(3): step", t0 + 1, 4_980)
        # 150 ops 10 µs apart, 5 µs kernels: the device idles, the host dispatches.
        _ops(b, t0 + 5, 150, 10, kernel_us=5)
    a = b.analysis(tmp_path)
    assert all(w.idle["launch"] > 3_000 for w in a.windows)
    hw = host_work(a)
    assert hw.idle_us.tolist() == [0.0, 0.0, 0.0]
    assert (hw.longest_frame == -1).all()


def test_a_gap_between_ops_without_python_frames_is_host_work_only_when_long(tmp_path):
    b = TraceBuilder()
    for k, gap in enumerate((HOST_WORK_MIN_US / 2, 3 * HOST_WORK_MIN_US)):
        t0 = 10_000.0 * k
        b.step(k, t0, 9_990)
        end = _ops(b, t0 + 5, 5, 10)
        end = _ops(b, end + gap, 5, 10)
        b.annotation("forward", t0 + 5, end - 10 - t0 - 5)  # no python_function events
    a = b.analysis(tmp_path)
    hw = host_work(a)
    assert hw.idle_us[0] == 0.0
    # The 3 ms gap (3,010 µs from an op's end to the next's start), less the last
    # kernel's 45 µs that still run into it (busy time is no idle cause).
    assert hw.idle_us[1] == pytest.approx(3 * HOST_WORK_MIN_US + 10 - 45, abs=1e-6)
    assert a.model.name_of(int(hw.longest_frame[1])) == "forward"


def test_a_thread_that_never_dispatches_feeds_nothing(tmp_path):
    b = TraceBuilder()
    b.python("threading.py(359): wait", 0, 30_000, tid=BACKGROUND)  # a progress monitor
    for k in range(3):
        t0 = 10_000.0 * k
        b.step(k, t0, 9_990)
        _ops(b, t0 + 5, 5, 2_000)  # 2 ms gaps with nothing recorded on the main thread
    a = b.analysis(tmp_path)
    assert sum(w.idle["launch"] for w in a.windows) > 20_000  # the monitor's frame
    assert host_work(a).idle_us.sum() == 0.0


def test_the_main_thread_waiting_while_another_dispatches_is_no_host_work(tmp_path):
    b = TraceBuilder()
    for k in range(2):
        t0 = 10_000.0 * k
        b.step(k, t0, 9_990)
        b.python("torch/autograd/__init__.py(200): backward", t0 + 5, 9_000)
        _ops(b, t0 + 10, 100, 60, tid=AUTOGRAD, kernel_us=10)  # the engine's thread
    a = b.analysis(tmp_path)
    assert all(w.idle["launch"] > 5_000 for w in a.windows)
    assert host_work(a).idle_us.tolist() == [0.0, 0.0]


def test_a_stretch_across_a_step_boundary_is_split_between_the_steps(tmp_path):
    b = TraceBuilder()
    b.python("loop.py(1): run", 0, 30_000)
    for k in range(3):
        t0 = 10_000.0 * k
        b.step(k, t0, 9_990)
        b.python("work.py(8): prepare", t0 + 6_000, 7_000)  # into the next step
        _ops(b, t0 + 5, 10, 10)
    a = b.analysis(tmp_path)
    hw = host_work(a)
    lo, hi = a.bounds
    # Each window's longest piece lies inside it; the figures add up to the stretches.
    assert (hw.longest_start[hw.longest_us > 0] >= lo[hw.longest_us > 0]).all()
    assert (hw.longest_end[hw.longest_us > 0] <= hi[hw.longest_us > 0]).all()
    inside = covered(hw.idle_intervals, lo[:1], hi[-1:])[0]
    assert hw.idle_us.sum() == pytest.approx(inside, abs=1e-6)
    assert (hw.idle_us[:2] > 6_000).all()  # 4 ms of its own, 3 ms of the next's prepare


def test_a_cpu_only_trace_counts_code_that_calls_no_op(tmp_path):
    b = TraceBuilder(device_properties=[])
    for k in range(3):
        t0 = 10_000.0 * k
        b.step(k, t0, 9_990)
        b.python("prep.py(4): load", t0 + 5, 4_000)
        for j in range(5):
            b.op("aten::mm", t0 + 4_100 + 1_000 * j, 900)  # heavy: the CPU's busy time
    a = b.analysis(tmp_path)
    assert a.cpu_only
    hw = host_work(a)
    assert (hw.idle_us >= 3_990).all()
    assert a.model.name_of(int(hw.longest_frame[0])) == "prep.py(4): load"


def test_the_step_document_and_headline_say_what_the_host_did(tmp_path):
    from tb_diagnostics.logdir import SpanFile
    from tb_diagnostics.report.document import span_document

    b = TraceBuilder()
    preprocess_steps(b, steps=4)
    a = b.analysis(tmp_path)
    f = SpanFile(run="run", worker="worker0", span="1", url="", size=None, mtime=None,
                 relpath="run/worker0.1.pt.trace.json")
    doc = span_document(f, a)
    s = doc["steps"][1]
    assert s["idle_host_work_us"] >= 5_990
    assert s["host_work"]["frame"] == "pipeline.py(40): preprocess"
    assert set(s["host_work"]) == {"us", "start_us", "end_us", "thread", "frame"}
    text = headline(doc)
    assert "mostly while the CPU runs code that launches no device work" in text
    assert "in `pipeline.py(40): preprocess`" in text and "ops per step" not in text
    # The tiny-op steps keep their words.
    b2 = TraceBuilder()
    for k in range(3):
        b2.step(k, 5_000.0 * k, 4_990)
        _ops(b2, 5_000.0 * k + 5, 150, 10, kernel_us=5)
    doc2 = span_document(f, b2.analysis(tmp_path / "tiny"))
    assert "while the CPU launches work (" in headline(doc2)
    assert all(s["host_work"] is None for s in doc2["steps"])


def test_a_mixed_launch_cause_gives_both_shares():
    steps = [{"step": k, "wall_us": 10_000.0, "device_busy_us": 1_000.0,
              "compute_busy_us": 1_000.0, "device_busy": 0.1,
              "idle": {"input_us": 0.0, "sync_us": 0.0, "comm_us": 0.0, "launch_us": 9_000.0,
                       "other_us": 0.0, "profiler_us": 0.0},
              "idle_host_work_us": 4_500.0,
              "host_work": {"us": 3_000.0 + k, "start_us": 0.0, "end_us": 3_000.0,
                            "thread": "t", "frame": "a/b/tok.py(3): tokenise"},
              "verdict": "overhead-bound", "main_idle_cause": "launch", "ops": 300,
              "flags": [], "self_cpu_us": 0.0, "self_device_us": None, "kernels": 300}
             for k in range(1, 4)]
    span = {"span": "1", "file": "run/w.1.pt.trace.json", "steps": steps, "findings": [],
            "errors": [], "notes": [], "verdict": "overhead-bound",
            "device": {"kind": "cuda", "name": None}, "roofline": None, "whatif": []}
    assert headline(span) == (
        "Steps 1–3 are overhead-bound: the GPU is busy 10% of each step and idle 90%, "
        "mostly while the CPU launches work or runs code that launches none (100% of the "
        "idle time: 50% launching, 50% in code that launches none; the longest 3.00 ms in "
        "`tok.py(3): tokenise`; 300 ops per step).")
    # A compute-bound step's little idle time keeps the dispatch words unless the host's
    # own code is most of it.
    for s in steps:
        s.update(compute_busy_us=9_000.0, device_busy_us=9_000.0,
                 idle={**s["idle"], "launch_us": 1_000.0}, idle_host_work_us=500.0,
                 verdict="compute-bound")
    span["verdict"] = "compute-bound"
    assert "mostly while the CPU launches work (100% of the idle time; 300 ops per step)" \
        in headline(span)
    for s in steps:
        s["idle_host_work_us"], s["host_work"]["frame"] = 900.0, None
    assert "mostly while the CPU runs code that launches no device work (100% of the idle " \
        "time; the longest stretch 3.00 ms)" in headline(span)


def _steps_with_work(steps: int) -> SpanAnalysis:
    """``steps`` steps of 3 ms, each 1.5 ms of Python calling no op, then 3 ops."""
    b = TraceBuilder()
    for k in range(steps):
        t0 = 3_000.0 * k
        b.step(k, t0, 2_990)
        b.python("prep.py(1): prep", t0 + 5, 1_500)
        _ops(b, t0 + 1_600, 3, 10)
    raw = json.dumps({**b.top, "traceEvents": b.events}).encode()
    return SpanAnalysis(load_trace_bytes(raw, "steps.pt.trace.json"))


def test_host_work_makes_no_numpy_call_per_step():
    def calls(n: int) -> tuple[int, np.ndarray]:
        a = _steps_with_work(n)
        a.windows  # noqa: B018 - the windows are another view's work
        count = numpy_calls(lambda: host_work(a))
        return count, host_work(a).idle_us

    base, base_idle = calls(60)
    wide, wide_idle = calls(600)
    assert (base_idle > 1_400).all() and (wide_idle > 1_400).all()
    assert wide <= GROWTH * base, (base, wide)


@pytest.mark.shared
def test_timesformer_preprocess_is_host_work_not_launch_overhead():
    a = shared_analysis("tracelens_h100_timesformer_inference")
    hw = host_work(a)
    (w,) = a.windows
    assert w.main_idle_cause == "launch" and w.verdict == "overhead-bound"
    # 215.3 ms from the step's first sync to torch.tensor's aten::lift_fresh, 4.1 ms after
    # the last op: 98% of the launch cause; the rest is dispatch of 3,540 ops.
    assert hw.idle_us[0] == pytest.approx(219_348, abs=5)
    assert hw.idle_us[0] / w.idle["launch"] > 0.98
    assert hw.longest_us[0] == pytest.approx(215_331, abs=5)
    assert a.model.name_of(int(hw.longest_frame[0])) == (
        "transformers/pipelines/video_classification.py(129): preprocess")
