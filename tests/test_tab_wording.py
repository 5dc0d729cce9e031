"""Sentences that used to contradict themselves (issue 29 item 7), on their exact text:

- a CPU-only span's verdict said "compute-bound … mostly while the CPU launches work";
- the roofline's unpriced device work was "(no launching op)" with "its launch is not in
  the trace (no op to price)" even where the launch call is in the trace, inside no op;
- a step the verdict is about was badged "artefact" with nothing saying why (the Qwen run's
  only step: a flush sync after it ended, 0.24% of it the profiler's own time): now
  tests/test_step_flags.py, where that decision moved (analysis/views/step_flags.py).
"""

from __future__ import annotations

from conftest import analyse
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.report.roofline import _unowned_words
from tb_diagnostics.report.text import headline


def _step(n, wall, busy, verdict, cause, **idle):
    idle = {f"{c}_us": idle.get(c, 0.0)
            for c in ("input", "sync", "comm", "launch", "other", "profiler")}
    return {"step": n, "wall_us": wall, "device_busy_us": busy, "device_busy": busy / wall,
            "idle": idle, "verdict": verdict, "main_idle_cause": cause, "ops": 6,
            "flags": [], "self_cpu_us": 0.0, "self_device_us": None, "kernels": 0}


def _span(steps, kind):
    return {"span": "1", "file": "run/worker0.1.pt.trace.json", "steps": list(steps),
            "findings": [], "errors": [], "notes": [], "verdict": steps[0]["verdict"],
            "device": {"kind": kind, "name": None}, "roofline": None, "whatif": []}


def test_a_cpu_only_compute_bound_span_never_idles_while_the_cpu_launches():
    # matmul_add-size1024's shape: heavy mm calls 97% of each step, the rest dispatch.
    steps = [_step(k, 10_000, 9_700, "compute-bound", "launch", launch=204, other=96)
             for k in range(1, 4)]
    assert headline(_span(steps, "cpu")) == (
        "Steps 1–3 are compute-bound: the CPU computes in heavy ops 97% of each step and "
        "spends 3% outside them, mostly in short op calls and their dispatch (68% of that "
        "time; 6 ops per step).")


def test_a_gpu_span_keeps_its_words():
    steps = [_step(k, 10_000, 9_700, "compute-bound", "launch", launch=204, other=96)
             for k in range(1, 4)]
    assert headline(_span(steps, "cuda")) == (
        "Steps 1–3 are compute-bound: the GPU is busy 97% of each step and idle 3%, mostly "
        "while the CPU launches work (68% of the idle time; 6 ops per step).")


def test_unpriced_device_work_says_which_launch_is_missing():
    assert _unowned_words("aten::foo") == ("aten::foo", "no cost model for this op")
    assert _unowned_words("") == (
        "(launched outside any op)",
        "its launch call is inside no op, so no op's shapes say what it computes")
    assert _unowned_words(None) == (
        "(launch not in the trace)",
        "the trace holds no launch call for it, so no op's shapes say what it computes")


def test_a_launch_outside_every_op_is_not_called_missing(trace, tmp_path):
    trace.step(1, 0, 1000)
    trace.op("aten::mm", 10, 100)
    trace.launch(20, 10, "gemm_kernel", 40, 50)
    trace.launch(300, 10, "orphan_kernel", 320, 80)  # its launch call is in no op
    # A kernel whose launch call is not in the trace (launched before the window).
    trace.x("kernel", "backlog_kernel", 500, 30, pid=1, tid=7, correlation=999, stream=7,
            device=0)
    rf = roofline(analyse(trace, tmp_path))
    by_name = {name: (count, us) for name, count, us in rf.unowned}
    assert by_name.get("") == (1, 80.0)
    assert by_name.get(None) == (1, 30.0)
