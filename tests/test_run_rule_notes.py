"""A run-level rule that raises is a note of its run (issue 23, item 7), as a span rule's is
of its span: never a finding that is not one, never silence."""

from __future__ import annotations

from test_distributed import _gloo_rank

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.text import render_markdown, render_text
from tb_diagnostics.rules_run.base import RunRule

NOTE = "rule distributed-straggler could not run: KeyError: 1011"


def test_a_run_rule_that_raises_is_a_note_of_its_run(tmp_path, monkeypatch):
    run = RunRule.run

    def run_or_raise(self, table):
        if self.id == "distributed-straggler":
            raise KeyError(1011)
        return run(self, table)

    # Rules are frozen: the class's run raises for this one rule only.
    monkeypatch.setattr(RunRule, "run", run_or_raise)
    _gloo_rank(0, 0).write(tmp_path / "r" / "rank0.1.pt.trace.json")
    _gloo_rank(1, 4000).write(tmp_path / "r" / "rank1.1.pt.trace.json")
    doc = build_document(scan_logdir(str(tmp_path)))
    (r,) = doc["runs"]
    assert r["notes"] == [NOTE]
    assert all(f["rule"] != "distributed-straggler" for f in r["findings"])
    assert not any("not evaluated" in f["title"] for f in r["findings"])
    assert f"  note: {NOTE}" in render_text(doc).splitlines()
    assert f"> Note: {NOTE}" in render_markdown(doc)


def test_a_run_without_failures_has_no_notes(tmp_path):
    _gloo_rank(0, 0).write(tmp_path / "r" / "rank0.1.pt.trace.json")
    _gloo_rank(1, 4000).write(tmp_path / "r" / "rank1.1.pt.trace.json")
    (r,) = build_document(scan_logdir(str(tmp_path)))["runs"]
    assert r["notes"] == [] and any(f["rule"] == "distributed-straggler" for f in r["findings"])
