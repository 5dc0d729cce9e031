"""The renderings say what decided a verdict besides compute_busy (issue 23): the backlog a
host-limited step's device drained, one-time costs left out, utilisation that is only a
lower bound where the trace lacks device activity, and iterations named as iterations."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from rules.conftest import TraceBuilder
from rules.test_launch_backlog_drain import drain_steps
from test_verdict_inputs import compile_in_step

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.html import palette, render_html
from tb_diagnostics.report.text import headline, render_markdown, render_text


@pytest.fixture
def builder(tmp_path) -> TraceBuilder:
    return TraceBuilder(tmp_path / "log")


def _doc(b: TraceBuilder) -> dict:
    b.write()
    return build_document(scan_logdir(str(b.directory)))


def _span(doc: dict) -> dict:
    (span,) = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    return span


def test_the_headline_says_the_host_is_the_limit_of_a_draining_backlog(builder):
    drain_steps(builder)
    assert headline(_span(_doc(builder))) == (
        "Steps 2–8 are overhead-bound: the host issues a step every 119 µs for 60 µs of "
        "device work (medians); the device ran on a backlog that shrank by 59 µs a step "
        "(941 µs → 528 µs of queued device time); each step's end waits on the device for "
        "100% of its time, mostly in `aten::mm`'s kernels; step 1 is cold: 1.06 ms, 18× the "
        "warm median of 60 µs.")


def _step(n, verdict, reason=None, flags=(), **idle):
    idle = {f"{c}_us": idle.get(c, 0.0) for c in ("input", "sync", "comm", "launch", "other",
                                                   "profiler", "compile", "module_load")}
    return {"step": n, "wall_us": 1000.0, "device_busy_us": 300.0, "device_busy": 0.3,
            "compute_busy_us": 300.0, "compute_busy": 0.3, "exposed_collective_us": 0.0,
            "idle": idle, "verdict": verdict, "verdict_reason": reason,
            "main_idle_cause": "launch", "ops": 12, "flags": list(flags), "cold": False,
            "self_cpu_us": 0.0, "self_device_us": 0.0, "kernels": 2,
            "host_period_us": 1000.0, "device_work_us": 300.0, "backlog_start_us": 900.0,
            "backlog_end_us": 200.0}


def _span_of(steps, **keys):
    return {"span": "1", "file": "run/worker0.1.pt.trace.json", "steps": steps,
            "findings": [], "errors": [], "notes": [], "verdict": steps[0]["verdict"],
            "verdict_split": [], "device": {"kind": "cuda", "name": None}, "roofline": None,
            "whatif": [], **keys}


def test_one_backlog_step_among_others_is_said_apart():
    reason = ("the host issues a step every 1.00 ms for 300 µs of device work; the device ran "
              "on a backlog that shrank by 700 µs (900 µs → 200 µs of queued device time)")
    span = _span_of([_step(1, "overhead-bound", reason), _step(2, "overhead-bound", launch=700),
                     _step(3, "overhead-bound", launch=700)])
    assert headline(span) == (
        "Steps 1–3 are overhead-bound: the GPU is busy 30% of each step and idle 47%, mostly "
        "while the CPU launches work (100% of the idle time; 12 ops per step); in step 1 "
        f"{reason}.")


def test_inferred_iterations_are_called_iterations():
    steps = [_step(k, "overhead-bound", flags=["inferred"], launch=700) for k in range(4)]
    steps[0]["wall_us"], steps[0]["cold"] = 9000.0, True
    assert headline(_span_of(steps)) == (
        "Iterations 1–3 are overhead-bound: the GPU is busy 30% of each iteration and idle "
        "70%, mostly while the CPU launches work (100% of the idle time; 12 ops per "
        "iteration); iteration 0 is cold: 9.00 ms, 9.0× the warm median of 1.00 ms.")


def test_one_time_costs_are_left_out_and_shown_apart(builder):
    compile_in_step(builder)
    doc = _doc(builder)
    span = _span(doc)
    # Step 3 idles 5 ms of its 6 ms while the host compiles: compile-bound, and weighed by
    # the 1 ms it was judged on (the span's verdict weighs the time judged).
    assert headline(span) == (
        "Steps 1–2, 4 are compute-bound (3 compute-bound steps take 3.00 ms of 4.00 ms "
        "judged; 1 compile-bound, step 3, takes 1.00 ms (6.00 ms with one-time costs)): the "
        "GPU is busy 88% of each step and idle 12%, mostly with nothing recorded on the host "
        "(60% of the idle time); each step's end waits on the host for 100% of its time, "
        "the largest part outside any op (33% of it).")
    lines = render_text(doc).splitlines()
    head = next(x for x in lines if x.strip().startswith("step "))
    assert head.rstrip().endswith("other ms  compile ms")
    row = next(x for x in lines if x.strip().startswith("#3 "))
    assert row.split()[:4] == ["#3", "6.00", "15%", "compile-bound"]
    assert row.split()[-1] == "5.00"
    page = render_html(doc)
    assert f'fill="{palette()["compile"]}"><title>step 3: compiling (one-time) 5.00 ms' in page
    assert "compiling (one-time)</span>" in page  # the legend


def missing_activity(b: TraceBuilder) -> None:
    """Two 1 ms steps of 20 launches each, of which only 8 recorded a kernel (the trace of
    one device of a model split over several); the 8 kernels of 100 µs cover 760 µs."""
    for s in range(2):
        t0 = s * 1000.0
        b.step(s + 1, t0, 999)
        for k in range(20):
            ts = t0 + 10 + k * 45
            if k % 5 in (0, 2):
                b.launch("gemm_kernel", ts, ts + 20, 100)
            else:
                b.runtime("cudaLaunchKernel", ts, 5)


LOWER = ("Device utilisation is a lower bound: 24 of 40 kernel launches and copies have no "
         "device activity in the trace.")


def test_missing_activity_makes_utilisation_a_lower_bound_everywhere(builder):
    missing_activity(builder)
    doc = _doc(builder)
    span = _span(doc)
    assert span["activity_complete"] is False
    assert span["activity_coverage"] == {"launches": 40, "launches_missing": 24,
                                         "activities": 16, "no_launch": 0, "pre_window": 0}
    text = headline(span)
    assert text.startswith("Steps 1–2 are mixed: the GPU is busy at least 76% of each step")
    assert text.endswith(LOWER)
    # Next to the verdict in the text report, the Markdown and the HTML export.
    lines = render_text(doc).splitlines()
    verdict = next(x for x in lines if x.startswith("  verdict: "))
    assert verdict.endswith(LOWER)
    assert f"**Verdict:** {LOWER}" not in render_markdown(doc)
    assert LOWER in next(x for x in render_markdown(doc).splitlines()
                         if x.startswith("**Verdict:**"))
    assert LOWER in render_html(doc)


def test_the_tab_shows_the_lower_bound_in_its_headline(builder, tmp_path):
    from tb_diagnostics.opening import open_analysis
    from tb_diagnostics.server.present import summarise

    missing_activity(builder)
    doc = _doc(builder)
    f = scan_logdir(str(builder.directory)).runs[0].workers[0].spans[0]
    summary = summarise(f, open_analysis(f, None, None), _span(doc))
    assert summary["headline"].endswith(LOWER)


def test_a_complete_trace_says_nothing_of_bounds(builder):
    builder.steady_steps(3)
    text = headline(_span(_doc(builder)))
    assert "lower bound" not in text and "at least" not in text


def test_a_full_device_is_no_lower_bound_of_itself():
    span = _span_of([_step(1, "compute-bound"), _step(2, "compute-bound")],
                    activity_complete=False,
                    activity_coverage={"launches": 94, "launches_missing": 94,
                                       "activities": 77, "no_launch": 77, "pre_window": 0})
    for s in span["steps"]:
        s["compute_busy_us"] = s["device_busy_us"] = s["wall_us"]
    assert headline(span) == (
        "Steps 1–2 are compute-bound: the GPU is busy 100% of each step. Device utilisation is "
        "a lower bound: 94 of 94 kernel launches and copies have no device activity in the "
        "trace; 77 of 77 device activities have no launch.")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the tab's JS")
def test_the_tabs_bar_stacks_one_time_costs_and_reads_old_documents():
    app = Path(__file__).resolve().parents[1] / "plugin" / "tb_diagnostics" / "static" / "app"
    step = {"compute_busy_us": 880, "idle": {"launch_us": 48, "other_us": 72,
                                             "compile_us": 4996, "module_load_us": 4}}
    old = {"device_busy_us": 880, "idle": {"launch_us": 48, "other_us": 72}}
    script = (f"import {{ LAYERS, CAUSE_LABEL, partUs }} from "
              f"{json.dumps((app / 'format.js').as_uri())};"
              f"const s = {json.dumps(step)}, o = {json.dumps(old)};"
              "console.log(JSON.stringify([LAYERS.slice(-2), CAUSE_LABEL.compile,"
              " LAYERS.reduce((a, c) => a + partUs(s, c), 0),"
              " LAYERS.reduce((a, c) => a + partUs(o, c), 0)]));")
    out = subprocess.run([shutil.which("node"), "--input-type=module", "-e", script],
                         capture_output=True, text=True, check=True, timeout=60)
    # The bar's parts add up to the wall; a document without the keys stacks no NaN.
    assert json.loads(out.stdout) == [["compile", "module_load"], "compiling (one-time)",
                                      6000, 1000]
    css = (app.parent / "style.css").read_text()
    assert css.count("--c-compile:") == 2 and css.count("--c-module_load:") == 2  # both themes
