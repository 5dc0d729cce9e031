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


def compile_then_run(b, steps: bool) -> None:
    """A window that opens with a 1.7 s compile (an ``entire_frame_compile`` holding
    three nested ``(dynamo_timed)`` spans), then 4 compiled 1 ms calls on the GPU, in
    steps (or, without, as one call: nothing repeats to infer iterations from)."""
    if steps:
        b.step(1, 0, 1_710_000)
    b.op("TorchDynamo Cache Lookup", 10, 5)
    b.op("entire_frame_compile", 20, 1_700_000)
    b.op("_compile.compile_inner (dynamo_timed)", 30, 1_699_000)
    b.op("OutputGraph.call_user_compiler (dynamo_timed)", 1000, 1_600_000)
    b.op("CachingAutotuner.benchmark_all_configs (dynamo_timed)", 500_000, 800_000)
    t = 1_710_000
    for s in range(4 if steps else 1):
        t0 = t + s * 1000
        if steps:
            b.step(s + 2, t0, 1000)
        b.op("Torch-Compiled Region: 0/0", t0 + 10, 900)
        b.launch("triton_poi_fused_0", t0 + 20, t0 + 30, 900)


def test_compilation_in_the_window_with_steps(builder):
    compile_then_run(builder, steps=True)
    f = next(f for f in RULE.run(builder.analysis())
             if f.title == "Compilation inside the profiled window")
    assert f.steps == [1]
    assert f.message.startswith(
        "The host spends 1.70 s compiling in the profiled window, 1.70 s of it in step 1 "
        "(torch.compile: 1 compile(s), 4 compile-work annotations): a one-time cost")
    assert f.evidence[0].name == "entire_frame_compile"


def test_compilation_in_a_span_without_steps(builder):
    compile_then_run(builder, steps=False)
    (f,) = RULE.run(builder.analysis())
    assert f.title == "Compilation inside the profiled window" and f.steps == [None]
    assert f.message.startswith("The host spends 1.70 s compiling in the profiled window "
                                "(torch.compile: 1 compile(s), 4 compile-work annotations)")


def test_compilation_before_the_first_step(builder):
    compile_then_run(builder, steps=True)
    builder.events[:] = [e for e in builder.events if e["name"] != "ProfilerStep#1"]
    f = next(f for f in RULE.run(builder.analysis())
             if f.title == "Compilation inside the profiled window")
    assert "1.70 s compiling in the profiled window, 1.70 s outside the steps" in f.message
    assert f.steps == [2]  # the first step, where a finding of the span has to point


def test_short_compile_work_is_not_reported(make_builder):
    b = make_builder(device_properties=[])
    b.compiled_steps(3, compile_in=2, work_us=180)  # an 8 µs entire_frame_compile
    assert RULE.run(b.analysis()) == []
