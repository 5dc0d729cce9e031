"""The rule catalogue: complete, documented, generated docs current, one test file per rule."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from tb_diagnostics.rules import all_rules
from tb_diagnostics.rules._catalogue import render_markdown, render_text
from tb_diagnostics.rules.base import SEVERITIES

REPO = Path(__file__).resolve().parents[2]

#: The ids the issue fixes (#4 §2).
ISSUE_IDS = {
    "hotspot-op", "high-call-count", "child-dominated-op", "cold-start-step",
    "dispatch-dead-window", "occupancy-query-launch", "profiler-flush-sync", "host-sync",
    "hidden-memcpy", "profiler-buffer-request", "launch-delay", "gpu-idle-gap",
    "kernel-duration-variance", "tiny-kernels", "dispatch-chain", "addmm-fusion",
    "matmul-to-bmm", "compiled-region", "dynamo-cache-lookup", "recompilation",
    "compile-overhead", "dataloader-bottleneck", "pageable-memcpy", "memory-growth",
    "memory-near-capacity", "fp32-matmul", "misaligned-half-gemm", "too-few-active-steps",
}


def test_every_issue_rule_is_registered():
    assert {r.id for r in all_rules()} >= ISSUE_IDS


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_rule_contract(rule):
    assert rule.title and rule.severity in SEVERITIES
    sections = rule.doc_sections()
    for head in ("what it detects", "why it matters", "how to fix"):
        assert sections.get(head), f"{rule.id}: missing '{head}'"
    assert sections["summary"], f"{rule.id}: no one-line summary"
    # A blank line inside a section turns the indented rest into a code block in
    # docs/rules.md: keep each section one paragraph.
    assert not any("\n\n" in v for v in sections.values()), f"{rule.id}: blank line in a section"
    th = rule.thresholds
    assert is_dataclass(th) and fields(th), f"{rule.id}: thresholds must be a dataclass"
    assert type(th).__dataclass_params__.frozen, f"{rule.id}: thresholds must be frozen"
    module = rule.id.replace("-", "_")
    assert (REPO / "plugin" / "tb_diagnostics" / "rules" / f"{module}.py").is_file()
    assert (REPO / "tests" / "rules" / f"test_{module}.py").is_file(), \
        f"{rule.id}: no tests/rules/test_{module}.py"


def test_docs_rules_md_is_current():
    path = REPO / "docs" / "rules.md"
    assert path.is_file(), "run: tb-diagnostics rules --format markdown > docs/rules.md"
    assert path.read_text(encoding="utf-8") == render_markdown(), \
        "docs/rules.md is stale: run tb-diagnostics rules --format markdown > docs/rules.md"


def test_text_listing_names_every_rule():
    text = render_text()
    for rule in all_rules():
        assert f"{rule.id}  [{rule.severity_text}]" in text


def test_rules_text_shows_no_rst_literals():
    text = render_text()
    assert "``" not in text
    assert "`aten::addmm`" in text


def test_escalated_severities_are_listed_beside_the_default():
    rules = {r.id: r for r in all_rules()}
    assert rules["dataloader-bottleneck"].severity_text.startswith("warning, critical when")
    assert "dataloader-bottleneck  [warning, critical when" in render_text()
    assert "| warning, critical when" in render_markdown()


@pytest.mark.shared
def test_every_severity_a_report_shows_is_one_the_list_names():
    # Reports showed dataloader-bottleneck as critical while `rules` listed [warning].
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.rules import run_rules
    from tb_diagnostics.trace import load_trace

    traces = REPO.parent / "shared" / "traces"
    files = sorted(traces.glob("*/*.pt.trace.json*")) + sorted(
        (REPO / "log").glob("*/*.pt.trace.json*"))
    if not files:
        pytest.skip("no traces to run the rules on")
    rules = {r.id: r for r in all_rules()}
    seen = set()
    for path in files:
        for f in run_rules(SpanAnalysis(load_trace(str(path)))):
            rule = rules[f.rule]
            if f.severity != rule.severity:
                seen.add(f.rule)
                assert rule.escalation.startswith(f.severity), (f.rule, f.severity)
    assert "dataloader-bottleneck" in seen
