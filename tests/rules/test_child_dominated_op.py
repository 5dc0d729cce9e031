"""child-dominated-op: CPU total far above self time; the children are named."""

from __future__ import annotations

from tb_diagnostics.rules.child_dominated_op import RULE


def test_fires_and_follows_the_chain(builder):
    for s in range(2):
        t0 = s * 1000
        builder.step(s + 1, t0, 999)
        builder.op("aten::linear", t0 + 10, 500)
        builder.op("aten::addmm", t0 + 15, 490)
        builder.runtime("cudaMemcpyAsync", t0 + 20, 480)
    (f,) = RULE.run(builder.analysis())
    assert f.message.startswith("aten::linear: 500 µs of CPU total per step")
    assert "aten::addmm 490 µs (98%)" in f.message
    assert "the time sits in aten::addmm → cudaMemcpyAsync" in f.message


def test_silent_when_self_time_dominates(builder):
    for s in range(2):
        builder.step(s + 1, s * 1000, 999)
        builder.op("aten::addmm", s * 1000 + 10, 500)
        builder.runtime("cudaLaunchKernel", s * 1000 + 20, 10)
    assert RULE.run(builder.analysis()) == []


def test_a_cold_step_is_left_out_of_the_per_step_figures(builder):
    # The matmul_add-size64-cpu: a 3.8 ms cold step whose op takes 1.5 ms, warm
    # steps of 100 µs whose op takes 60 µs. Averaged in, the op is "415% of a median step".
    t = 0.0
    for s, (wall, op) in enumerate([(3800, 1500), (100, 60), (100, 60), (100, 60)]):
        builder.step(s, t, wall - 1)
        builder.op("aten::matmul", t + 5, op)
        builder.op("aten::mm", t + 6, op - 2)
        t += wall
    (f,) = RULE.run(builder.analysis())
    assert f.message.startswith("aten::matmul: 60 µs of CPU total per step (60% of a warm step)")
    assert "aten::mm 58 µs" in f.message
    assert f.steps == [1, 2, 3]
    assert f.subject == "aten::matmul"


def test_a_module_load_under_an_op_is_not_its_children_time(builder):
    """A 420 ms first launch (the driver loading the kernel's module) under
    aten::cudnn_convolution is one-time (module-load reports it), not the cost of the op's
    children: the op's total without it is 20 µs."""
    from tb_diagnostics.analysis.views.launch import module_loads

    from .test_module_load import load_in_step

    load_in_step(builder, step=3, steps=6)
    a = builder.analysis()
    assert len(module_loads(a)) == 1
    assert [f.subject for f in RULE.run(a)] == []
