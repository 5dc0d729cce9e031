"""Cost formulas of the attention custom ops (analysis.cost.custom_ops) against hand
counts: FlashAttention 2 and 3, xformers, FlashInfer, vLLM. Each call is built as
record_shapes writes it: Input Dims, Input type and Concrete Inputs at the positions of
the op's schema."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_diagnostics.analysis.cost.custom_ops import ATTENTION_OPS, attended_pairs
from tb_diagnostics.analysis.cost.formula import OpCost
from tb_diagnostics.analysis.cost.model import family_of, op_cost
from tb_diagnostics.analysis.cost.serving_ops import SERVING_OPS
from tb_diagnostics.analysis.cost.shapes import OpArgs
from tb_diagnostics.trace.categories import keeps_concrete_inputs

BF16, FP16, FP8, I32 = "c10::BFloat16", "c10::Half", "c10::Float8_e4m3fn", "int"


def cost(name: str, dims: list, types: list, concrete: list) -> OpCost | str:
    return op_cost(name, OpArgs.parse(json.dumps(dims), json.dumps(types),
                                      json.dumps(concrete)), 2)


def priced(name: str, dims: list, types: list, concrete: list) -> OpCost:
    c = cost(name, dims, types, concrete)
    assert isinstance(c, OpCost) and not c.lower_bound, c
    return c


def call(n: int, tensors: dict[int, tuple[list, str]], values: dict[int, str]):
    """(dims, types, concretes) of an n-argument call: tensors by index, the rest scalars
    (a None optional is recorded with empty dims and type)."""
    dims, types, conc = [[] for _ in range(n)], [""] * n, [""] * n
    for i, (shape, dtype) in tensors.items():
        dims[i], types[i] = shape, dtype
    for i, text in values.items():
        types[i], conc[i] = "Scalar", text
    return dims, types, conc


def fa3_fwd(q, k, v, causal="False", left="-1", right="-1", dtype=BF16, extra=None):
    tensors = {0: (q, dtype), 1: (k, dtype), 2: (v, dtype), **(extra or {})}
    return call(35, tensors, {24: causal, 25: left, 26: right, 27: "0"})


# ---- FlashAttention 3 ------------------------------------------------------------------
def test_fa3_forward_is_the_issue_example():
    # B=2, S=1024, H=16, D=128, causal: 4·B·H·S²·D / 2 = 4·2·16·1024²·128 / 2 = 2^33.
    c = priced("flash_attn_3::fwd", *fa3_fwd([2, 1024, 16, 128], [2, 1024, 16, 128],
                                             [2, 1024, 16, 128], causal="True"))
    assert c.flops == 4 * 2 * 16 * 1024 * 1024 * 128 / 2 == 8_589_934_592
    # q, k, v read and the output written once, bf16: 4 · (2·1024·16·128) · 2 bytes.
    assert c.bytes == 4 * 2 * 1024 * 16 * 128 * 2
    assert c.precision == "bf16" and c.family == "attention" and c.tensor_op
    # 8.59 GFLOP in 28 µs: about 307 TFLOP/s, 31 % of an H100 SXM's 989 bf16 TFLOP/s.
    assert c.flops / 28e-6 / 1e12 == pytest.approx(306.8, abs=0.1)


def test_fa3_non_causal_doubles_and_the_python_op_is_the_same():
    args = fa3_fwd([2, 1024, 16, 128], [2, 1024, 16, 128], [2, 1024, 16, 128])
    assert priced("flash_attn_3::fwd", *args).flops == 2 * 8_589_934_592
    assert priced("flash_attn_3::_flash_attn_forward", *args).flops == 2 * 8_589_934_592


def test_fa3_gqa_follows_the_query_heads_and_reads_the_smaller_kv():
    # 32 query heads over 8 KV heads: FLOPs 4·1·32·2048²·128; bytes q+out at 32 heads,
    # k+v at 8.
    c = priced("flash_attn_3::fwd", *fa3_fwd([1, 2048, 32, 128], [1, 2048, 8, 128],
                                             [1, 2048, 8, 128]))
    assert c.flops == 4 * 32 * 2048 * 2048 * 128
    assert c.bytes == (2 * 2048 * 32 * 128 + 2 * 2048 * 8 * 128) * 2


def test_fa3_fp8_is_fp8_with_a_bf16_output():
    c = priced("flash_attn_3::fwd", *fa3_fwd([1, 512, 8, 128], [1, 512, 8, 128],
                                             [1, 512, 8, 128], dtype=FP8))
    assert c.precision == "fp8"
    assert c.bytes == 3 * 512 * 8 * 128 * 1 + 512 * 8 * 128 * 2


def test_decode_causal_is_aligned_to_the_bottom_right():
    # One query against 4096 keys: the causal mask hides nothing from the last row.
    # FA3's benchmark: S_q · (max(0, S_k − S_q) + S_k) / 2 = 1 · (4095 + 4096) / 2.
    c = priced("flash_attn_3::fwd", *fa3_fwd([4, 1, 32, 128], [4, 4096, 32, 128],
                                             [4, 4096, 32, 128], causal="True"))
    assert c.flops == 2 * 4 * 32 * ((4095 + 4096) / 2) * (128 + 128)


def test_sliding_window_counts_each_row():
    # S=8, causal with a left window of 2: rows see min(i, 2) + 1 keys: 1+2+3·6 = 21.
    assert attended_pairs(8, 8, True, 2) == 21
    # Left 1, right 1, no causal: 2 at each end, 3 inside: 2+3·6+2 = 22.
    assert attended_pairs(8, 8, False, 1, 1) == 22
    # Only a right window (non-causal): rows see min(i + 2, 7) + 1 keys: 3+4+5+6+7+8+8+8.
    assert attended_pairs(8, 8, False, -1, 2) == 49
    # A window as long as the keys is none: causal is then the plain half, S²/2.
    assert attended_pairs(8, 8, True, 8) == attended_pairs(8, 8, True) == 32
    c = priced("flash_attn_3::fwd", *fa3_fwd([1, 8, 1, 64], [1, 8, 1, 64], [1, 8, 1, 64],
                                             causal="True", left="2"))
    assert c.flops == 2 * 1 * 1 * 21 * (64 + 64)


def test_fa3_backward_is_two_and_a_half_forwards():
    q = [2, 1024, 16, 128]
    dims, types, conc = call(22, {i: (q, BF16) for i in range(5)}, {16: "True", 17: "-1",
                                                                   18: "-1"})
    c = priced("flash_attn_3::bwd", dims, types, conc)
    assert c.flops == 2.5 * 8_589_934_592
    # Reads dout, q, k, v, out; writes dq, dk, dv: 8 tensors of 2·1024·16·128 bf16.
    assert c.bytes == 8 * 2 * 1024 * 16 * 128 * 2


def test_fa3_paged_kv_is_a_lower_bound_not_a_guess():
    # page_table (index 14) present: the context lengths are tensor values.
    args = fa3_fwd([4, 1, 32, 128], [512, 256, 8, 128], [512, 256, 8, 128],
                   extra={14: ([4, 64], I32), 11: ([4], I32)})
    c = cost("flash_attn_3::fwd", *args)
    assert isinstance(c, OpCost) and c.lower_bound and c.flops == 0
    assert "KV-cache" in c.why and "lower bound" in c.why
    assert c.bytes == 2 * (4 * 32 * 128 * 2)  # q read and the output written


def test_a_schema_of_another_version_says_so():
    # A bool where causal should be is missing: no FLOPs, a reason.
    dims, types, conc = fa3_fwd([2, 64, 4, 64], [2, 64, 4, 64], [2, 64, 4, 64])
    conc[24] = "0.125"
    r = cost("flash_attn_3::fwd", dims, types, conc)
    assert isinstance(r, OpCost) and r.lower_bound and r.flops == 0
    assert "causal" in r.why and "version" in r.why
    assert r.bytes == 4 * 2 * 64 * 4 * 64 * 2  # the bytes are still known: a bound


def test_chunked_local_attention_is_not_guessed():
    dims, types, conc = fa3_fwd([1, 256, 4, 64], [1, 256, 4, 64], [1, 256, 4, 64])
    conc[27] = "64"
    r = cost("flash_attn_3::fwd", dims, types, conc)
    assert isinstance(r, OpCost) and r.lower_bound and "attention_chunk" in r.why


# ---- FlashAttention 2 ----------------------------------------------------------------------
def fa2_fwd(q, k, v, causal="True", left="-1", right="-1"):
    return call(11, {0: (q, BF16), 1: (k, BF16), 2: (v, BF16)},
                {3: "0.", 5: causal, 6: left, 7: right, 8: "0.", 10: "False"})


def test_fa2_forward_causal_and_gqa():
    # 16 query heads over 4 KV heads, causal: 4·2·16·1024²·128 / 2.
    c = priced("flash_attn::_flash_attn_forward",
               *fa2_fwd([2, 1024, 16, 128], [2, 1024, 4, 128], [2, 1024, 4, 128]))
    assert c.flops == 4 * 2 * 16 * 1024 * 1024 * 128 / 2
    assert c.bytes == (2 * 2 * 1024 * 16 * 128 + 2 * 2 * 1024 * 4 * 128) * 2
    non_causal = priced("flash_attn::_flash_attn_forward",
                        *fa2_fwd([2, 1024, 16, 128], [2, 1024, 4, 128], [2, 1024, 4, 128],
                                 causal="False"))
    assert non_causal.flops == 2 * c.flops


def test_fa2_head_dims_of_q_and_v_differ():
    # D_qk = 192, D_v = 128 (DeepSeek-style): 2·B·H·S²·(192 + 128).
    c = priced("flash_attn::_flash_attn_forward",
               *fa2_fwd([1, 256, 8, 192], [1, 256, 8, 192], [1, 256, 8, 128], causal="False"))
    assert c.flops == 2 * 8 * 256 * 256 * (192 + 128)


def test_fa2_backward():
    t = {i: ([1, 512, 8, 64], BF16) for i in range(5)}
    dims, types, conc = call(18, t, {11: "False", 12: "-1", 13: "-1"})
    c = priced("flash_attn::_flash_attn_backward", dims, types, conc)
    assert c.flops == 2.5 * 4 * 8 * 512 * 512 * 64


def varlen(total_q, total_k, n_seqs, max_q, max_k, causal="True"):
    return call(20, {0: ([total_q, 16, 128], BF16), 1: ([total_k, 16, 128], BF16),
                     2: ([total_k, 16, 128], BF16), 3: ([n_seqs + 1], I32),
                     4: ([n_seqs + 1], I32)},
                {5: str(max_q), 6: str(max_k), 7: "0.", 9: causal, 10: "-1", 11: "-1"})


def test_varlen_of_equal_sequences_is_exact():
    # 4 sequences, 4096 tokens, max_seqlen 1024: all four are 1024 long.
    c = priced("flash_attn::_flash_attn_varlen_forward", *varlen(4096, 4096, 4, 1024, 1024))
    assert c.flops == 4 * 4 * 16 * 1024 * 1024 * 128 / 2
    one = priced("flash_attn::_flash_attn_varlen_forward", *varlen(3000, 3000, 1, 3000, 3000))
    assert one.flops == 4 * 16 * 3000 * 3000 * 128 / 2


def test_varlen_of_unequal_sequences_is_only_a_lower_bound():
    # 4 sequences of 4096 tokens, the longest 2048: the split is cu_seqlens' values.
    c = cost("flash_attn::_flash_attn_varlen_forward", *varlen(4096, 4096, 4, 2048, 2048))
    assert isinstance(c, OpCost) and c.lower_bound and c.flops == 0
    assert "cu_seqlens" in c.why
    assert c.bytes == 4 * 4096 * 16 * 128 * 2  # q, k, v read, out written


def test_flash_attn_func_tells_fa2_from_fa3():
    q = [1, 256, 4, 64]
    t = {0: (q, BF16), 1: (q, BF16), 2: (q, BF16)}
    # FA2: (q, k, v, dropout_p, softmax_scale, causal, window_size, …)
    fa2 = call(12, t, {3: "0.", 5: "True", 6: "[-1, -1]"})
    # FA3: (q, k, v, softmax_scale, causal, qv, q/k/v_descale, window_size, chunk, …)
    fa3 = call(16, t, {3: "0.125", 4: "True", 9: "[-1, -1]", 10: "0"})
    half = 4 * 4 * 256 * 256 * 64 / 2
    assert priced("FlashAttnFunc", *fa2).flops == half
    assert priced("FlashAttnFunc", *fa3).flops == half
    # A 63-key left window (FA2): rows see min(i, 63) + 1 keys, causal.
    windowed = priced("FlashAttnFunc", *call(12, t, {3: "0.", 5: "True", 6: "[63, 0]"}))
    assert windowed.flops == 4 * 4 * (64 * 65 / 2 + 192 * 64) * 64
    # No window recorded (a tuple the profiler did not keep): not guessed, a bound.
    r = cost("FlashAttnFunc", *call(12, t, {3: "0.", 5: "True"}))
    assert isinstance(r, OpCost) and r.lower_bound and "window_size" in r.why
    r = cost("FlashAttnFunc", *call(3, t, {}))
    assert isinstance(r, OpCost) and r.lower_bound and "causal" in r.why


def test_flash_attn_varlen_func_of_fa2_and_fa3():
    t = {0: ([2048, 8, 64], BF16), 1: ([2048, 8, 64], BF16), 2: ([2048, 8, 64], BF16),
         3: ([3], I32), 4: ([3], I32)}
    # Two sequences of 1024 (2048 tokens, max_seqlen 1024), causal.
    expected = 4 * 2 * 8 * 1024 * 1024 * 64 / 2
    fa2 = call(17, t, {5: "1024", 6: "1024", 7: "0.", 9: "True", 10: "[-1, -1]"})
    assert priced("FlashAttnVarlenFunc", *fa2).flops == expected
    fa3 = call(20, t, {7: "1024", 8: "1024", 10: "True", 15: "[-1, -1]", 16: "0"})
    assert priced("FlashAttnVarlenFunc", *fa3).flops == expected


# ---- xformers ------------------------------------------------------------------------------
def cutlass_fwd(q, k, mask_type, bias=None):
    t = {0: (q, FP16), 1: (k, FP16), 2: (k, FP16)}
    if bias is not None:
        t[3] = (bias, FP16)
    return call(14, t, {8: "0.", 9: str(mask_type), 10: "False"})


def test_xformers_cutlass_mask_types():
    q, k = [2, 128, 8, 64], [2, 512, 8, 64]
    full = priced("xformers::efficient_attention_forward_cutlass", *cutlass_fwd(q, k, 0))
    assert full.flops == 4 * 2 * 8 * 128 * 512 * 64
    assert full.precision == "fp16"
    # Causal from the top left: row i sees i + 1 keys: 128·129/2 pairs.
    top = priced("xformers::efficient_attention_forward_cutlass", *cutlass_fwd(q, k, 1))
    assert top.flops == 4 * 2 * 8 * (128 * 129 / 2) * 64
    # From the bottom right: S_q · (S_k − S_q + S_k) / 2 = 128 · (384 + 512) / 2.
    bottom = priced("xformers::efficient_attention_forward_cutlass", *cutlass_fwd(q, k, 2))
    assert bottom.flops == 4 * 2 * 8 * (128 * (384 + 512) / 2) * 64


def test_xformers_cutlass_block_diagonal_batch_is_varlen():
    # BlockDiagonalMask: q (1, total, H, K) with seqstart tensors; 4 sequences of 256.
    dims, types, conc = cutlass_fwd([1, 1024, 8, 64], [1, 1024, 8, 64], 0)
    for i, shape in ((4, [5]), (5, [5])):
        dims[i], types[i] = shape, I32
    conc[6] = conc[7] = "256"
    c = priced("xformers::efficient_attention_forward_cutlass", dims, types, conc)
    assert c.flops == 4 * 4 * 8 * 256 * 256 * 64  # not 4·8·1024²·64
    conc[6] = conc[7] = "512"  # unequal sequences: the split is data
    r = cost("xformers::efficient_attention_forward_cutlass", dims, types, conc)
    assert isinstance(r, OpCost) and r.lower_bound and "cu_seqlens" in r.why


def test_xformers_cutlass_reads_its_bias():
    q = [1, 64, 2, 32]
    plain = priced("xformers::efficient_attention_forward_cutlass", *cutlass_fwd(q, q, 0))
    biased = priced("xformers::efficient_attention_forward_cutlass",
                    *cutlass_fwd(q, q, 0, bias=[1, 2, 64, 64]))
    assert biased.bytes - plain.bytes == 2 * 64 * 64 * 2
    assert biased.flops == plain.flops


def test_xformers_flash_forward_and_backward():
    q = [4, 256, 8, 64]
    t = {0: (q, BF16), 1: (q, BF16), 2: (q, BF16)}
    fwd = priced("xformers_flash::flash_fwd",
                 *call(15, t, {6: "256", 7: "256", 8: "0.", 10: "True", 11: "-1", 12: "-1"}))
    assert fwd.flops == 4 * 4 * 8 * 256 * 256 * 64 / 2
    tb = {1: (q, BF16), 2: (q, BF16), 3: (q, BF16), 4: (q, BF16), 5: (q, BF16)}
    bwd = priced("xformers_flash::flash_bwd",
                 *call(17, tb, {0: "False", 13: "True", 14: "-1", 15: "-1"}))
    assert bwd.flops == 2.5 * fwd.flops
    fwd3 = priced("xformers_flash3::flash_fwd",
                  *call(19, t, {7: "256", 8: "256", 9: "0.", 11: "True", 16: "False",
                                17: "-1", 18: "-1"}))
    assert fwd3.flops == fwd.flops
    bwd3 = priced("xformers_flash3::flash_bwd",
                  *call(15, tb, {0: "False", 12: "True", 13: "-1", 14: "-1"}))
    assert bwd3.flops == bwd.flops


# ---- FlashInfer ----------------------------------------------------------------------------
URI = ("_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_head_dim_qk_128_"
       "head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False")


def test_flashinfer_single_prefill_nhd_and_hnd():
    q, k = [1024, 32, 128], [1024, 8, 128]
    t = {0: (q, BF16), 1: (k, BF16), 2: (k, BF16), 3: ([1 << 20], "unsigned char"),
         4: (q, BF16)}
    name = f"flashinfer::single_prefill{URI}_run"
    assert family_of(name) == "attention"
    c = priced(name, *call(18, t, {6: "1", 7: "0", 8: "-1"}))
    assert c.flops == 4 * 32 * 1024 * 1024 * 128 / 2
    assert c.bytes == (2 * 1024 * 32 * 128 + 2 * 1024 * 8 * 128) * 2
    # HND keys (heads, tokens, dim): the same call.
    t[1] = t[2] = ([8, 1024, 128], BF16)
    assert priced(name, *call(18, t, {6: "1", 7: "1", 8: "-1"})).flops == c.flops
    # A custom mask's density is data: a lower bound.
    r = cost(name, *call(18, t, {6: "2", 7: "1", 8: "-1"}))
    assert isinstance(r, OpCost) and r.lower_bound and "mask" in r.why


def test_flashinfer_single_decode():
    name = f"flashinfer::single_decode{URI}_run"
    t = {0: ([32, 128], BF16), 1: ([4096, 8, 128], BF16), 2: ([4096, 8, 128], BF16),
         4: ([32, 128], BF16)}
    c = priced(name, *call(13, t, {7: "0", 8: "-1"}))
    assert c.flops == 2 * 32 * 4096 * (128 + 128)


def test_flashinfer_ragged_batch_prefill():
    name = f"flashinfer::batch_prefill{URI}_ragged_run"
    q, k = [2048, 32, 128], [2048, 8, 128]
    t = {0: ([1 << 20], "unsigned char"), 1: ([1 << 10], "unsigned char"), 3: (q, BF16),
         4: (k, BF16), 5: (k, BF16), 6: ([2], I32), 7: ([2], I32), 8: (q, BF16)}
    # One request (indptr of 2 offsets): exact, causal.
    c = priced(name, *call(20, t, {2: "", 10: "1", 11: "0", 12: "-1"}))
    assert c.flops == 4 * 32 * 2048 * 2048 * 128 / 2
    nbytes = (2 * 2048 * 32 * 128 + 2 * 2048 * 8 * 128) * 2
    assert c.bytes == nbytes
    # Four requests: their lengths are indptr values; the bytes are still known.
    t[6] = t[7] = ([5], I32)
    r = cost(name, *call(20, t, {2: "", 10: "1", 11: "0", 12: "-1"}))
    assert isinstance(r, OpCost) and r.lower_bound and "qo_indptr" in r.why
    assert r.bytes == nbytes


def test_flashinfer_paged_runs_are_lower_bounds():
    name = f"flashinfer::batch_prefill{URI}_paged_run"
    t = {3: ([64, 32, 128], BF16), 4: ([1000, 16, 8, 128], BF16),
         5: ([1000, 16, 8, 128], BF16), 10: ([64, 32, 128], BF16)}
    c = cost(name, *call(16, t, {12: "1", 13: "0", 14: "-1"}))
    assert isinstance(c, OpCost) and c.lower_bound
    assert c.bytes == 2 * 64 * 32 * 128 * 2  # q read, o written; the cache is not bounded
    decode = cost(f"flashinfer::batch_decode{URI}_run", *call(14, t | {9: t[10]}, {}))
    assert isinstance(decode, OpCost) and decode.lower_bound


# ---- vLLM ----------------------------------------------------------------------------------
def test_vllm_attention_is_a_memory_lower_bound_with_the_reason():
    q, kv = [8, 32, 128], [8, 8, 128]
    dims = [q, kv, kv, q, []]
    c = cost("vllm::unified_attention_with_output", dims, [BF16] * 4 + ["String"], [""] * 5)
    assert isinstance(c, OpCost) and c.lower_bound and c.flops == 0
    assert "context" in c.why and "lower bound" in c.why
    # q, k, v of the new tokens read and the output written: (2·8·32·128 + 2·8·8·128)·2.
    assert c.bytes == (2 * 8 * 32 * 128 + 2 * 8 * 8 * 128) * 2
    assert not c.tensor_op
    plain = cost("vllm::unified_attention", [q, kv, kv, []], [BF16] * 3 + ["String"],
                 [""] * 4)
    assert isinstance(plain, OpCost) and plain.bytes == c.bytes


# ---- every op keeps its Concrete Inputs and never fails on odd shapes ------------------------
def test_the_trace_keeps_concrete_inputs_for_these_ops():
    assert all(keeps_concrete_inputs(n) for n in ATTENTION_OPS)
    assert keeps_concrete_inputs(f"flashinfer::single_prefill{URI}_run")


_dim = st.lists(st.integers(0, 64), max_size=5)
_FUZZED = [*sorted(ATTENTION_OPS), *sorted(SERVING_OPS),
           *(f"flashinfer::{kind}{URI}_{run}" for kind, run in (
               ("single_prefill", "run"), ("single_decode", "run"),
               ("batch_prefill", "ragged_run"), ("batch_prefill", "paged_run")))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(_FUZZED),
       dims=st.lists(_dim, max_size=30),
       concrete=st.lists(st.sampled_from(["", "True", "False", "0", "1", "2", "-1", "7", "x"]),
                         max_size=30))
def test_odd_arguments_give_a_cost_or_a_reason(name, dims, concrete):
    r = op_cost(name, OpArgs(dims, [BF16] * len(dims), concrete), 2)
    if isinstance(r, OpCost):
        assert math.isfinite(r.flops) and r.flops >= 0 and math.isfinite(r.bytes)
    else:
        assert isinstance(r, str) and r


# ---- the recorded form, from a real profile (PyTorch on the CPU) -----------------------------
def test_a_real_profile_of_fa2s_schema_is_priced(tmp_path):
    """A torch.library op with FA2's ``_flash_attn_forward`` schema and an autograd
    Function with ``FlashAttnFunc``'s, profiled with record_shapes: the profiler writes
    the op's None tensors as empty dims, its bools as "True", and the Function's
    arguments without ctx and its window_size tuple without a value."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.analysis.views.op_costs import op_costs
    from tb_diagnostics.trace import load_trace

    if hasattr(torch.ops.flash_attn, "_flash_attn_forward"):
        pytest.skip("flash_attn::_flash_attn_forward is already registered (flash_attn installed)")

    # The schema flash_attn_interface.py's @custom_op infers from its annotations.
    schema = ("(Tensor q, Tensor k, Tensor v, float dropout_p, float softmax_scale, "
              "bool causal, int window_size_left, int window_size_right, float softcap, "
              "Tensor? alibi_slopes, bool return_softmax) -> Tensor")

    @torch.library.custom_op("flash_attn::_flash_attn_forward", mutates_args=(),
                             schema=schema)
    def _fwd(q, k, v, dropout_p, softmax_scale, causal, window_size_left, window_size_right,
             softcap, alibi_slopes, return_softmax):
        return q.clone()

    class FlashAttnFunc(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                    alibi_slopes, deterministic, return_softmax, is_grad_enabled):
            return torch.ops.flash_attn._flash_attn_forward(
                q, k, v, dropout_p, softmax_scale, causal, window_size[0], window_size[1],
                softcap, alibi_slopes, return_softmax)

    q = torch.randn(2, 64, 4, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        FlashAttnFunc.apply(q, q, q, 0.0, 0.25, True, (-1, -1), 0.0, None, False, False, False)
    path = tmp_path / "fa2.pt.trace.json"
    prof.export_chrome_trace(str(path))
    raw = {e["name"]: e["args"] for e in json.loads(path.read_text())["traceEvents"]
           if e.get("name") in ("FlashAttnFunc", "flash_attn::_flash_attn_forward")}
    assert raw["flash_attn::_flash_attn_forward"]["Concrete Inputs"][5] == "True"
    assert raw["FlashAttnFunc"]["Concrete Inputs"][5] == "True"
    assert raw["FlashAttnFunc"]["Concrete Inputs"][6] == ""  # the tuple has no value

    groups = {g.name: g for g in op_costs(SpanAnalysis(load_trace(str(path)))).groups}
    # The deepest known op is the one counted: 4·B·H·S²·D / 2 = 4·2·4·64²·16 / 2.
    assert "FlashAttnFunc" not in groups
    c = groups["flash_attn::_flash_attn_forward"].cost
    assert c.flops == 4 * 2 * 4 * 64 * 64 * 16 / 2 and not c.lower_bound
    alone = op_cost("FlashAttnFunc", OpArgs.parse(
        json.dumps(raw["FlashAttnFunc"]["Input Dims"]),
        json.dumps(raw["FlashAttnFunc"]["Input type"]),
        json.dumps(raw["FlashAttnFunc"]["Concrete Inputs"])))
    assert isinstance(alone, OpCost) and alone.lower_bound and "window_size" in alone.why
