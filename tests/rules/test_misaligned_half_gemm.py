"""misaligned-half-gemm: fp16/bf16 GEMM dims not multiples of 8 (torch's MatMulDimInFP16Pattern)."""

from __future__ import annotations

from tb_diagnostics.rules.misaligned_half_gemm import RULE

BF16 = ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]


def _addmm(b, rows: int, types=BF16) -> None:
    b.step(1, 0, 999)
    b.op("aten::addmm", 10, 50, dims=[[512], [rows, 512], [512, 512], [], []], types=types)
    b.launch("cutlass_80_tensorop_bf16_s16816gemm_bf16_align1", 12, 20, 300)


def test_fires_on_141_rows(builder):
    _addmm(builder, 141)
    (f,) = RULE.run(builder.analysis())
    assert "aten::addmm [[512],[141,512],[512,512],[],[]] ×1 per step (300 µs" in f.message


def test_silent_when_aligned_or_fp32(make_builder):
    b = make_builder()
    _addmm(b, 144)
    assert RULE.run(b.analysis()) == []
    b = make_builder()
    _addmm(b, 141, types=["float", "float", "float", "Scalar", "Scalar"])
    assert RULE.run(b.analysis()) == []


def test_owlv2_attention_bmm(shared):
    (f,) = RULE.run(shared("tracelens_h100_owlv2_large_inference"))
    assert "aten::bmm [[16,5185,64],[16,64,5185]]" in f.message
