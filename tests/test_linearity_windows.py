"""The step windows and the step documents are columns (issue 28, item 3).

A span of 10⁶ tiny steps held 2.2 GB of ``StepWindow`` objects and built each step's
document from one of them. Now ``SpanAnalysis.windows`` holds one array per figure (its
items are views made on demand) and the step documents come from those arrays in one
pass. The cost is counted, not timed (as in ``test_linearity_steps``), at N and 10·N
steps: numpy calls (a vectorised pass makes a fixed number whatever the steps), the
package's executed lines where no per-step Python is left, and StepWindow views made.
Each result is checked against the per-window form it replaces.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from linecount import executed_lines
from test_linearity_steps import GROWTH, STEPS, analysis_of, numpy_calls

from tb_diagnostics.analysis import steps as steps_module
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.step_windows import build_windows, main_idle_causes, verdicts_of
from tb_diagnostics.analysis.verdict import (
    IDLE_CAUSES,
    Thresholds,
    compile_bound,
    main_idle_cause,
    verdict_of,
)
from tb_diagnostics.report.document import step_document
from tb_diagnostics.report.rounding import rounded
from tb_diagnostics.report.step_documents import step_documents


@pytest.fixture(scope="module")
def spans() -> dict[str, SpanAnalysis]:
    out = {"base": analysis_of(STEPS), "wide": analysis_of(10 * STEPS)}
    for a in out.values():
        build_windows(a)  # the views the windows read, computed once (cached)
    return out


def test_windows_are_built_with_a_fixed_number_of_numpy_calls(spans):
    calls = {k: numpy_calls(lambda a=a: build_windows(a)) for k, a in spans.items()}
    assert calls["base"] > 0
    assert calls["wide"] <= GROWTH * calls["base"], calls


def test_windows_are_built_with_no_python_per_window(spans):
    lines = {k: executed_lines(lambda a=a: build_windows(a)) for k, a in spans.items()}
    assert lines["base"] > 0
    # The per-window loop ran ~40 lines a window: 2,400 more at 60 steps, 24,000 at 600.
    assert lines["wide"] <= GROWTH * lines["base"], lines


def test_step_documents_make_no_numpy_call_and_no_view_per_step(spans, monkeypatch):
    for a in spans.values():
        _ = a.windows
    calls = {k: numpy_calls(lambda a=a: step_documents(a)) for k, a in spans.items()}
    assert calls["base"] > 0
    assert calls["wide"] <= GROWTH * calls["base"], calls
    made = 0
    init = steps_module.StepWindow.__init__

    def counted(self, columns, index):
        nonlocal made
        made += 1
        init(self, columns, index)

    monkeypatch.setattr(steps_module.StepWindow, "__init__", counted)
    step_documents(spans["wide"])
    assert made == 0


def test_step_documents_equal_each_window_s_document(spans):
    for a in spans.values():
        assert step_documents(a) == [step_document(w) for w in a.windows]


def test_the_windows_views_read_their_columns(spans):
    a = spans["wide"]
    ws = a.windows
    c = ws.columns
    assert len(ws) == len(c) == 10 * STEPS
    assert [w.index for w in ws] == list(range(len(ws)))
    assert [w.step for w in ws[2:5]] == c.step[2:5].tolist()
    assert ws[-1].index == len(ws) - 1 and ws[-1] == ws[len(ws) - 1]
    with pytest.raises(IndexError):
        ws[len(ws)]
    w = ws[7]
    assert w.wall_us == w.end - w.start and isinstance(w.start, float)
    assert w.idle == {k: float(v[7]) for k, v in c.idle.items()}
    assert w.flags == c.flag_lists()[7]
    assert w.fields()["verdict"] == w.verdict


def test_each_window_s_verdict_is_the_per_window_rules(spans):
    for a in spans.values():
        th = a.thresholds
        for w in a.windows:
            idle = w.idle
            cause = main_idle_cause(idle, w.exposed_collective_us)
            judged = w.wall_us - idle["profiler"] - idle["compile"] - idle["module_load"]
            frac = w.compute_busy_us / judged if judged > 0 else 0.0
            if compile_bound(idle["compile"], w.wall_us):
                assert (w.verdict, w.main_idle_cause, w.verdict_by) == (
                    "compile-bound", "compile", "compilation")
            elif w.verdict_by is None:
                assert (w.verdict, w.main_idle_cause) == (verdict_of(frac, cause, th), cause)
            else:
                assert w.verdict_by == "launch-backlog" and w.main_idle_cause == cause


def test_main_causes_and_verdicts_equal_the_scalar_forms_on_random_columns():
    rng = np.random.default_rng(28)
    n = 3000
    # Small integers: many ties (the earlier cause keeps one) and many zeros (no cause).
    idle = {c: rng.integers(0, 3, n).astype(np.float64) for c in IDLE_CAUSES}
    idle["sync"][::97] = np.nan
    alone = rng.integers(0, 2, n).astype(np.float64)
    got = main_idle_causes(idle, alone).tolist()
    want = [main_idle_cause({c: float(v[k]) for c, v in idle.items()}, float(alone[k]))
            for k in range(n)]
    assert got == want
    frac = rng.choice([0.0, 0.3, 0.5, 0.7, 0.8, 0.95, np.nan], n)
    for th in (Thresholds(), Thresholds(compute_bound=0.5, low_busy=0.5)):
        cause = np.asarray(want, dtype=object)
        assert verdicts_of(frac, cause, th).tolist() == [
            verdict_of(float(f), c, th) for f, c in zip(frac.tolist(), want, strict=True)]


def test_rounded_is_python_round():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-1e7, 1e7, 20_000), np.arange(0.0, 10.0, 0.0005),
                        np.round(rng.uniform(0, 1e4, 20_000), 4), rng.uniform(0, 1, 20_000),
                        [0.0625, 2.5e-4, -0.0, 1e300, 2.0 ** 52, math.inf, -math.inf]])
    for digits in (3, 6):
        assert rounded(x, digits) == [round(float(v), digits) for v in x]
    assert math.isnan(rounded(np.asarray([math.nan]), 3)[0])


def test_a_span_of_many_steps_lists_fewer_segments_per_step(spans, monkeypatch):
    from tb_diagnostics.report import critical_path as cpr

    a = spans["wide"]  # 600 steps: a budget of 600 segments and ops leaves one each
    monkeypatch.setattr(cpr, "SPAN_SEGMENTS", len(a.windows))
    monkeypatch.setattr(cpr, "SPAN_OPS", 2 * len(a.windows) - 1)
    steps = step_documents(a)
    cpr.add_critical_path(steps, a)
    for k, s in enumerate(steps):
        got = s["critical_path"]
        full = cpr.critical_path_document(a, k)
        assert got["segments"] == full["segments"][:1]
        assert got["by_op"] == full["by_op"][:1]
        assert got["segments_total"] == full["segments_total"]
        assert got["segments_omitted"] == full["segments_total"] - len(got["segments"])
        bounded = ("segments", "segments_omitted", "by_op")
        assert {key: v for key, v in got.items() if key not in bounded} == \
            {key: v for key, v in full.items() if key not in bounded}
    assert cpr.per_step_limit(10, 5, 50_000) == 5
    assert cpr.per_step_limit(10**6, 5, 50_000) == 1
    assert cpr.per_step_limit(20_000, 5, 50_000) == 2
