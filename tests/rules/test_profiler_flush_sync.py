"""profiler-flush-sync: the profiler's end-of-window cudaDeviceSynchronize, an artefact."""

from __future__ import annotations

from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.rules.profiler_flush_sync import RULE


def test_fires_after_the_last_step(builder):
    builder.steady_steps(3)
    builder.runtime("cudaDeviceSynchronize", 3010, 1200)
    a = builder.analysis()
    (f,) = RULE.run(a)
    assert f.artefact and f.severity == "info" and f.steps == [3]
    assert "cudaDeviceSynchronize of 1.20 ms" in f.message and "after step 3 ended" in f.message
    assert profiler_artefacts(a).flush_syncs.size == 1


def test_silent_when_short_or_inside_a_step(builder):
    builder.steady_steps(3)
    builder.runtime("cudaDeviceSynchronize", 500, 900)  # the user's, inside step 1
    builder.runtime("cudaDeviceSynchronize", 3010, 100)  # the flush, but short
    assert RULE.run(builder.analysis()) == []


def test_python_stack_decides(builder):
    builder.steady_steps(3)
    top = builder.python("train.py(3): main", 2990, 1300)
    step = builder.python("torch/profiler/profiler.py(811): step", 3000, 1250, parent=top)
    builder.python("torch/cuda/__init__.py(975): synchronize", 3005, 1230, parent=step)
    builder.runtime("cudaDeviceSynchronize", 3010, 1200)
    (f,) = RULE.run(builder.analysis())
    assert "called from torch/profiler/profiler.py(811): step" in f.message


def test_qwen_flush_just_after_step_6(shared):
    (f,) = RULE.run(shared("tracelens_h100_qwen1.5_0.5b_inference"))
    assert f.artefact and f.steps == [6]
    assert "2.17 ms" in f.message and "after step 6 ended" in f.message
