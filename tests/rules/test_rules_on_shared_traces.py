"""Every rule on every shared real trace: no rule fails, and all of them are quick."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.rules import all_rules, run_rules
from tb_diagnostics.trace import load_trace

SHARED_TRACES = (Path(__file__).parents[2] / ".." / "shared" / "traces").resolve()
FILES = sorted(SHARED_TRACES.glob("*/*.pt.trace.json*")) if SHARED_TRACES.is_dir() else []


@pytest.mark.shared
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name + "/" + p.name[:24])
def test_no_rule_fails(path):
    analysis = SpanAnalysis(load_trace(str(path)))
    findings = run_rules(analysis)
    assert [x.note for x in findings.failures] == []
    rules = {r.id: r for r in all_rules()}
    for f in findings:
        assert f.rule in rules and f.message and f.confirm
        assert len(f.evidence) <= 10
        assert f.savings_us is None or f.savings_us >= 0
        f.to_dict()  # JSON-ready


@pytest.mark.shared
def test_shared_trace_count():
    if not FILES:
        pytest.skip("../shared/traces not available")
    assert len(FILES) == 24


@pytest.mark.shared
def test_all_rules_run_on_the_biggest_trace_without_a_failure():
    # How long each rule takes is a benchmark's figure (bench/run_rules_time.py), not a
    # test's: a timed assertion fails on a busy machine and proves nothing on an idle one.
    big = SHARED_TRACES / "hta_v100_profile_memory_rank1_of2"
    if not big.is_dir():
        pytest.skip("../shared/traces not available")
    analysis = SpanAnalysis(load_trace(str(next(big.glob("*.pt.trace.json*")))))
    found = run_rules(analysis)
    assert not found.failures, found.failures
    assert len(found) > 0


ODD_TRACES = {
    "one_op": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
                "dur": 10}],
    "steps_only": [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1,
                    "tid": 1, "ts": 10 * n, "dur": 10} for n in (1, 2)],
    "kernel_only": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0,
                     "dur": 10, "args": {"stream": 7, "device": 0}}],
    "memory_only": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
                     "tid": 1, "ts": 0, "dur": 10},
                    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5,
                     "args": {"Bytes": 10, "Device Type": 1, "Device Id": 0}}],
    "sync_without_device": [{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize",
                             "pid": 1, "tid": 1, "ts": 110, "dur": 1000}],
    "python_only": [{"ph": "X", "cat": "python_function", "name": "a.py(1): f", "pid": 1,
                     "tid": 1, "ts": 0, "dur": 10, "args": {"Python id": 1}}],
}


@pytest.mark.parametrize("name", sorted(ODD_TRACES))
def test_no_rule_fails_on_odd_traces(tmp_path, name):
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": ODD_TRACES[name]}))
    findings = run_rules(SpanAnalysis(load_trace(str(path))))
    assert [x.note for x in findings.failures] == []


@pytest.mark.shared
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name + "/" + p.name[:24])
def test_no_two_findings_of_a_span_read_the_same(path):
    # owlv2 had three "Host sync inside a step", workers4 three "Op called very often":
    # the collapsed row shows title and subject, and those must differ.
    findings = run_rules(SpanAnalysis(load_trace(str(path))))
    heads = [(f.title, f.subject) for f in findings]
    assert len(heads) == len(set(heads)), heads
    for f in findings:
        if sum(g.title == f.title for g in findings) > 1:
            assert f.subject, f.rule
