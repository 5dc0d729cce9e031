"""The report's lists of step numbers share one int object per step
(``WindowColumns.steps_at``): a span of 10⁶ steps lists every step in several findings,
cards and the verdict split, and an int of their own per list was 32 MB a list. The
critical paths' ``ended_by`` holds the two strings, not a string per step."""

from __future__ import annotations

import numpy as np
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.critpath.walk import critical_paths
from tb_diagnostics.analysis.headline import span_verdict
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.document import span_document
from tb_diagnostics.rules import run_rules
from tb_diagnostics.rules._util import step_numbers, warm_steps


def _analysis(tmp_path):
    b = TraceBuilder(tmp_path / "run")
    b.steady_steps(12, first=5_000)  # step numbers past the ints Python caches (-5..256)
    return b.analysis()


def test_step_lists_hold_the_windows_ints(tmp_path):
    a = _analysis(tmp_path)
    c = a.windows.columns
    every = c.step_list()
    assert every == list(range(5_000, 5_012))
    idx = np.asarray([3, 0, 7, 7])
    picked = c.steps_at(idx)
    assert picked == c.step[idx].tolist()  # the same values, in the order asked
    assert all(x is every[i] for x, i in zip(picked, idx.tolist(), strict=True))
    assert c.steps_at(np.zeros(0, np.int64)) == []
    assert all(x is every[i] for x, i in zip(step_numbers(a, [9, 2]), [2, 9], strict=True))
    warm = warm_steps(a)
    assert all(x is every[i] for x, i in zip(warm.steps(a), warm.index.tolist(), strict=True))
    # Every list of the findings and the verdict split reuses those ints.
    findings = [f for f in run_rules(a) if f.steps and f.steps[0] is not None]
    assert findings
    by_value = dict(zip(every, every, strict=True))
    for f in findings:
        assert all(s is by_value[s] for s in f.steps), f.rule
    for x in span_verdict(a).split:
        assert all(s is by_value[s] for s in x.steps)


def test_a_span_without_steps_lists_none(tmp_path):
    b = TraceBuilder(tmp_path / "run")
    b.op("aten::mm", 10, 15)
    b.launch("gemm_kernel", 15, 22, 150)
    c = b.analysis().windows.columns
    assert not c.has_steps
    assert c.steps_at(np.asarray([0])) == [None] and c.step_list() == [None]


def test_ended_by_holds_the_two_strings(tmp_path):
    a = _analysis(tmp_path)
    ends = critical_paths(a).ended_by
    assert ends and set(ends) <= {"host", "device"}
    assert len({id(x) for x in ends}) <= 2
    [f] = [s for r in scan_logdir(str(tmp_path)).runs for s in r.files]
    doc = span_document(f, a)
    assert [s["critical_path"]["ended_by"] for s in doc["steps"]] == ends[:len(doc["steps"])]


def test_steps_at_a_run_of_windows_is_the_lookup_per_window(tmp_path):
    c = _analysis(tmp_path).windows.columns
    every = c.step_list()
    for index in ([0, 1, 2], [4, 5], [11], list(range(12)), [3, 4, 6], [5, 4, 3], [2, 2, 3],
                  [0, 1, 2, 3, 5], [], [10, 11]):
        idx = np.asarray(index, dtype=np.int64)
        got = c.steps_at(idx)
        want = [every[i] for i in index]
        assert got == want and all(x is y for x, y in zip(got, want, strict=True)), index
        got.append(None)  # a list of its own: its caller may change it
        assert c.step_list() == every
