"""compile-overhead: compiled calls costing more host time than the graph's work."""

from __future__ import annotations

from tb_diagnostics.rules.compile_overhead import RULE


def test_fires_on_a_tiny_graph(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(3, work_us=50)
    (f,) = RULE.run(b.analysis())
    # 30 µs lookup + (200 µs region - 50 µs aten::mm) = 180 µs for 50 µs of work.
    assert "costs the host 180 µs per step" in f.message and "for 50 µs of CPU time" in f.message
    assert f.steps == [1, 2, 3]


def test_silent_when_the_graph_does_the_work(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(3, work_us=180)
    assert RULE.run(b.analysis()) == []


def test_silent_on_eager(builder):
    builder.steady_steps(3)
    assert RULE.run(builder.analysis()) == []


def test_triton_example_fires_big_compiled_training_does_not(shared):
    (f,) = RULE.run(shared("hta_a100_torch_compile_triton_tiny"))
    assert "for 1.8 µs of device time" in f.message
    assert RULE.run(shared("hta_v100_profile_memory_rank1_of2")) == []
