"""The span's verdict weighs the time its steps were judged on (issue 23, item 4 with 5):
the warm wall less the profiler's own time and one-time costs (compilation, module loads),
as each step's own verdict does. A step that compiles for 50 ms and runs 1 ms of work
weighs 1 ms."""

from __future__ import annotations

from pathlib import Path

import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.headline import judged_us, span_verdict, verdict_by_time
from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.compare import run_summary
from tb_diagnostics.report.text import headline


def _compute_steps_and_one_that_compiles(b: TraceBuilder, compile_us: float = 50_000.0) -> None:
    """Four steps: 1, 2 and 4 run four 220 µs kernels in 1 ms (compute-bound); step 3
    compiles for ``compile_us`` (``entire_frame_compile`` with a ``dynamo_timed`` inside),
    then spends 1 ms on the host launching nothing."""
    t = 0.0
    for s in range(1, 5):
        if s == 3:
            b.step(s, t, compile_us + 1000)
            b.op("entire_frame_compile", t + 2, compile_us - 4)
            b.op("_compile.compile_inner (dynamo_timed)", t + 3, compile_us - 6)
            b.op("aten::empty", t + compile_us + 10, 900)
            t += compile_us + 1000
            continue
        b.step(s, t, 1000)
        for k in range(4):
            ts = t + 10 + k * 240
            b.op("aten::mm", ts, 15)
            b.launch("gemm_kernel", ts + 5, ts + 12, 220)
        t += 1000.0


def test_judged_us_reads_windows_and_step_documents():
    assert judged_us(1000.0, {"profiler": 100.0, "compile": 300.0, "sync": 50.0}) == 600.0
    assert judged_us(1000.0, {"compile_us": 300.0, "module_load_us": 100.0}) == 600.0
    assert judged_us(100.0, {"compile": 300.0}) == 0.0


def test_verdict_by_time_weighs_the_time_judged():
    split = verdict_by_time([(1, "compute-bound", 1000.0, 1000.0),
                             (2, "overhead-bound", 51_000.0, 1000.0),
                             (3, "compute-bound", 1000.0, 1000.0)])
    assert [(x.verdict, x.wall_us, x.judged_us) for x in split] == [
        ("compute-bound", 2000.0, 2000.0), ("overhead-bound", 51_000.0, 1000.0)]
    # Without a time judged, the wall is.
    (one,) = verdict_by_time([(1, "mixed", 5.0)])
    assert one.judged_us == 5.0


def test_a_compiling_step_does_not_decide_the_span(tmp_path: Path):
    b = TraceBuilder(tmp_path / "log" / "run")
    _compute_steps_and_one_that_compiles(b)
    a = b.analysis()
    w3 = a.windows[2]
    assert w3.idle["compile"] == pytest.approx(49_996.0)
    # The device idles 49,996 of its 51,000 µs while the host compiles: compile-bound.
    assert (w3.verdict, w3.main_idle_cause) == ("compile-bound", "compile")
    v = span_verdict(a)
    # By wall, step 3's 51 ms would outweigh the other three steps' 3 ms.
    assert v.verdict == "compute-bound"
    assert v.warm_wall_us == pytest.approx(54_000.0)
    assert v.warm_judged_us == pytest.approx(4_004.0)
    b.write()
    doc = build_document(scan_logdir(str(tmp_path / "log")))
    (span,) = [s for r in doc["runs"] for wk in r["workers"] for s in wk["spans"]]
    assert span["verdict"] == "compute-bound"
    top, other = span["verdict_split"]
    assert (top["verdict"], top["steps"], top["judged_us"], top["wall_us"]) == (
        "compute-bound", [1, 2, 4], 3000.0, 3000.0)
    assert other["steps"] == [3] and other["wall_us"] == 51_000.0
    assert other["judged_us"] == pytest.approx(1004.0)
    assert top["share"] == pytest.approx(3000.0 / 4004.0, abs=1e-6)
    # The headline gives the time judged, and says it is.
    assert ("(3 compute-bound steps take 3.00 ms of 4.00 ms judged; 1 compile-bound, step 3, "
            "takes 1.00 ms (51.00 ms with one-time costs))") in headline(span)
    # A compare of the run says the same verdict.
    assert run_summary(doc["runs"][0])["verdict"] == "compute-bound"


def test_a_window_that_only_compiles_is_compile_bound(tmp_path: Path):
    """No steps: 10 ms of Dynamo/Inductor compilation and 0.5 ms of eager work. It was
    called overhead-bound ("nothing recorded on the host") by its 0.5 ms rest."""
    b = TraceBuilder(tmp_path / "log" / "run")
    b.op("entire_frame_compile", 0, 10_000)
    b.op("_compile.compile_inner (dynamo_timed)", 1, 9_998)
    b.op("aten::mm", 10_010, 20)
    b.launch("gemm_kernel", 10_015, 10_030, 300)
    b.write()
    doc = build_document(scan_logdir(str(tmp_path / "log")))
    (span,) = [s for r in doc["runs"] for wk in r["workers"] for s in wk["spans"]]
    (w,) = span["steps"]
    assert (w["verdict"], w["main_idle_cause"]) == ("compile-bound", "compile")
    assert span["verdict"] == "compile-bound"
    compile_us, wall = w["idle"]["compile_us"], w["wall_us"]
    assert compile_us >= 0.5 * wall
    assert headline(span).startswith(
        "The span is compile-bound: the device sits idle 10.00 ms of the span's "
        f"{wall / 1000:.2f} ms ({100 * compile_us / wall:.0f}%) while the host compiles "
        "(Dynamo, AOTAutograd, Inductor), a one-time cost")
    assert "compile-overhead" in {f["rule"] for f in span["findings"]}


def test_a_step_compiling_under_half_its_wall_is_judged_on_the_rest(tmp_path: Path):
    b = TraceBuilder(tmp_path / "log" / "run")
    _compute_steps_and_one_that_compiles(b, compile_us=800.0)
    w3 = b.analysis().windows[2]
    assert w3.idle["compile"] < 0.5 * w3.wall_us
    assert w3.verdict != "compile-bound" and w3.main_idle_cause != "compile"
