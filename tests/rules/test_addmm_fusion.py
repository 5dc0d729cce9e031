"""addmm-fusion: aten::addmm = the same GEMM plus a bias copy."""

from __future__ import annotations

from tb_diagnostics.rules.addmm_fusion import RULE


def test_compiled_addmm_with_its_bias_copy(builder):
    for s in range(2):
        t0 = s * 1000
        builder.step(s + 1, t0, 999)
        builder.op("Torch-Compiled Region: 0/0", t0 + 5, 200)
        builder.op("aten::addmm", t0 + 10, 100)
        builder.launch("Memcpy DtoD (Device -> Device)", t0 + 15, t0 + 25, 33,
                       api="cudaMemcpyAsync", cat="gpu_memcpy", bytes=33554432)
        builder.launch("ampere_bf16_s16816gemm_bf16_128x128", t0 + 40, t0 + 60, 500)
    (f,) = RULE.run(builder.analysis())
    assert "1 per step from compiled code" in f.message
    assert "1 GEMM kernel(s) per step" in f.message and "1 bias copy(ies)" in f.message
    assert "33.55 MB" in f.message
    assert {e.note for e in f.evidence} >= {"the bias copy", "the GEMM kernel"}


def test_linear_addmm_without_copy(builder):
    builder.step(1, 0, 999)
    builder.op("aten::linear", 5, 120)
    builder.op("aten::addmm", 10, 100)
    builder.launch("gemm_kernel", 40, 60, 500)
    (f,) = RULE.run(builder.analysis())
    assert "from nn.Linear (aten::linear)" in f.message and "no separate bias copy" in f.message


def test_silent_without_addmm(builder):
    builder.steady_steps(2)
    assert RULE.run(builder.analysis()) == []
