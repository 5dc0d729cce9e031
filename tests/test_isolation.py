"""One odd file never sinks a report; one odd event never sinks a file (issue: hardening)."""

from __future__ import annotations

import json

from tb_diagnostics.cli import main


def _write(path, events, **top) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events, **top}))


def _ops(n: int = 50) -> list[dict]:
    out = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1,
            "tid": 1, "ts": s * 1000, "dur": 999} for s in range(3)]
    out += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
             "ts": 10 + 20 * i, "dur": 15} for i in range(n)]
    return out


def _spans(doc: dict) -> dict[str, dict]:
    return {s["file"]: s for r in doc["runs"] for w in r["workers"] for s in w["spans"]}


def test_an_absurd_step_number_does_not_sink_the_other_runs(tmp_path, capsys):
    log = tmp_path / "log"
    _write(log / "odd" / "w.1.pt.trace.json",
           [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999999999999999",
             "pid": 1, "tid": 1, "ts": 0, "dur": 100},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10,
             "dur": 50}])
    _write(log / "good" / "w.1.pt.trace.json", _ops())
    assert main(["report", str(log), "--format", "json", "--no-cache"]) == 0
    spans = _spans(json.loads(capsys.readouterr().out))
    assert [s["step"] for s in spans["good/w.1.pt.trace.json"]["steps"]] == [0, 1, 2]
    odd = spans["odd/w.1.pt.trace.json"]
    assert odd["errors"] == [] and [s["step"] for s in odd["steps"]] == [None]


def test_one_event_with_args_of_the_wrong_type_is_counted_not_fatal(tmp_path, capsys):
    events = _ops(2000)
    events[1200]["args"] = "oops"
    events[1300]["args"] = [1, 2]
    events[1400]["dur"] = -5
    events[1500]["ph"] = 7
    _write(tmp_path / "log" / "run" / "w.1.pt.trace.json", events)
    assert main(["report", str(tmp_path / "log"), "--format", "json", "--no-cache"]) == 0
    (span,) = _spans(json.loads(capsys.readouterr().out)).values()
    assert span["errors"] == []
    notes = " | ".join(span["notes"])
    assert "2 event(s) normalised: args not an object" in notes
    assert "1 event(s) normalised: negative or absurd dur (taken as 0)" in notes
    assert "1 event(s) normalised: ph not a string" in notes
    assert span["steps"][1]["ops"] > 0


def test_analysis_failures_are_one_line_and_tracebacks_only_with_debug(tmp_path, capsys,
                                                                       monkeypatch):
    from tb_diagnostics.report import document

    _write(tmp_path / "log" / "run" / "w.1.pt.trace.json", _ops())
    _write(tmp_path / "log" / "other" / "w.1.pt.trace.json", _ops())
    real = document.run_rules

    def run_rules(analysis):
        if "other" in analysis.model.path:
            raise ZeroDivisionError("boom")
        return real(analysis)

    monkeypatch.setattr(document, "run_rules", run_rules)
    assert main(["report", str(tmp_path / "log"), "--format", "json", "--no-cache",
                 "--workers", "1"]) == 0
    out = capsys.readouterr()
    spans = _spans(json.loads(out.out))
    (err,) = spans["other/w.1.pt.trace.json"]["errors"]
    assert err == "other/w.1.pt.trace.json: could not be analysed (ZeroDivisionError: boom)"
    assert spans["run/w.1.pt.trace.json"]["errors"] == []
    assert "Traceback" not in out.err
    assert main(["--debug", "report", str(tmp_path / "log"), "--format", "json", "--no-cache",
                 "--workers", "1"]) == 0
    assert "Traceback" in capsys.readouterr().err
