"""dynamo-cache-lookup: per-step cost of guard checks and the AOT runtime wrapper."""

from __future__ import annotations

import pytest

from tb_diagnostics.rules.dynamo_cache_lookup import RULE


def test_reports_the_per_step_cost(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(3)
    (f,) = RULE.run(b.analysis())
    assert f.severity == "info"  # 42 µs of a 1 ms step: 4.2 % < 5 %
    assert "TorchDynamo Cache Lookup 1× per step, 30 µs" in f.message
    assert "AOTDispatcher runtime wrapper 1× per step, 12 µs" in f.message
    assert "42 µs per step" in f.message


def test_warning_when_it_is_a_large_share(make_builder):
    from tb_diagnostics.rules.dynamo_cache_lookup import Thresholds

    b = make_builder(device_properties=[])
    b.compiled_steps(3)
    (f,) = RULE.check(b.analysis(), Thresholds(warn_share=0.04))
    assert f.severity == "warning"


def test_silent_on_eager(builder):
    builder.steady_steps(3)
    assert RULE.run(builder.analysis()) == []


@pytest.mark.slow
def test_torch_compile_cpu_trace(compiled_cpu_trace):
    (f,) = RULE.run(compiled_cpu_trace)
    assert "TorchDynamo Cache Lookup" in f.message
