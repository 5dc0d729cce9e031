"""rules._util.warm_steps: the one basis of every rule's per-step means and shares."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tb_diagnostics.rules import all_rules
from tb_diagnostics.rules._util import warm_steps

from .conftest import shared_analysis


def _cold_then_warm(b, walls=(3800, 100, 100, 100)):
    t = 0.0
    for s, wall in enumerate(walls):
        b.step(s, t, wall - 1)
        b.op("aten::add", t + 5, 40)
        t += wall


def test_a_cold_first_step_is_left_out(builder):
    _cold_then_warm(builder)
    a = builder.analysis()
    warm = warm_steps(a)
    assert warm.index.tolist() == [1, 2, 3]
    assert warm.cold == (0,)
    assert warm.n == 3
    assert warm.mean_wall_us == pytest.approx(100.0, abs=1.0)
    assert warm.per == "per step"
    # Per-window values: the cold window's 1000 is not in the mean.
    assert warm.per_window(np.asarray([1000.0, 10.0, 20.0, 30.0])) == pytest.approx(20.0)
    assert warm.share_text(40.0) == "40% of a warm step"
    assert warm.cold_clause == ", cold step 0 left out"
    ops = a.op_rows
    assert len(warm.host_rows(a, ops)) == 3


def test_steady_steps_are_all_warm(builder):
    _cold_then_warm(builder, walls=(100, 100, 100))
    warm = warm_steps(builder.analysis())
    assert warm.index.tolist() == [0, 1, 2]
    assert warm.cold == () and warm.cold_clause == ""


def test_a_span_without_steps_is_its_one_window(builder):
    builder.op("aten::add", 0, 40)
    builder.op("aten::add", 100, 60)
    warm = warm_steps(builder.analysis())
    assert warm.n == 1 and not warm.has_steps
    assert warm.per == "in the span"
    assert warm.share_text(50.0).endswith("of the span")


def test_work_of_several_threads_is_not_a_share_above_100_percent(builder):
    _cold_then_warm(builder, walls=(100, 100, 100))
    warm = warm_steps(builder.analysis())
    assert warm.share_text(250.0) == "2.5× the wall of a warm step, on several threads"


_SHARE = re.compile(r"(\d+(?:\.\d+)?)% of (?:a warm step|a median step|the step|the span)")


@pytest.mark.parametrize("run", ["tracelens_h100_owlv2_large_inference",
                                 "kineto_resnet50_v100_dataloader_workers4",
                                 "kineto_2021jan_resnet50_autograd_api_nosteps",
                                 "hta_a100_nccl_train_rank0_of2"])
def test_no_share_of_a_step_exceeds_100_percent_on_real_traces(run):
    analysis = shared_analysis(run)
    for rule in all_rules():
        for f in rule.run(analysis):
            for pct in _SHARE.findall(f.message):
                assert float(pct) <= 100.0, (rule.id, f.message)


def test_the_demo_runs_cold_step_leaves_shares_below_100_percent():
    # log/matmul_add-size64-cpu said "320 µs of CPU total per step (415% of a median step)".
    from pathlib import Path

    from tb_diagnostics.analysis.span import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    run = Path(__file__).parents[2] / "log" / "matmul_add-size64-cpu"
    files = sorted(run.glob("*.pt.trace.json*"))
    if not files:
        pytest.skip("the demo log dir is absent")
    analysis = SpanAnalysis(load_trace(str(files[0])))
    assert warm_steps(analysis).cold == (0,)
    findings = [f for rule in all_rules() for f in rule.run(analysis)]
    shares = [float(p) for f in findings for p in _SHARE.findall(f.message)]
    assert all(p <= 100.0 for p in shares), [f.message for f in findings]
    # The hotspot's per-step time is a warm step's, and says so.
    (hot,) = [f for f in findings if f.rule == "hotspot-op"]
    assert "cold step 0 left out" in hot.message and 0 not in hot.steps
