"""Cost formulas of the attention custom ops of FlashAttention 2 and 3 and xformers, as
``record_shapes`` writes them (q/k/v ``Input Dims``, flags in
``Concrete Inputs`` at their position in the op's schema).

FlashInfer's and vLLM's serving ops are in :mod:`.serving_ops`. FLOPs are those of
FlashAttention's own benchmarks: the forward is
2·B·H_q·pairs·(D_qk + D_v), where ``pairs`` is the number of (query, key) pairs the
kernel computes per batch and head: S_q·S_k without a mask, S_q·(max(0, S_k − S_q) +
S_k)/2 with the causal mask aligned to the bottom right, and the exact count per query
row with a sliding window (``flops()`` in Dao-AILab/flash-attention
hopper/benchmark_attn.py). The backward is 2.5× the forward
(benchmarks/benchmark_flash_attention.py: ``2.5 * f``). With GQA/MQA the keys and
values have fewer heads: the FLOPs follow the query heads, the bytes the real tensors.

An op whose cost the shapes do not fix says why (``CannotModel``): a variable-length
batch whose per-sequence lengths are only in ``cu_seqlens``' values, a paged KV cache
whose context lengths are tensor values, vLLM's attention whose cache and lengths are
in its forward context. The bytes such an op moves at the least (queries, new keys and
values read, output written) are given as a lower bound; the context length is never
guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.cost.formula import CannotModel, Formula, need
from tb_diagnostics.analysis.cost.shapes import PRECISION, OpArgs, numel

NO_SHAPE = "the query, key or value shape was not recorded"
#: FlashAttention's convention for the backward (see the module docstring).
BACKWARD_FACTOR = 2.5
VARLEN_WHY = ("variable-length batch: the sequence lengths are cu_seqlens' values, "
              "which the trace does not record (only their total and max_seqlen)")
KV_CACHE_WHY = ("KV-cache call: the context lengths are tensor values (seqused_k / page "
                "table), which the trace does not record")


def attended_pairs(s_q: int, s_k: int, causal: bool, window_left: int = -1,
                   window_right: int = -1, top_left: bool = False) -> float:
    """(query, key) pairs one batch and head computes; -1 is an unbounded window side.

    Causal masks are aligned to the bottom right (query i sees keys up to i + S_k − S_q)
    as in FlashAttention ≥ 2.1, FlashInfer and xformers' ``BottomRight`` masks;
    ``top_left`` aligns them to the top left (xformers' ``LowerTriangularMask``)."""
    if causal:
        window_right = 0
    # A window as long as the keys is no window (csrc/flash_attn/flash_api.cpp mha_fwd).
    window_left = -1 if window_left >= s_k else window_left
    window_right = -1 if window_right >= s_k else window_right
    offset = 0 if top_left else s_k - s_q
    if window_left < 0 and window_right < 0:
        return float(s_q) * s_k
    if window_left < 0 and window_right == 0 and not top_left:
        # Causal: FlashAttention's benchmark formula (S²/2 when S_q = S_k, as SDPA's).
        return s_q * (max(0, s_k - s_q) + s_k) / 2
    row = np.arange(s_q, dtype=np.int64) + offset
    lo = np.maximum(row - window_left, 0) if window_left >= 0 else np.zeros_like(row)
    hi = np.minimum(row + window_right, s_k - 1) if window_right >= 0 else \
        np.full_like(row, s_k - 1)
    return float(np.clip(hi - lo + 1, 0, None).sum())


def precision_of(a: OpArgs, i: int) -> str | None:
    t = a.dtype(i)
    return PRECISION.get(t) if t else None


def tensor_bytes(a: OpArgs, *indices: int | None, default: int = 2) -> float:
    """Bytes of the recorded tensors among ``indices`` (absent ones count 0)."""
    total = 0.0
    for i in indices:
        if i is not None and a.shape(i) is not None:
            total += numel(a.shape(i)) * (a.itemsize(i, default) or default)
    return total


def _flag(a: OpArgs, i: int, what: str) -> bool:
    v = a.value(i)
    if not isinstance(v, bool):
        raise CannotModel(f"{what} is not recorded as a bool where the op's schema puts it "
                          "(another version of the library?)")
    return v


def _window(a: OpArgs, spec: _Spec) -> tuple[int, int]:
    if spec.window_pair is not None:  # an autograd Function's window_size tuple
        pair = a.value(spec.window_pair)
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)):
            raise CannotModel("window_size (a tuple) was not recorded")
        return pair[0], pair[1]
    if spec.window is None:
        return -1, -1
    sides = [a.value(i) for i in spec.window]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in sides):
        raise CannotModel("the sliding-window sizes were not recorded")
    return sides[0], sides[1]


@dataclass(frozen=True)
class _Spec:
    """Where an attention op's arguments are (indices into its schema)."""

    q: int  # k and v follow
    causal: int  # the causal flag (xformers: custom_mask_type)
    backward: bool = False
    window: tuple[int, int] | None = None  # window_size_left, window_size_right
    window_pair: int | None = None  # or one window_size tuple (autograd Functions)
    cu_seqlens: tuple[int, int] | None = None  # cu_seqlens_q / _k (varlen when present)
    max_seqlen: tuple[int, int] | None = None
    kv_cache: tuple[int, ...] = ()  # arguments whose presence means a partial KV read
    out: int | None = None  # the output tensor when it is an argument (its dtype)
    qv: int | None = None  # FA3's extra query against V (MLA): adds D_v to the QK product
    chunk: int | None = None  # FA3's attention_chunk (chunked local attention when > 0)
    mask_type: bool = False  # ``causal`` holds xformers' custom_mask_type (0, 1, 2)


def _causal(a: OpArgs, spec: _Spec) -> tuple[bool, bool]:
    """(causal, aligned to the top left)."""
    if spec.mask_type:
        t = a.value(spec.causal)
        if t not in (0, 1, 2):
            raise CannotModel("custom_mask_type was not recorded")
        return t != 0, t == 1
    return _flag(a, spec.causal, "causal"), False


def _lengths(a: OpArgs, spec: _Spec, total_q: int, total_k: int) -> tuple[int, int, int]:
    """(batch, S_q, S_k) of a varlen call, when its shapes force every sequence's length:
    one sequence, or totals that are batch × max_seqlen (all sequences at the maximum)."""
    cu_q = need(a.shape(spec.cu_seqlens[0]), VARLEN_WHY)
    if len(cu_q) != 1 or cu_q[0] < 2:
        raise CannotModel("cu_seqlens is not a vector of batch + 1 offsets")
    n = cu_q[0] - 1
    if n == 1:
        return 1, total_q, total_k
    max_q, max_k = (a.value(i) for i in spec.max_seqlen) if spec.max_seqlen else (None, None)
    if isinstance(max_q, int) and isinstance(max_k, int) and \
            total_q == n * max_q and total_k == n * max_k:
        return n, max_q, max_k
    raise CannotModel(VARLEN_WHY)


def _operands(a: OpArgs, spec: _Spec) -> tuple[list[int], list[int], list[int], bool]:
    """q, k, v and whether the call is varlen: (total tokens, heads, dim) when cu_seqlens
    are given (xformers passes them with a leading batch of 1), else (batch, seqlen,
    heads, dim)."""
    q, k, v = (need(a.shape(spec.q + j), NO_SHAPE) for j in range(3))
    varlen = len(q) == 3 or (spec.cu_seqlens is not None
                             and a.shape(spec.cu_seqlens[0]) is not None)
    if varlen and len(q) == len(k) == len(v) == 4 and q[0] == k[0] == 1:
        q, k, v = q[1:], k[1:], v[1:]
    want = 3 if varlen else 4
    if not (len(q) == len(k) == len(v) == want):
        raise CannotModel("attention operands are not (batch, seqlen, heads, dim) or, "
                          "varlen, (tokens, heads, dim)")
    return q, k, v, varlen


def _attention(spec: _Spec) -> Formula:
    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        q, k, v, varlen = _operands(a, spec)
        size = a.itemsize(spec.q, d) or d
        out_size = a.itemsize(spec.out, 0) if spec.out is not None else 0
        # FP8 attention writes a 16-bit output (FA3); otherwise the output is q's dtype.
        out_size = out_size or (2 if size == 1 else size)
        h, d_qk, h_k, d_v = q[-2], q[-1], k[-2], v[-1]
        if h_k == 0 or h % h_k:
            raise CannotModel("query heads are not a multiple of the key/value heads")
        t_q = numel(q) // max(h * d_qk, 1)
        # Read q, k, v once and write the output once (a backward reads dout, q, k, v, out
        # and writes dq, dk, dv).
        qkv = numel(q) * size + (numel(k) + numel(v)) * (a.itemsize(spec.q + 1, d) or size)
        out = t_q * h * d_v * out_size
        nbytes = 2 * (qkv + out) if spec.backward else qkv + out
        nbytes += tensor_bytes(a, spec.qv, default=size)
        if any(a.shape(i) is not None for i in spec.kv_cache):
            raise CannotModel(KV_CACHE_WHY, lower_bound_bytes=numel(q) * size + out)
        try:  # the bytes are known from here on: a reason comes with them as a bound
            if varlen:
                b, s_q, s_k = _lengths(a, spec, q[0], k[0])
            else:
                b, s_q, s_k = q[0], q[1], k[1]
            causal, top_left = _causal(a, spec)
            left, right = _window(a, spec)
            chunk = a.value(spec.chunk) if spec.chunk is not None else 0
            if not isinstance(chunk, int) or isinstance(chunk, bool):
                raise CannotModel("attention_chunk is not recorded as an int where the "
                                  "op's schema puts it (another version of the library?)")
            if chunk > 0:
                raise CannotModel("chunked local attention (attention_chunk), which this "
                                  "model does not count")
        except CannotModel as why:
            raise CannotModel(str(why), lower_bound_bytes=nbytes) from None
        pairs = attended_pairs(s_q, s_k, causal, left, right, top_left)
        d_scores = d_qk + (d_v if spec.qv is not None and a.shape(spec.qv) is not None else 0)
        flops = 2.0 * b * h * pairs * (d_scores + d_v)
        if spec.backward:
            flops *= BACKWARD_FACTOR
        return flops, float(nbytes), precision_of(a, spec.q)

    return formula


def _either(*specs: _Spec) -> Formula:
    """An autograd Function whose schema differs between library versions (FA2's and
    FA3's ``FlashAttnFunc`` share the name): the spec whose causal position holds a bool."""
    formulas = [(_attention(s), s) for s in specs]

    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        for f, s in formulas:
            if isinstance(a.value(s.causal), bool):
                return f(a, d)
        raise CannotModel("the causal flag was not recorded",
                          lower_bound_bytes=tensor_bytes(a, 0, 1, 2, default=d) or None)

    return formula


# ---- the ops, with their schemas ------------------------------------------------------
# Dao-AILab/flash-attention flash_attn/flash_attn_interface.py (FA2 ≥ 2.6, torch.library
# custom ops): _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal,
# window_size_left, window_size_right, softcap, alibi_slopes, return_softmax);
# _flash_attn_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p,
# softmax_scale, causal, window_size_left, window_size_right, …);
# _flash_attn_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
# max_seqlen_k, dropout_p, softmax_scale, causal, window_size_left, window_size_right,
# softcap, alibi_slopes, return_softmax, block_table, leftpad_k, seqused_k, …);
# _flash_attn_varlen_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q,
# cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal,
# window_size_left, window_size_right, …). FlashAttnFunc is the autograd Function of
# FA2 and of FA3 (hopper/flash_attn_interface.py), recorded under its class name.
_FA2 = {
    "flash_attn::_flash_attn_forward": _Spec(0, 5, window=(6, 7)),
    "flash_attn::_flash_attn_backward": _Spec(1, 11, backward=True, window=(12, 13)),
    "flash_attn::_flash_attn_varlen_forward": _Spec(
        0, 9, window=(10, 11), cu_seqlens=(3, 4), max_seqlen=(5, 6), kv_cache=(15, 16, 17)),
    "flash_attn::_flash_attn_varlen_backward": _Spec(
        1, 15, backward=True, window=(16, 17), cu_seqlens=(9, 10), max_seqlen=(11, 12)),
}
# FlashAttnFunc.forward(ctx, q, k, v, dropout_p, softmax_scale, causal, window_size, …)
# in FA2, (ctx, q, k, v, softmax_scale, causal, qv, q_descale, k_descale, v_descale,
# window_size, attention_chunk, …) in FA3; FlashAttnVarlenFunc.forward(ctx, q, k, v,
# cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
# causal, window_size, softcap, alibi_slopes, deterministic, return_softmax, block_table,
# …) in FA2, (ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
# max_seqlen_q, max_seqlen_k, softmax_scale, causal, qv, q_descale, k_descale, v_descale,
# window_size, attention_chunk, …) in FA3. The profiler records them without ctx.
_AUTOGRAD = {
    "FlashAttnFunc": (_Spec(0, 5, window_pair=6), _Spec(0, 4, window_pair=9, qv=5, chunk=10)),
    "FlashAttnVarlenFunc": (
        _Spec(0, 9, window_pair=10, cu_seqlens=(3, 4), max_seqlen=(5, 6), kv_cache=(15,)),
        _Spec(0, 10, window_pair=15, cu_seqlens=(3, 4), max_seqlen=(7, 8), kv_cache=(5, 6),
              qv=11, chunk=16)),
}
# Dao-AILab/flash-attention hopper/flash_api.cpp, TORCH_LIBRARY(flash_attn_3): fwd(q, k,
# v, k_new, v_new, q_v, out, cu_seqlens_q, cu_seqlens_k, cu_seqlens_k_new, seqused_q,
# seqused_k, max_seqlen_q, max_seqlen_k, page_table, kv_batch_idx, leftpad_k,
# rotary_cos, rotary_sin, seqlens_rotary, q_descale, k_descale, v_descale,
# softmax_scale, is_causal, window_size_left, window_size_right, attention_chunk, …)
# and bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k,
# seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, is_causal,
# window_size_left, window_size_right, …); hopper/flash_attn_interface.py wraps them
# in the custom ops _flash_attn_forward (same order as fwd) and _flash_attn_backward
# (dout, q, k, v, out, softmax_lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k,
# max_seqlen_q, max_seqlen_k, dq, dk, dv, softmax_scale, is_causal, …).
_FA3_FWD = _Spec(0, 24, window=(25, 26), cu_seqlens=(7, 8), max_seqlen=(12, 13),
                 kv_cache=(3, 9, 10, 11, 14, 15, 16), out=6, qv=5, chunk=27)
_FA3 = {
    "flash_attn_3::fwd": _FA3_FWD,
    "flash_attn_3::_flash_attn_forward": _FA3_FWD,
    "flash_attn_3::bwd": _Spec(1, 16, backward=True, window=(17, 18), cu_seqlens=(9, 10),
                               max_seqlen=(13, 14), kv_cache=(11, 12)),
    "flash_attn_3::_flash_attn_backward": _Spec(
        1, 16, backward=True, window=(17, 18), cu_seqlens=(6, 7), max_seqlen=(10, 11),
        kv_cache=(8, 9)),
}
# facebookresearch/xformers xformers/csrc/attention/attention.cpp (CUDA):
# efficient_attention_forward_cutlass(query, key, value, bias, cu_seqlens_q,
# cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, custom_mask_type, …, seqlen_k,
# window_size) and efficient_attention_backward_cutlass(grad_out_, query, key, value,
# bias, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, logsumexp,
# dropout_p, philox_seed, philox_offset, custom_mask_type, …); custom_mask_type 0 none,
# 1 causal from the top left, 2 from the bottom right. xformers/ops/fmha/flash.py:
# xformers_flash::flash_fwd(query, key, value, cu_seqlens_q, cu_seqlens_k, seqused_k,
# max_seqlen_q, max_seqlen_k, p, softmax_scale, is_causal, window_left, window_right,
# return_softmax, block_tables) and flash_bwd(grads_share_storage, grad, query, key,
# value, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, p,
# softmax_scale, is_causal, window_left, window_right, rng_state). xformers/ops/fmha/
# flash3.py: xformers_flash3::flash_fwd(query, key, value, cu_seqlens_q, cu_seqlens_k,
# seqused_k, leftpad_k, max_seqlen_q, max_seqlen_k, p, softmax_scale, is_causal,
# descale_q, descale_k, descale_v, block_table, use_kvsplit, window_left, window_right)
# and flash_bwd(grads_share_storage, dout, query, key, value, out, softmax_lse,
# cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, is_causal,
# window_left, window_right). Layout (B, M, H, K), or (total, H, K) with cu_seqlens.
_XFORMERS = {
    "xformers::efficient_attention_forward_cutlass": _Spec(
        0, 9, mask_type=True, cu_seqlens=(4, 5), max_seqlen=(6, 7), kv_cache=(12,)),
    "xformers::efficient_attention_backward_cutlass": _Spec(
        1, 14, backward=True, mask_type=True, cu_seqlens=(6, 7), max_seqlen=(8, 9)),
    "xformers_flash::flash_fwd": _Spec(0, 10, window=(11, 12), cu_seqlens=(3, 4),
                                       max_seqlen=(6, 7), kv_cache=(5, 14)),
    "xformers_flash::flash_bwd": _Spec(2, 13, backward=True, window=(14, 15),
                                       cu_seqlens=(7, 8), max_seqlen=(9, 10)),
    "xformers_flash3::flash_fwd": _Spec(0, 11, window=(17, 18), cu_seqlens=(3, 4),
                                        max_seqlen=(7, 8), kv_cache=(5, 6, 15)),
    "xformers_flash3::flash_bwd": _Spec(2, 12, backward=True, window=(13, 14),
                                        cu_seqlens=(7, 8), max_seqlen=(9, 10)),
}


def _xformers_bias(name: str) -> Formula:
    """xformers' cutlass kernels read an optional additive bias (index 3 forward, 4
    backward) and take a local-attention ``window_size`` this model does not count."""
    forward = "forward" in name
    base, bias_at, window_at = _attention(_XFORMERS[name]), 3 if forward else 4, \
        13 if forward else 18

    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        flops, nbytes, precision = base(a, d)
        window = a.value(window_at)
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            raise CannotModel("a local-attention window_size, which this model does not "
                              "count", lower_bound_bytes=nbytes)
        return flops, nbytes + tensor_bytes(a, bias_at, default=d), precision

    return formula


ATTENTION_OPS: dict[str, Formula] = {
    **{n: _attention(s) for n, s in {**_FA2, **_FA3}.items()},
    **{n: _either(*specs) for n, specs in _AUTOGRAD.items()},
    **{n: _attention(s) for n, s in _XFORMERS.items() if n.startswith("xformers_flash")},
    **{n: _xformers_bias(n) for n in _XFORMERS if n.startswith("xformers::")},
}

