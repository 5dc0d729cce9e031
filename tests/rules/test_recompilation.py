"""recompilation: compiles inside steps, recompiled frames, changing graph hashes."""

from __future__ import annotations

import pytest

from tb_diagnostics.rules.recompilation import RULE


def test_recompiled_frame_and_compile_in_a_step(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(4, regions=["Torch-Compiled Region: 0/0"] * 2
                     + ["Torch-Compiled Region: 0/1"] * 2, compile_in=3)
    (f,) = RULE.run(b.analysis())
    assert f.steps == [3, 4]
    assert "compile work inside step 3" in f.message
    assert "frame(s) 0 run a recompiled version (up to compile 1, i.e. 2 compiles" in f.message


def test_graph_hash_change(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(4, fx_hashes=["fxa1", "fxa1", "fxb2", "fxb2"])
    (f,) = RULE.run(b.analysis())
    assert "the CompiledFxGraph hash changes in steps 3–4" in f.message


def test_silent_on_cache_hits(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(4, fx_hashes=["fxa1"] * 4)
    assert RULE.run(b.analysis()) == []


@pytest.mark.slow
def test_torch_compile_cpu_trace(compiled_cpu_trace):
    (f,) = RULE.run(compiled_cpu_trace)
    assert "compile work inside" in f.message and "recompiled version" in f.message
