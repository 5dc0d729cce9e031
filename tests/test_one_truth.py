"""One truth each (issue 23): whether a step is cold is one field every reader follows, a
rule's saving is its what-if card's number, a rule that raises is a span note, and the
span's verdict is the one that holds for most of the warm time."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from rules.conftest import SHARED_TRACES, TraceBuilder, shared_file

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.compare import cold_steps, run_summary
from tb_diagnostics.report.text import headline, render_text
from tb_diagnostics.report.whatif import whatif_lines

APP = Path(__file__).resolve().parents[1] / "plugin" / "tb_diagnostics" / "static" / "app"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _only_span(root: Path) -> dict:
    doc = build_document(scan_logdir(str(root)))
    (span,) = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    return span


# ---- cold: one field ---------------------------------------------------------------------
def _dead_window_cold_steps(b: TraceBuilder) -> None:
    """Four 1 ms steps of the same work: a 300 µs DataLoader wait, then a record_function
    label whose first op launches a 400 µs kernel. In step 1 the label waits 228 µs for that
    op (5 µs later on): a cold dead window, while step 1's wall is no longer than the others'
    (the wait hides in the device's idle time), so the wall alone would call it warm."""
    for s in range(4):
        t0 = s * 1000.0
        dead = 228.0 if s == 0 else 5.0
        b.step(s + 1, t0, 999)
        b.annotation(LOADER, t0 + 10, 300)
        b.annotation("matmul_add", t0 + 320, dead + 60)
        b.op("aten::matmul", t0 + 320 + dead, 50)
        b.launch("gemm", t0 + 325 + dead, t0 + 560, 400)


def test_a_cold_dead_window_is_cold_for_every_reader(tmp_path):
    """cold-start-step fired on the dead window alone; the headline and the what-if then
    left step 1 out while the rules kept it. Now every reader follows the steps' field."""
    from tb_diagnostics.engine import open_analysis
    from tb_diagnostics.rules._util import warm_steps
    from tb_diagnostics.server.present import summarise

    b = TraceBuilder(tmp_path / "log" / "run")
    _dead_window_cold_steps(b)
    b.write()
    span = _only_span(tmp_path / "log")
    assert [s["cold"] for s in span["steps"]] == [True, False, False, False]
    (cold,) = [f for f in span["findings"] if f["rule"] == "cold-start-step"]
    assert cold["steps"] == [1] and "waited 228 µs for its first op" in cold["message"]
    f = scan_logdir(str(tmp_path / "log")).files[0]
    analysis = open_analysis(f)
    assert warm_steps(analysis).cold == (1,)  # the rules' warm steps
    assert warm_steps(analysis).index.tolist() == [1, 2, 3]
    assert all(w["steps"] == [2, 3, 4] for w in span["whatif"])  # the what-if's
    assert cold_steps(span) == {1}  # compare, the HTML chart, the text headline
    assert run_summary({"run": "run", "workers": [{"worker": "w", "spans": [span]}]}
                       )["cold_steps"] == [1]
    assert "step 1 is cold" in headline(span)
    tab = summarise(f, analysis, span)  # the tab's badges
    assert [s["flags"] for s in tab["steps"]] == [["cold"], [], [], []]


def test_a_finding_alone_no_longer_flags_a_step_cold_in_the_tab(tmp_path):
    """The tab used to call a step cold when a finding's rule id held "cold" or "warmup";
    the field decides now, and a step whose field says warm is warm."""
    from tb_diagnostics.engine import open_analysis
    from tb_diagnostics.server.present import summarise

    b = TraceBuilder(tmp_path / "log" / "run")
    _dead_window_cold_steps(b)
    b.write()
    f = scan_logdir(str(tmp_path / "log")).files[0]
    span = _only_span(tmp_path / "log")
    fake = {"rule": "warmup-step", "steps": [3], "artefact": False}
    tab = summarise(f, open_analysis(f), {**span, "findings": [*span["findings"], fake]})
    assert [s["flags"] for s in tab["steps"]] == [["cold"], [], [], []]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the tab's JS")
def test_the_tabs_chart_reads_the_cold_field():
    script = (f"import {{ isCold }} from {json.dumps((APP / 'stepchart.js').as_uri())};"
              "console.log(JSON.stringify([{cold: true}, {cold: false, flags: ['cold']},"
              " {flags: ['cold']}, {}, {cold: false, warm: false}].map(isCold)));")
    out = subprocess.run([shutil.which("node"), "--input-type=module", "-e", script],
                         capture_output=True, text=True, check=True, timeout=60)
    # The field wins; a document from before the field falls back to the "cold" flag.
    assert json.loads(out.stdout) == [True, False, True, False, False]


def test_compare_reads_old_documents_without_the_field():
    old = {"steps": [{"step": 1, "flags": []}, {"step": 2, "flags": ["cold"]}],
           "findings": [{"rule": "cold-start-step", "steps": [1]}]}
    assert cold_steps(old) == {1, 2}
    new = {"steps": [{"step": 1, "flags": [], "cold": False},
                     {"step": 2, "flags": ["cold"], "cold": False}],
           "findings": [{"rule": "cold-start-step", "steps": [1]}]}
    assert cold_steps(new) == set()


# ---- a rule's saving is its card's number -------------------------------------------------
#: The rules whose saving is a what-if projection's, and that projection.
CARD_OF_RULE = {"dataloader-bottleneck": "input", "tiny-kernels": "graphs",
                "memory-bound-chain": "fusion", "fp32-matmul": "amp"}


def _savings_and_cards(span: dict) -> list[tuple[str, float, float]]:
    cards = {w["id"]: w for w in span["whatif"]}
    return [(f["rule"], f["savings_us"], cards[CARD_OF_RULE[f["rule"]]]["saves_us"])
            for f in span["findings"] if f["rule"] in CARD_OF_RULE]


def test_rule_savings_equal_their_card_where_the_problem_is_in_some_steps(tmp_path):
    """The DataLoader waits 400 µs in steps 3-4 and not in steps 1-2 (prefetched
    batches): the finding took the median over the steps with a fetch (400 µs), the card
    over all warm steps (200 µs). Both read the warm steps now: the median of 0, 0, 400,
    400."""
    b = TraceBuilder(tmp_path / "log" / "run")
    for s in range(4):
        t0 = s * 1000.0
        load = 0.0 if s < 2 else 400.0
        b.step(s + 1, t0, 999)
        if load:
            b.annotation(LOADER, t0 + 10, load)
        b.op("aten::mm", t0 + 20 + load, 20)
        b.launch("gemm", t0 + 25 + load, t0 + 40 + load, 100)
    b.write()
    span = _only_span(tmp_path / "log")
    assert [s["cold"] for s in span["steps"]] == [False] * 4
    (inp,) = [w for w in span["whatif"] if w["id"] == "input"]
    assert inp["saves_us"] == pytest.approx(200.0)
    assert inp["saves_us_total"] == pytest.approx(800.0)
    assert _savings_and_cards(span) == [("dataloader-bottleneck", inp["saves_us"],
                                         inp["saves_us"])]


@pytest.mark.shared
def test_rule_savings_equal_their_card_on_the_v100_dataloader_run():
    run = "kineto_resnet50_v100_dataloader_workers0"
    shared_file(run)  # skips where ../shared is absent
    doc = build_document(scan_logdir(str(SHARED_TRACES)), run=run)
    spans = [s for w in doc["runs"][0]["workers"] for s in w["spans"]]
    assert len(spans) == 2
    for span in spans:
        pairs = _savings_and_cards(span)
        assert "dataloader-bottleneck" in [rule for rule, _, _ in pairs]
        for rule, saving, card in pairs:
            assert saving == max(card, 0.0), (span["file"], rule)


# ---- a rule that raises is a note --------------------------------------------------------
def test_a_rule_that_raises_is_a_note_of_its_span(tmp_path, monkeypatch):
    from tb_diagnostics.rules.base import Rule

    # Rules are frozen: the class's run raises for this one rule only.
    monkeypatch.setattr(Rule, "run", _run_raising(Rule.run, "kernel-duration-variance"))
    b = TraceBuilder(tmp_path / "log" / "run")
    _dead_window_cold_steps(b)
    b.write()
    span = _only_span(tmp_path / "log")
    assert ("rule kernel-duration-variance could not run: IndexError: index 0 is out of "
            "bounds for axis 0 with size 0") in span["notes"]
    assert span["errors"] == []
    rules = [f["rule"] for f in span["findings"]]
    assert "kernel-duration-variance" not in rules and "cold-start-step" in rules
    text = render_text(build_document(scan_logdir(str(tmp_path / "log"))))
    assert "  note: rule kernel-duration-variance could not run: IndexError:" in text


def _run_raising(run, rule_id: str):
    def run_or_raise(self, analysis):
        if self.id == rule_id:
            raise IndexError("index 0 is out of bounds for axis 0 with size 0")
        return run(self, analysis)

    return run_or_raise


# ---- the span's verdict follows the time --------------------------------------------------
def _short_compute_then_long_input(b: TraceBuilder) -> None:
    """15 compute-bound steps of 1 ms (a 950 µs kernel), then 11 input-bound steps of 10 ms
    (a 9 ms DataLoader wait, then a 500 µs kernel)."""
    t = 0.0
    for s in range(26):
        if s < 15:
            wall = 1000.0
            b.step(s + 1, t, wall)
            b.op("aten::mm", t + 10, 20)
            b.launch("gemm", t + 15, t + 30, 950)
        else:
            wall = 10000.0
            b.step(s + 1, t, wall)
            b.annotation(LOADER, t + 10, 9000)
            b.op("aten::mm", t + 9020, 20)
            b.launch("gemm", t + 9025, t + 9040, 500)
        t += wall


def test_the_span_verdict_is_the_one_of_most_of_the_warm_time(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    _short_compute_then_long_input(b)
    b.write()
    span = _only_span(tmp_path / "log")
    assert [s["verdict"] for s in span["steps"]] == ["compute-bound"] * 15 + ["input-bound"] * 11
    assert not any(s["cold"] for s in span["steps"])
    # 15 steps are compute-bound, but the 11 input-bound ones take 110 of the 125 ms.
    assert span["verdict"] == "input-bound"
    # (Each entry's critical_path is tests/test_path_verdict.py's.)
    assert [{k: v for k, v in x.items() if k != "critical_path"}
            for x in span["verdict_split"]] == [
        {"verdict": "input-bound", "steps": list(range(16, 27)), "wall_us": 110000.0,
         "judged_us": 110000.0, "share": 0.88},
        {"verdict": "compute-bound", "steps": list(range(1, 16)), "wall_us": 15000.0,
         "judged_us": 15000.0, "share": 0.12}]
    assert headline(span).startswith(
        "Steps 16–26 are input-bound (11 input-bound steps take 110.00 ms of 125.00 ms; "
        "15 compute-bound, steps 1–15, take 15.00 ms): the GPU is busy 5% of each step")
    # The input projection saves 9 ms in each of 11 steps and nothing in 15: 99 ms in all,
    # 3.81 ms per step (its median, 0, is no figure of the span's); the step drawn is the
    # first whose own saving is nearest that, a compute-bound step saving nothing.
    (inp,) = [w for w in span["whatif"] if w["id"] == "input"]
    assert inp["saves_us_total"] == pytest.approx(99000.0)
    assert inp["saves_us"] == pytest.approx(99000.0 / 26, abs=1e-3)
    assert (inp["saving_moves"], inp["shown_step"]) == (False, 1)
    (line,) = [x for x in whatif_lines(span) if x.startswith("input:")]
    assert "in step 1, saves 3.81 ms per step (99.00 ms over the 26 warm steps) — " in line
    # A compare of this run says the same verdict.
    assert run_summary({"run": "run", "workers": [{"worker": "w", "spans": [span]}]}
                       )["verdict"] == "input-bound"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the tab's JS")
def test_the_tabs_what_if_card_gives_the_total_of_uneven_savings():
    card = {"saves_us": 99000.0 / 26, "saves_us_total": 99000.0, "steps": list(range(1, 27))}
    script = (f"import {{ totalText, savesText }} from "
              f"{json.dumps((APP / 'whatif.js').as_uri())};"
              f"const p = {json.dumps(card)};"
              "console.log(JSON.stringify([savesText(p), totalText(p),"
              " totalText({...p, steps: [4]})]));")
    out = subprocess.run([shutil.which("node"), "--input-type=module", "-e", script],
                         capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == [
        "saves 3.81 ms/step", "99.0 ms over 26 warm steps", ""]


def test_an_even_saving_holds_and_a_one_sided_span_no_split(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    for s in range(4):
        t0 = s * 1000.0
        b.step(s + 1, t0, 999)
        b.annotation(LOADER, t0 + 10, 400)
        b.op("aten::mm", t0 + 420, 20)
        b.launch("gemm", t0 + 425, t0 + 440, 100)
    b.write()
    span = _only_span(tmp_path / "log")
    (inp,) = [w for w in span["whatif"] if w["id"] == "input"]
    assert inp["saving_moves"] is False and inp["saves_us_total"] == pytest.approx(1600.0)
    (one,) = span["verdict_split"]  # every step has one verdict: no split to say
    assert one["steps"] == [1, 2, 3, 4] and one["share"] == 1.0
    assert headline(span).startswith(f"Steps 1–4 are {one['verdict']}: the GPU is busy")
