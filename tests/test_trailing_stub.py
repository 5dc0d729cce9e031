"""The stub step a mid-cycle stop leaves (issue 29, item 1): with 8 steps and
``schedule(wait=1, warmup=1, active=3, repeat=2)`` the second cycle holds step 7 and a
~27 µs ``ProfilerStep#8`` that the last ``prof.step()`` opened. It is a profiler artefact:
not a warm step, never what makes the one real step cold, not what the verdict, the
headline or the handler's line judge, and no ``cold-start-step``."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.headline import span_verdict
from tb_diagnostics.analysis.views.warmth import step_walls, trailing_stub
from tb_diagnostics.handler import cycle_line
from tb_diagnostics.rules import run_rules


def _real_step(b: TraceBuilder, n: int, t0: float, wall: float = 35_810.0) -> None:
    """A step of ops, each launching a short kernel: the device mostly idle (the host
    launches), as the issue's step 7."""
    b.step(n, t0, wall)
    for k in range(40):
        ts = t0 + 20 + k * 800
        b.op("aten::add", ts, 30)
        b.launch("add_kernel", ts + 5, ts + 12, 20)


def _stub_trace(b: TraceBuilder) -> None:
    _real_step(b, 7, 0.0)
    b.step(8, 35_820.0, 27.0)  # opened by the last prof.step(); the profiler stops
    b.runtime("cudaDeviceSynchronize", 35_900.0, 60.0)  # the profiler's flush, after it


def _document(b: TraceBuilder, tmp_path):
    """The span's analysis and its report document (the headline added, as the tab does)."""
    import tb_diagnostics
    from tb_diagnostics.report.headline import headline

    path = b.write(tmp_path)
    report = tb_diagnostics.analyze(path, cache=False)
    (doc,) = [s for r in report.document["runs"] for w in r["workers"] for s in w["spans"]]
    return b.analysis(tmp_path), doc | {"headline": headline(doc)}


def test_a_trailing_stub_is_neither_warm_nor_cold_and_judges_nothing(tmp_path):
    b = TraceBuilder()
    _stub_trace(b)
    analysis, doc = _document(b, tmp_path)
    sw = step_walls(analysis)
    assert trailing_stub(analysis) == 1
    assert sw.stub.tolist() == [False, True]
    assert not sw.cold.any()  # 35.81 ms is not "1316× the warm median of 27 µs"
    assert sw.warm.tolist() == [True, False]
    assert "cold-start-step" not in {f.rule for f in run_rules(analysis)}
    # The verdict is step 7's, not the empty stub's.
    verdict = span_verdict(analysis)
    assert verdict.verdict == analysis.windows[0].verdict
    assert [x.steps for x in verdict.split] == [(7,)]
    step7, step8 = doc["steps"]
    assert (step7["cold"], step7["stub"], step8["cold"], step8["stub"]) == \
        (False, False, False, True)
    assert "artefact" in step8["flags"] and "artefact" not in step7["flags"]
    assert any(n.startswith("step 8 (27 µs) is the stub the profiler's last step() opened")
               for n in doc["notes"]), doc["notes"]
    assert doc["headline"].startswith(f"Step 7 is {step7['verdict']}:"), doc["headline"]
    assert "step 8" not in doc["headline"].lower()
    line = cycle_line(doc)
    assert line.startswith(f"tb-diagnostics: step 7 {step7['verdict']} ("), line
    assert "cold-start-step" not in line


def test_a_real_first_step_is_still_cold_beside_a_stub(tmp_path):
    # Steps 1 (cold, 10 ms), 2 and 3 (1 ms each), then the stub 4: step 1 is cold against
    # the median of 2-3, never against the stub's 20 µs.
    b = TraceBuilder()
    b.step(1, 0.0, 9_999)
    b.op("aten::mm", 10, 9_000)
    b.launch("gemm_kernel", 20, 30, 50)
    b.steady_steps(2, first=2, start=10_000)
    b.step(4, 12_000, 20)
    analysis, _ = _document(b, tmp_path)
    sw = step_walls(analysis)
    assert sw.stub.tolist() == [False, False, False, True]
    assert sw.cold.tolist() == [True, False, False, False]
    assert sw.rest_median == pytest.approx(1000.0, abs=2)
    assert sw.warm.tolist() == [False, True, True, False]
    (cold,) = [f for f in run_rules(analysis) if f.rule == "cold-start-step"]
    assert "of steps 2–3" in cold.message, cold.message


@pytest.mark.parametrize("work", ["op", "launch", "record_function"])
def test_a_last_step_that_runs_anything_is_a_step(tmp_path, work):
    b = TraceBuilder()
    b.steady_steps(3)
    t = 3000.0
    b.step(4, t, 30)
    if work == "op":
        b.op("aten::zero_", t + 5, 10)
    elif work == "launch":  # a launch outside any op (a CUDA graph replay, a raw kernel)
        b.launch("raw_kernel", t + 5, t + 12, 5)
    else:
        b.annotation("eval_loss", t + 5, 10)
    analysis, _ = _document(b, tmp_path)
    assert trailing_stub(analysis) == -1
    assert not step_walls(analysis).stub.any()


def test_a_single_step_or_a_dataloader_call_in_the_stub(tmp_path):
    # The only step is never a stub, even empty: there is nothing else to judge.
    b = TraceBuilder()
    b.step(1, 0, 30)
    assert trailing_stub(_document(b, tmp_path / "a")[0]) == -1
    # The loop's last next() (a DataLoader call ending the epoch) may run in the stub.
    b = TraceBuilder()
    b.steady_steps(3)
    b.step(4, 3000, 40)
    b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 3005, 20)
    assert trailing_stub(_document(b, tmp_path / "b")[0]) == 3


torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_a_real_profile_stopped_mid_cycle(tmp_path, caplog):
    """The issue's loop on the CPU: the second cycle's file holds step 7 and the stub 8."""
    import tb_diagnostics

    caplog.set_level(logging.INFO, logger="tb_diagnostics")
    run = tmp_path / "log" / "run"
    handler = tb_diagnostics.trace_handler(run, worker_name="w0", echo=False,
                                           background=False)
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=2)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(8):
            opt.zero_grad()
            model(torch.randn(32, 128)).sum().backward()
            opt.step()
            prof.step()
    files = sorted(run.iterdir(), key=lambda p: p.stat().st_mtime_ns)
    assert len(files) == 2
    report = tb_diagnostics.analyze(files[1], cache=False)
    (span,) = [s for r in report.document["runs"] for w in r["workers"] for s in w["spans"]]
    steps = span["steps"]
    assert [s["step"] for s in steps] == [7, 8]
    assert [s["stub"] for s in steps] == [False, True]
    assert steps[1]["ops"] == 0 and "artefact" in steps[1]["flags"]
    assert not any(s["cold"] for s in steps)
    assert "cold-start-step" not in {f["rule"] for f in span["findings"]}
    assert [x["steps"] for x in span["verdict_split"]] == [[7]]
    assert span["verdict"] == steps[0]["verdict"]
    lines = [r.getMessage() for r in caplog.records if r.name == "tb_diagnostics"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("tb-diagnostics: steps 2–4 "), lines
    assert lines[1].startswith(f"tb-diagnostics: step 7 {steps[0]['verdict']} ("), lines
    assert "cold-start-step" not in lines[1]
    # The first, complete cycle has no stub: its last step ran the loop's work.
    first = tb_diagnostics.analyze(files[0], cache=False).document
    (span0,) = [s for r in first["runs"] for w in r["workers"] for s in w["spans"]]
    assert [s["step"] for s in span0["steps"]] == [2, 3, 4]
    assert not any(s["stub"] for s in span0["steps"])
    assert np.all([s["ops"] > 0 for s in span0["steps"]])


def test_the_tab_says_why_the_stub_is_badged(tmp_path):
    from tb_diagnostics.logdir import scan_logdir
    from tb_diagnostics.server.present import summarise

    b = TraceBuilder(tmp_path / "log" / "run")
    _stub_trace(b)
    b.write()
    (f,) = scan_logdir(str(tmp_path / "log")).files
    doc = summarise(f, b.analysis())
    step7, step8 = doc["steps"]
    assert "artefact" in step8["flags"] and "nothing ran in it" in step8["flag_why"]["artefact"]
    assert step7["flag_why"] is None
