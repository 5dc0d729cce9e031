"""Why a step is flagged "artefact" (analysis/views/step_flags.py, worded by
report/step_flags.py): decided once, in the step documents' ``flag_why``, and read the
same by the CLI's JSON, the API's step records and the tab's badge.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import tb_diagnostics
from conftest import SHARED_TRACES, TraceBuilder, analyse
from tb_diagnostics.analysis.views.step_flags import (
    ARTEFACT_MIN_SHARE,
    ArtefactFlag,
    artefact_flags,
)
from tb_diagnostics.cli import main
from tb_diagnostics.engine import open_analysis
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.step_flags import STUB_WHY, artefact_words
from tb_diagnostics.rules._util import fmt_us
from tb_diagnostics.server.present import summarise


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path_factory.mktemp("cache")))


def buffer_request_trace(gap_us: float) -> TraceBuilder:
    """Three 1000 µs steps; in step 2 a CUPTI buffer request on the host while the device
    waits ``gap_us`` for the next kernel (the profiler's own device gap)."""
    t = TraceBuilder([{"id": 0, "name": "Test GPU", "totalGlobalMem": 1}])
    for n in range(3):
        s = 1000 * n
        t.step(n + 1, s, 1000)
        t.op("aten::mm", s + 10, 200)
        t.launch(s + 20, 10, f"k{n}", s + 40, 300)  # device busy [s+40, s+340]
        if n == 1:
            t.x("overhead", "Activity Buffer Request", s + 340, gap_us)
            t.launch(s + 340 + gap_us, 1, "k1b", s + 340 + gap_us, 200)
    return t


def _the_span(doc: dict) -> dict:
    (span,) = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    return span


def test_a_buffer_request_over_the_share_says_why_in_every_reader(tmp_path, capsys):
    log = tmp_path / "log"
    buffer_request_trace(200.0).write(log / "run" / "worker0.1.pt.trace.json")
    report = tb_diagnostics.analyze(str(log), cache=False)
    steps = _the_span(report.document)["steps"]
    art = {f["rule"] for f in _the_span(report.document)["findings"] if f["artefact"]}
    assert art == {"profiler-buffer-request"}
    own = steps[1]["idle"]["profiler_us"]
    assert own >= 200.0  # the request's gap at least: the device waited on it
    why = (f"Profiler buffer request: {fmt_us(own)} of this step's "
           f"{fmt_us(steps[1]['wall_us'])} ({100 * own / steps[1]['wall_us']:.1f}%) is the "
           "profiler's own time; its verdict leaves it out")
    assert [s["flag_why"] for s in steps] == [None, {"artefact": why}, None]
    # The CLI's JSON and the API's step records carry the same sentence...
    assert main(["report", str(log), "--format", "json", "--no-cache"]) == 0
    cli_steps = _the_span(json.loads(capsys.readouterr().out))["steps"]
    assert [s["flag_why"] for s in cli_steps] == [s["flag_why"] for s in steps]
    assert [r["flag_why"] for r in report.steps()] == [s["flag_why"] for s in steps]
    # ...and the tab badges the step with it, passing the sentence through.
    (f,) = scan_logdir(str(log)).files
    tab = summarise(f, analyse(buffer_request_trace(200.0), tmp_path / "again"))["steps"]
    assert [("artefact" in s["flags"], s["flag_why"]) for s in tab] == [
        (False, None), (True, {"artefact": why}), (False, None)]


def test_a_buffer_request_under_the_share_flags_nothing(tmp_path):
    t = buffer_request_trace(2.0)  # 2 µs of a 1000 µs step: 0.2 %, under 1 %
    a = analyse(t, tmp_path)
    assert 0 < a.windows[1].idle["profiler"] < ARTEFACT_MIN_SHARE * a.windows[1].wall_us
    log = tmp_path / "log"
    t.write(log / "run" / "worker0.1.pt.trace.json")
    span = _the_span(tb_diagnostics.analyze(str(log), cache=False).document)
    assert "profiler-buffer-request" in {f["rule"] for f in span["findings"]}
    assert [s["flag_why"] for s in span["steps"]] == [None, None, None]
    (f,) = scan_logdir(str(log)).files
    assert not any("artefact" in s["flags"] for s in summarise(f, a)["steps"])


def test_only_an_artefact_finding_of_an_existing_step_flags_it(tmp_path):
    a = analyse(buffer_request_trace(200.0), tmp_path)
    user = SimpleNamespace(artefact=False, steps=[2], title="Host sync")
    flush = SimpleNamespace(artefact=True, steps=[2], title="Profiler flush sync "
                            "(profiler artefact)")
    elsewhere = SimpleNamespace(artefact=True, steps=[7, None], title="Profiler flush sync")
    assert artefact_flags(a, [user, elsewhere]) == []
    (got,) = artefact_flags(a, [user, flush, flush, elsewhere])
    assert (got.index, got.stub, got.titles) == (1, False, (flush.title,))
    assert got.profiler_us == a.windows[1].idle["profiler"]
    assert got.wall_us == a.windows[1].wall_us


def test_the_words_of_a_flag():
    flag = ArtefactFlag(index=0, stub=False, titles=(
        "Profiler flush sync (profiler artefact)", "Profiler buffer request (profiler artefact)"),
        profiler_us=2_160.0, wall_us=10_000.0)
    assert artefact_words(flag) == (
        "Profiler flush sync; Profiler buffer request: 2.16 ms of this step's 10.00 ms "
        "(21.6%) is the profiler's own time; its verdict leaves it out")
    assert artefact_words(ArtefactFlag(0, True, (), 0.0, 5.0)) == STUB_WHY


QWEN = "tracelens_h100_qwen1.5_0.5b_inference"
V100_NS = "hta_v100_resnet_ns_timeunit"


@pytest.mark.skipif(not (SHARED_TRACES / QWEN).is_dir() or not (SHARED_TRACES / V100_NS).is_dir(),
                    reason="shared traces not present")
def test_shared_traces_flag_the_steps_the_tab_badged():
    """The Qwen run's only step (0.24 % profiler time after a flush sync) stays unbadged;
    the V100 run's step 105 (a flush sync, 1.0 % of it) is flagged, in the document and
    the tab alike."""
    for run, flagged in ((QWEN, set()), (V100_NS, {105})):
        report = tb_diagnostics.analyze(str(SHARED_TRACES / run), cache=False)
        docs = [s for r in report.document["runs"] for w in r["workers"]
                for s in w["spans"]]
        got = {st["step"]: st["flag_why"] for d in docs for st in d["steps"]
               if st["flag_why"]}
        assert set(got) == flagged
        for why in got.values():
            assert why["artefact"].startswith("Profiler flush sync: ")
        for f in scan_logdir(str(SHARED_TRACES / run)).files:
            tab = summarise(f, open_analysis(f, None, None))
            badged = {s["step"]: s["flag_why"] for s in tab["steps"] if "artefact" in s["flags"]}
            assert badged == got
