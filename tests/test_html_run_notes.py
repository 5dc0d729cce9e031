"""The HTML export says what the text and Markdown reports say about a run as a whole:
its notes (a run-level rule that raised, issue 23 item 7) and its findings, and the log
dir's notes."""

from __future__ import annotations

from pathlib import Path

from rules.conftest import TraceBuilder

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.html import render_html
from tb_diagnostics.report.text import render_markdown, render_text


def _doc(tmp_path: Path) -> dict:
    b = TraceBuilder(tmp_path / "log" / "run")
    b.steady_steps(3)
    b.write()
    doc = build_document(scan_logdir(str(tmp_path / "log")))
    (run,) = doc["runs"]
    # As analysis.distributed records them: a run-level rule that raised, and a finding.
    run["notes"] = ["rule distributed-straggler raised ValueError: boom <b>"]
    run["findings"] = [{"rule": "comm-imbalance", "severity": "warning",
                        "title": "Collectives unbalanced across ranks",
                        "message": "rank 3 waits 4.1 ms per step", "steps": [1],
                        "evidence": [], "savings_us": None, "confirm": "", "artefact": False,
                        "subject": None}]
    doc["notes"] = ["symbolic link skipped: log/other"]
    return doc


def test_run_notes_and_findings_are_in_the_html(tmp_path):
    doc = _doc(tmp_path)
    page = render_html(doc)
    assert "Note: rule distributed-straggler raised ValueError: boom &lt;b&gt;" in page
    assert "<code>comm-imbalance</code> Collectives unbalanced across ranks" in page
    assert "rank 3 waits 4.1 ms per step" in page
    assert "Note: symbolic link skipped: log/other" in page
    # The same as the text and Markdown reports say.
    for rendered in (render_text(doc), render_markdown(doc)):
        assert "rule distributed-straggler raised ValueError: boom" in rendered


def test_no_run_section_without_run_notes_or_findings(tmp_path):
    doc = _doc(tmp_path)
    doc["notes"] = []
    for run in doc["runs"]:
        run["notes"], run["findings"] = [], []
    assert 'class="span run"' not in render_html(doc)
