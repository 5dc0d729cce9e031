"""The notebook fragment (``Report._repr_html_``, report/notebook.py) as markup and style:
scoped to its root, themed by the host's variables with an explicit background, no script,
the summary first and every run folded. How it looks in a browser on light and dark hosts
is tests/browser/test_notebook_fragment.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tb_diagnostics
from tb_diagnostics.report.notebook import (
    MAX_EVIDENCE,
    ROOT,
    fragment_css,
    render_fragment,
    top_findings,
)

SAMPLE = Path(__file__).resolve().parents[1] / "log"


@pytest.fixture(scope="module")
def sample() -> tb_diagnostics.Report:
    if not any(SAMPLE.glob("*/*.pt.trace.json*")):
        pytest.skip("the sample log dir ./log is not in this checkout")
    return tb_diagnostics.analyze(SAMPLE, cache=False, workers=1)


def _rules(css: str) -> list[tuple[str, str, str]]:
    """(at-rule or "", selector list, declarations) of every rule, nested @media opened."""
    out: list[tuple[str, str, str]] = []
    i = 0
    while i < len(css):
        brace = css.find("{", i)
        if brace < 0:
            break
        head = css[i:brace].strip()
        if head.startswith("@"):
            depth, j = 1, brace + 1
            while depth:
                depth += {"{": 1, "}": -1}.get(css[j], 0)
                j += 1
            out.extend((head, sel, decl) for _, sel, decl in _rules(css[brace + 1:j - 1]))
            i = j
        else:
            end = css.index("}", brace)
            out.append(("", head, css[brace + 1:end]))
            i = end + 1
    return out


def _decls(block: str) -> dict[str, str]:
    # A custom property's value can hold ";" only inside var(): none here do.
    pairs = (d.split(":", 1) for d in block.split(";") if ":" in d)
    return {k.strip(): v.strip() for k, v in pairs}


def test_every_rule_is_scoped_to_the_fragment_root():
    rules = _rules(fragment_css())
    assert len(rules) > 20
    for at, sels, _ in rules:
        for sel in sels.split(","):
            assert sel.strip() == f".{ROOT}" or sel.strip().startswith(f".{ROOT} "), (at, sel)
    assert {at for at, _, _ in rules} == {"", "@media (prefers-color-scheme:dark)"}


def test_no_text_colour_without_a_background():
    """A rule that fixes a text colour fixes the background under it too; every other text
    colour is the theme's variable, and the root paints the theme's background."""
    for at, sel, block in _rules(fragment_css()):
        d = _decls(block)
        colour = d.get("color")
        if colour is not None and not colour.startswith("var(--tbd-"):
            assert "background" in d, (at, sel, colour)
    root = [_decls(b) for at, s, b in _rules(fragment_css()) if s == f".{ROOT}"]
    assert any(d.get("background") == "var(--tbd-bg,#fff)" for d in root)
    assert any(d.get("color") == "var(--tbd-fg,#202124)" for d in root)


def test_theme_variables_come_from_the_host_first_then_the_colour_scheme():
    rules = _rules(fragment_css())
    light = next(_decls(b) for at, s, b in rules if s == f".{ROOT}" and "--tbd-fg:" in b and not at)
    dark = next(_decls(b) for at, s, b in rules if at and "--tbd-fg:" in b)
    for theme, fallback_fg, fallback_bg in ((light, "#202124", "#ffffff"),
                                            (dark, "#e8eaed", "#202124")):
        assert theme["--tbd-fg"] == ("var(--jp-content-font-color1,var(--jp-ui-font-color1,"
                                     f"var(--vscode-editor-foreground,{fallback_fg})))")
        assert theme["--tbd-bg"] == ("var(--jp-layout-color0,var(--jp-layout-color1,"
                                     f"var(--vscode-editor-background,{fallback_bg})))")
        assert theme["--tbd-muted"].startswith("var(--jp-content-font-color2,")


def test_opens_with_the_summary_and_folds_every_run(sample):
    html = sample._repr_html_()
    doc = sample.document
    assert html.startswith(f'<div class="{ROOT}"><style>') and "<script" not in html.lower()
    assert not re.search(r"<[^>]+\son\w+=", html)  # no event handler attribute either
    top = html.index('<h2 class="tbd-part">Top findings')
    table = html.index('<table class="tbd-summary">')
    first_run = html.index('<details class="run">')
    assert top < table < first_run
    # Every run folded (closed), one each; nothing above it is a <details>.
    assert html.count('<details class="run">') == len(doc["runs"])
    assert "<details" not in html[:first_run] and not re.search(r"<details[^>]*\sopen", html)
    # The table: one row per span, with its verdict.
    n_spans = sum(len(w["spans"]) for r in doc["runs"] for w in r["workers"])
    summary = html[table:html.index("</table>", table)]
    assert summary.count("<tr>") == n_spans + 1
    for r in doc["runs"]:
        for w in r["workers"]:
            for s in w["spans"]:
                assert s["verdict"] in summary
    # No dispatch chain (a cell's display does not analyse the spans again).
    assert "<h3>Dispatch chain" not in html and 'class="chain"' not in html


def test_the_first_lines_are_the_worst_findings_with_their_savings(sample):
    doc = sample.document
    html = sample._repr_html_()
    top = top_findings(doc)
    assert 1 <= len(top) <= 6
    assert all(f["severity"] in ("critical", "warning") for f, _, _, _ in top)
    keys = [({"critical": 0, "warning": 1}[f["severity"]], -(f.get("savings_us") or 0))
            for f, _, _, _ in top]
    assert keys == sorted(keys)
    listed = html[html.index('<ul class="tbd-top">'):html.index("</ul>")]
    assert listed.count("<li>") == len(top)
    for f, run, _, _ in top:
        assert run in listed and f["rule"] in listed
    # A saving the finding has is on its line.
    assert "saves ~" in listed


def _doc(runs: list[dict]) -> dict:
    return {"logdir": "x", "notes": [], "runs": runs}


def _f(rule: str, severity: str, savings: float | None = None, subject: str | None = None,
       steps: list | None = None) -> dict:
    return {"rule": rule, "severity": severity, "title": rule, "message": "m",
            "savings_us": savings, "subject": subject, "steps": steps or [1, 2]}


def _run(name: str, workers: dict[str, list[dict]], run_findings: list[dict] = ()) -> dict:
    return {"run": name, "ranks": [], "notes": [], "findings": list(run_findings),
            "workers": [{"worker": w, "spans": [{"findings": fs, "steps": [{"step": 1}]}]}
                        for w, fs in workers.items()]}


def test_top_findings_order_and_grouping():
    doc = _doc([
        _run("a", {"rank0": [_f("exposed", "critical"), _f("note", "info", 9e9),
                             _f("small", "warning", 10.0)],
                   "rank1": [_f("exposed", "critical"), _f("big", "warning", 500.0)]},
             [_f("straggler", "critical", 300.0, steps=[1])]),
        _run("b", {"worker0": [_f("loader", "critical", 700.0), _f("sync", "warning", 50.0,
                                                                     "aten::item")]}),
    ])
    got = [(f["rule"], run, workers) for f, run, workers, _ in top_findings(doc, limit=10)]
    assert got == [
        ("loader", "b", ["worker0"]),          # critical, the largest saving first
        ("straggler", "a", [None]),            # run-level: no worker
        ("exposed", "a", ["rank0", "rank1"]),  # one line for both ranks, no saving: last
        ("big", "a", ["rank1"]),               # then the warnings by saving
        ("sync", "b", ["worker0"]),
        ("small", "a", ["rank0"]),
    ]                                          # and never the info note, whatever its saving
    assert [f["rule"] for f, *_ in top_findings(doc, limit=2)] == ["loader", "straggler"]


def test_only_info_notes_say_so_and_an_empty_log_dir_says_it_holds_none(sample):
    assert "No PyTorch profiler traces under" in render_fragment(_doc([]))
    assert top_findings(_doc([_run("a", {"w": [_f("note", "info")]})])) == []


def test_evidence_is_capped_and_says_how_many_more(sample):
    html = sample._repr_html_()
    capped = [f for f in sample.findings() if len(f.get("evidence") or []) > MAX_EVIDENCE]
    assert capped, "the sample has findings with more evidence than the fragment shows"
    for f in capped:
        assert f"… and {len(f['evidence']) - MAX_EVIDENCE} more events" in html
    for table in re.findall(r'<table class="evidence">.*?</table>', html):
        assert table.count("<tr>") <= MAX_EVIDENCE + 1  # the header and at most 5 rows
    # The export keeps them all.
    page = sample.to_html()
    assert "more events" not in page
    longest = max(len(f.get("evidence") or []) for f in sample.findings())
    assert max(t.count("<tr>") for t in re.findall(r'<table class="evidence">.*?</table>',
                                                     page)) == longest + 1


def test_hostile_trace_strings_stay_text(tmp_path):
    evil = '<img src=x onerror="alert(1)"><style>*{color:red}</style>'
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0, "dur": 1000},
              {"ph": "X", "cat": "cpu_op", "name": evil, "pid": 1, "tid": 1, "ts": 10,
               "dur": 900}]
    run = tmp_path / "log" / evil.replace("/", "_")[:40].replace("<", "lt")
    run.mkdir(parents=True)
    (run / "worker0.1.pt.trace.json").write_text(json.dumps({"traceEvents": events}))
    html = tb_diagnostics.analyze(tmp_path / "log", cache=False, workers=1)._repr_html_()
    assert "<img" not in html and html.count("<style>") == 1 and "alert(1)" in html
