"""A span of very many steps gives the tab a bounded document (issue: hardening)."""

from __future__ import annotations

import json

from conftest import TraceBuilder
from tb_diagnostics.cli import main
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.server.bounded import MAX_TAB_STEPS, bound_steps
from tb_diagnostics.server.loader import Progress
from tb_diagnostics.server.present import load_and_summarise

STEPS = 5000


def _many_steps(tmp_path):
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    ts = 0
    for n in range(STEPS):
        # Every 997th step is slow: the tab must keep those.
        wall = 1000 if n % 997 == 0 else 100
        t.step(n, ts, wall)
        t.launch(ts + 5, 5, "k", ts + 20, 50)
        ts += wall
    t.write(tmp_path / "log" / "r" / "w.1.pt.trace.json")
    return tmp_path / "log"


def test_the_tab_gets_at_most_the_limit_and_the_cli_every_step(tmp_path, capsys):
    log = _many_steps(tmp_path)
    f = scan_logdir(str(log)).files[0]
    analysis, full = load_and_summarise(f, Progress(file=f))
    assert len(full["steps"]) == STEPS  # the compare and run routes read every step
    doc = bound_steps(full)
    steps = doc["steps"]
    assert len(steps) == MAX_TAB_STEPS and doc["steps_total"] == STEPS
    numbers = [s["step"] for s in steps]
    assert numbers == sorted(numbers)
    assert numbers[:100] == list(range(100)) and numbers[-100:] == list(range(STEPS - 100, STEPS))
    assert {n for n in range(STEPS) if n % 997 == 0} <= set(numbers)  # the slowest
    # Each row still names its window, so the step route opens the right one.
    assert all(analysis.windows[s["index"]].step == s["step"] for s in steps)
    summary = doc["steps_summary"]
    assert summary["steps"] == STEPS and sum(summary["verdicts"].values()) == STEPS
    assert any("5,000 steps: the tab shows 2,000" in n for n in doc["notes"])
    for p in doc["whatif"]:
        assert len(p["per_step"]) <= MAX_TAB_STEPS
    for x in doc["findings"]:
        assert set(x["steps"]) <= set(numbers)
    assert len(json.dumps(doc)) < 3_000_000

    assert main(["report", str(log), "--format", "json", "--no-cache"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert len(full["runs"][0]["workers"][0]["spans"][0]["steps"]) == STEPS


def test_a_small_span_is_left_as_it_is():
    doc = {"steps": [{"step": k, "wall_us": 1.0, "device_busy": 0.5, "verdict": "mixed"}
                     for k in range(10)], "findings": [], "whatif": [], "notes": []}
    assert bound_steps(doc) is doc


def test_findings_that_name_many_steps_are_cut_to_the_shown_ones():
    steps = [{"step": k, "wall_us": 1.0 + (k == 7), "device_busy": 0.5, "verdict": "mixed"}
             for k in range(100)]
    doc = {"steps": steps, "notes": [],
           "findings": [{"rule": "x", "steps": list(range(100))}],
           "whatif": [{"id": "input", "steps": list(range(100)),
                       "per_step": [{"step": k} for k in range(100)]}]}
    out = bound_steps(doc, limit=30)
    shown = {s["step"] for s in out["steps"]}
    assert len(shown) == 30 and 7 in shown
    assert set(out["findings"][0]["steps"]) <= shown and out["findings"][0]["steps_total"] == 100
    assert out["findings"][0]["steps_range"] == [0, 99]
    assert {x["step"] for x in out["whatif"][0]["per_step"]} <= shown
