"""dispatch-chain: ProfilerStep → record_function → aten::matmul → aten::mm → launch → kernel."""

from __future__ import annotations

from tb_diagnostics.rules.dispatch_chain import RULE


def chain_steps(b, n=3):
    for s in range(n):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation("matmul_add", t0 + 5, 300)
        b.op("aten::matmul", t0 + 10, 100)
        b.op("aten::mm", t0 + 20, 80)
        b.launch("ampere_sgemm_128x64_nn", t0 + 30, t0 + 40, 400)
        b.op("aten::add", t0 + 120, 50)
        b.launch("elementwise_add_kernel", t0 + 130, t0 + 450, 20)


def test_one_chain_for_identical_steps(builder):
    chain_steps(builder)
    (f,) = RULE.run(builder.analysis())
    assert f.steps == [1, 2, 3] and f.severity == "info"
    assert ("ProfilerStep#1 (999 µs) → matmul_add (300 µs) → aten::matmul (100 µs) → "
            "aten::mm (80 µs) → cudaLaunchKernel (5.0 µs) → ampere_sgemm_128x64_nn ×1 "
            "(400 µs on the device)") in f.message
    assert [e.name for e in f.evidence][:3] == ["ProfilerStep#1", "matmul_add", "aten::matmul"]


def test_silent_without_device_work(make_builder):
    b = make_builder(device_properties=[])
    b.step(1, 0, 100)
    b.op("aten::mm", 10, 50)
    assert RULE.run(b.analysis()) == []
