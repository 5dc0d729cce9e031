"""compiled-region: which steps ran torch.compile'd code."""

from __future__ import annotations

import pytest

from tb_diagnostics.rules.compiled_region import RULE


def test_fires_on_compiled_regions(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(3)
    (f,) = RULE.run(b.analysis())
    assert f.steps == [1, 2, 3] and f.severity == "info"
    assert "Torch-Compiled Region: 0/0 ran in steps 1–3" in f.message


def test_silent_on_eager(builder):
    builder.steady_steps(3)
    assert RULE.run(builder.analysis()) == []


def test_hta_compiled_training(shared):
    (f,) = RULE.run(shared("hta_a100_compiled_train_rank0_of16"))
    assert f.steps == [550, 551, 552, 553, 554]
    assert "CompiledFunction" in f.message and "81 Inductor triton kernel(s)" in f.message


@pytest.mark.slow
def test_torch_compile_cpu_trace(compiled_cpu_trace):
    (f,) = RULE.run(compiled_cpu_trace)
    assert "Torch-Compiled Region: 0/0" in f.message and "0/1" in f.message
