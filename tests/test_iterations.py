"""Iterations of traces without ProfilerStep#: inferred from what repeats on the main thread.

Hand-made traces give exact windows (optimizer steps, DataLoader fetches, labels, a forward
signature, and the edge cases: one iteration, nested optimizers, a label repeating inside
an iteration); the shared step-less traces and workloads recorded with ``--no-schedule``
check that each visible iteration becomes one step, counted independently from the raw
events.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TraceBuilder, analyse
from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir

REPO = Path(__file__).resolve().parents[1]


def windows(tr: TraceBuilder, tmp_path: Path):
    a = analyse(tr, tmp_path)
    return a, [(w.host_start, w.host_end) for w in a.windows]


def training_loop(tr: TraceBuilder, n: int, *, t0: float = 0.0, period: float = 100.0,
                  fetch: bool = True, zero_grad: bool = True, opt: str = "SGD") -> None:
    """``n`` iterations: fetch [0, 10), zero_grad, forward ops, a launch, optimizer step."""
    for k in range(n):
        t = t0 + k * period
        if fetch:
            tr.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                 t, 10)
        if zero_grad:
            tr.x("user_annotation", f"Optimizer.zero_grad#{opt}.zero_grad", t + 11, 2)
        tr.op("aten::conv2d", t + 15, 30)
        tr.launch(t + 20, 3, "conv_kernel", t + 25, 40)
        tr.op("aten::relu", t + 50, 10)
        tr.x("user_annotation", f"Optimizer.step#{opt}.step", t + 80, 15)


def test_optimizer_steps_cut_at_each_fetch(trace, tmp_path):
    training_loop(trace, 4)
    a, win = windows(trace, tmp_path)
    # Each iteration starts at its fetch; the last one ends where its optimizer step does.
    assert win == [(0, 100), (100, 200), (200, 300), (300, 395)]
    assert all(w.flags == ["inferred"] and w.row == -1 for w in a.windows)
    assert [w.step for w in a.windows] == [0, 1, 2, 3]
    assert "Optimizer.step#SGD.step" in a.host_steps.inferred_from
    assert "DataLoader fetch" in a.host_steps.inferred_from
    # Verdicts are the steps' own: each window holds its 40 µs kernel.
    assert [w.device_busy_us for w in a.windows] == [40, 40, 40, 40]


def test_optimizer_steps_alone_end_the_iterations(trace, tmp_path):
    training_loop(trace, 3, fetch=False, zero_grad=False)
    _, win = windows(trace, tmp_path)
    # Iteration k runs from the first call after step k-1 ended (the next conv2d) to the
    # end of step k; times are since the first event (the first conv2d, at 15).
    assert win == [(0, 100), (100, 200), (200, 280)]


def test_nested_optimizers_count_once(trace, tmp_path):
    # Lookahead wraps SGD: two Optimizer.step# events per iteration, one nested in the other.
    for k in range(3):
        t = k * 100
        trace.op("aten::mm", t, 60)
        trace.x("user_annotation", "Optimizer.step#Lookahead.step", t + 70, 20)
        trace.x("user_annotation", "Optimizer.step#SGD.step", t + 72, 10)
    a, win = windows(trace, tmp_path)
    assert win == [(0, 100), (100, 200), (200, 290)]
    assert "Lookahead" in a.host_steps.inferred_from


def test_one_iteration_stays_one_window(trace, tmp_path):
    training_loop(trace, 1)
    a, _ = windows(trace, tmp_path)
    (w,) = a.windows
    assert (w.step, w.flags, a.host_steps.inferred_from) == (None, [], None)


def test_dataloader_fetches_drop_a_trailing_fragment(trace, tmp_path):
    training_loop(trace, 3, zero_grad=False)
    # The loop's last fetch (the one that raised StopIteration): a fragment, not a step.
    trace.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            300, 5)
    a, win = windows(trace, tmp_path)
    assert win == [(0, 100), (100, 200), (200, 300)]
    assert a.host_steps.note.startswith("no ProfilerStep# events: 3 iterations inferred")


def test_a_label_repeating_inside_an_iteration_does_not_cut_it(trace, tmp_path):
    # "forward" once per iteration, "attention" three times inside it, "log" twice beside it.
    for k in range(3):
        t = k * 100
        trace.x("user_annotation", "forward", t, 50)
        for j in range(3):
            trace.x("user_annotation", "attention", t + 5 + 15 * j, 10)
            trace.op("aten::bmm", t + 6 + 15 * j, 8)
        trace.x("user_annotation", "log", t + 60, 5)
        trace.x("user_annotation", "backward", t + 66, 20)
        trace.x("user_annotation", "log", t + 90, 5)
    a, win = windows(trace, tmp_path)
    assert win == [(0, 100), (100, 200), (200, 295)]
    assert a.host_steps.inferred_from == "the repeating record_function label 'forward'"


def test_a_label_used_several_times_per_iteration_groups_by_its_period(trace, tmp_path):
    # Only "block" is labelled, three times per iteration; what follows the third differs.
    for k in range(3):
        t = k * 100
        for j in range(3):
            trace.x("user_annotation", "block", t + 20 * j, 10)
            trace.op("aten::add" if j < 2 else "aten::mse_loss", t + 20 * j + 12, 5)
        trace.op("aten::sum", t + 70, 20)
    a, win = windows(trace, tmp_path)
    assert win == [(0, 100), (100, 200), (200, 290)]
    assert "3 per iteration" in a.host_steps.inferred_from


def test_a_label_deep_in_a_wrapper_cuts_at_the_wrapper(trace, tmp_path):
    # The benchmark shape of the HTA AlexNet traces: one wrapper around everything, one
    # per-iteration wrapper each holding a cache clear and the forward.
    trace.x("user_annotation", "[run]", 0, 1000)
    trace.op("aten::empty", 5, 5)
    for k, t in enumerate((100, 500)):
        trace.x("user_annotation", f"[iteration {k}]", t, 300 - 100 * k)
        trace.x("user_annotation", "[clear_cache]", t + 1, 20)
        trace.op("aten::conv2d", t + 30, 100)
    a, win = windows(trace, tmp_path)
    assert win == [(100, 500), (500, 700)]
    assert a.host_steps.inferred_from == "the repeating record_function label '[clear_cache]'"


def test_a_repeating_forward_signature(trace, tmp_path):
    trace.op("aten::randn", 0, 40)  # set-up, once
    for k in range(4):
        t = 50 + k * 100
        for j, name in enumerate(("aten::to", "aten::conv2d", "aten::relu", "aten::linear",
                                  "aten::mse_loss")):
            trace.op(name, t + 15 * j, 10)
    a, win = windows(trace, tmp_path)
    assert win == [(50, 150), (150, 250), (250, 350), (350, 420)]
    assert "aten::to" in a.host_steps.inferred_from


def test_nothing_repeating_is_one_window(trace, tmp_path):
    for j, name in enumerate(("aten::randn", "aten::mm", "aten::add", "aten::sum")):
        trace.op(name, 10 * j, 8)
    a, _ = windows(trace, tmp_path)
    assert [w.step for w in a.windows] == [None]


def test_inferred_steps_in_the_report_and_the_tab(trace, tmp_path):
    training_loop(trace, 3)
    trace.write(tmp_path / "log" / "run" / "worker0.1.pt.trace.json")
    doc = build_document(scan_logdir(str(tmp_path / "log")))
    (span,) = doc["runs"][0]["workers"][0]["spans"]
    assert [s["step"] for s in span["steps"]] == [0, 1, 2]
    assert all("inferred" in s["flags"] for s in span["steps"])
    assert any("3 iterations inferred from the optimizer steps" in n for n in span["notes"])
    assert not any("analysed as one window" in n for n in span["notes"])


# ---- real traces ---------------------------------------------------------------------------
def raw_events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def host_steps_of(shared_traces: Path, run: str):
    from tb_diagnostics.analysis.steps import find_host_steps
    from tb_diagnostics.trace import load_trace

    (path,) = (shared_traces / run).iterdir()
    return path, find_host_steps(load_trace(str(path)))


@pytest.mark.shared
def test_shared_resnet_without_steps_has_one_step_per_optimizer_step(shared_traces):
    path, hs = host_steps_of(shared_traces, "kineto_2021jan_resnet50_autograd_api_nosteps")
    events = raw_events(path)
    opt = sorted(e["ts"] for e in events if e.get("name", "").startswith("Optimizer.step#"))
    fetches = sorted(e["ts"] for e in events
                     if e.get("name", "").startswith("enumerate(DataLoader)#"))
    assert len(hs) == len(opt) == len(fetches) == 6
    assert hs.inferred
    # Each step starts at its fetch and holds exactly one optimizer step.
    # (Model times are since its first event: compared as offsets from the first fetch.)
    starts = [round(float(s - hs.host_start[0]), 1) for s in hs.host_start]
    assert starts == [round(t - fetches[0], 1) for t in fetches]
    for k, t in enumerate(opt):
        assert hs.host_start[k] <= t - fetches[0] + hs.host_start[0] < hs.host_end[k]


@pytest.mark.shared
@pytest.mark.parametrize("run", ["hta_a100_alexnet_cuda_sync", "hta_a100_cupti_counters"])
def test_shared_benchmarks_have_one_step_per_forward_pass(shared_traces, run):
    path, hs = host_steps_of(shared_traces, run)
    events = raw_events(path)
    # Each benchmarked forward pass (warm-up, then measured) begins with a cache clear.
    clears = [e for e in events if e.get("name") == "[param|clear_cache]"
              and e.get("cat") == "user_annotation"]
    assert len(hs) == len(clears) == 2
    assert "[param|clear_cache]" in hs.inferred_from


@pytest.mark.shared
def test_shared_excerpt_without_iterations_stays_one_window(shared_traces):
    _, hs = host_steps_of(shared_traces, "hta_2022_legacy_categories_tiny")
    assert len(hs) == 0


# ---- workloads recorded without a schedule --------------------------------------------------
def run_report(logdir: Path, run: str, tmp_path: Path) -> dict:
    env = dict(os.environ, TB_DIAGNOSTICS_CACHE=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "plugin"),
                                                      env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", "report", str(logdir),
                           "--run", run, "--format", "json"], capture_output=True, text=True,
                          timeout=240, env=env, check=True)
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize(("script", "argv", "iterations"), [
    ("02_train_cnn", ["--steps", "4"], 4),  # optimizer steps and DataLoader fetches
    ("01_matmul_add", ["--steps", "5"], 5),  # a record_function label per iteration
])
def test_workloads_without_a_schedule_get_one_step_per_iteration(tmp_path, script, argv,
                                                                  iterations):
    logdir = tmp_path / "log"
    cmd = [sys.executable, str(REPO / "workloads" / f"{script}.py"), *argv, "--no-schedule",
           "--logdir", str(logdir), "--run", "nosched", "--device", "cpu"]
    subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=True)
    (trace_file,) = (logdir / "nosched").iterdir()
    assert "ProfilerStep#" not in gzip.decompress(trace_file.read_bytes()).decode()
    doc = run_report(logdir, "nosched", tmp_path)
    (span,) = doc["runs"][0]["workers"][0]["spans"]
    assert [s["step"] for s in span["steps"]] == list(range(iterations))
    assert all("inferred" in s["flags"] for s in span["steps"])
    assert all(s["verdict"] for s in span["steps"])


def test_markers_at_one_instant_infer_nothing():
    """Found by the property test: fetches that all start at the same time."""
    import json

    from tb_diagnostics.analysis.span import SpanAnalysis
    from tb_diagnostics.trace.load import load_trace_bytes

    fetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    events = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 0, "tid": 1, "ts": 0.0, "dur": 0.0}
              for n in ("aten::mm", fetch, fetch)]
    a = SpanAnalysis(load_trace_bytes(json.dumps({"traceEvents": events}).encode(), "t.json"))
    assert len(a.windows) == 1 and a.windows[0].step is None
