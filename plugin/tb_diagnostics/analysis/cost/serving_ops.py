"""Cost formulas of the serving libraries' ops: FlashInfer's per-variant prefill and
decode runs, vLLM's ``unified_attention`` ops and its memory-side kernels (``_C::``
RMS norms, rotary embedding, gated activations).

The counting is :mod:`.custom_ops`' (pairs of query and key per batch and head). A
serving call often reads a paged KV cache whose context lengths are tensor values, or
(vLLM) keeps the cache and the lengths out of its arguments: then the op says so and
gets the bytes it moves at the least (queries read, output written) as a lower bound;
the context length is never guessed.
"""

from __future__ import annotations

import re

from tb_diagnostics.analysis.cost.custom_ops import (
    KV_CACHE_WHY,
    NO_SHAPE,
    VARLEN_WHY,
    attended_pairs,
    precision_of,
    tensor_bytes,
)
from tb_diagnostics.analysis.cost.formula import CannotModel, Formula, need
from tb_diagnostics.analysis.cost.shapes import OpArgs, numel

# ---- FlashInfer -----------------------------------------------------------------------
# flashinfer-ai/flashinfer flashinfer/prefill.py and decode.py register one op per
# compiled variant, ``flashinfer::{uri}_run`` / ``_ragged_run`` / ``_paged_run``, the uri
# starting with the kind (flashinfer/jit/attention/modules.py get_*_uri):
# single prefill run(q, k, v, tmp, o, maybe_lse, mask_mode, layout, window_left, …);
# single decode run(q, k, v, tmp, o, maybe_lse, alibi_slopes, kv_layout_code,
# window_left, …); batch prefill ragged_run(float_ws, int_ws, plan_info_vec, q, k, v,
# qo_indptr, kv_indptr, o, maybe_lse, mask_mode, layout, window_left, …) and
# paged_run(float_ws, int_ws, plan_info_vec, q, paged_k_cache, paged_v_cache, qo_indptr,
# paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, o, …); batch decode
# run(float_ws, int_ws, plan_info_vec, q, paged_k_cache, paged_v_cache, paged_kv_indptr,
# paged_kv_indices, paged_kv_last_page_len, o, …). q is (tokens, heads, dim); k and v
# are (tokens, heads, dim) for layout 0 (NHD) and (heads, tokens, dim) for 1 (HND);
# mask_mode 0 none, 1 causal (bottom right), 2 custom mask, 3 multi-item.
FLASHINFER_OP = re.compile(
    r"^flashinfer::(single_prefill|single_decode|batch_prefill|batch_decode)"
    r"_with_kv_cache\w*?_(ragged_run|paged_run|run)$")


#: Where the output ``o`` is, per (kind, run).
_FLASHINFER_OUT = {("single_prefill", "run"): 4, ("single_decode", "run"): 4,
                   ("batch_prefill", "ragged_run"): 8, ("batch_prefill", "paged_run"): 10,
                   ("batch_decode", "run"): 9}


def _nhd(shape: list[int], layout: object) -> list[int]:
    if layout not in (0, 1) or len(shape) != 3:
        raise CannotModel("the KV layout was not recorded")
    return shape if layout == 0 else [shape[1], shape[0], shape[2]]


def _flashinfer(kind: str, run: str) -> Formula:
    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        first = 0 if kind.startswith("single") else 3  # batch runs take workspaces first
        q = need(a.shape(first), NO_SHAPE)
        size = a.itemsize(first, d) or d
        out_at = _FLASHINFER_OUT.get((kind, run))
        if out_at is None:
            raise CannotModel(f"no {kind} op named …_{run} in FlashInfer")
        floor = numel(q) * size + tensor_bytes(a, out_at, default=size)
        if kind == "batch_decode" or run == "paged_run":
            raise CannotModel("paged KV cache: " + KV_CACHE_WHY.split(": ", 1)[1],
                              lower_bound_bytes=floor)
        mask_at, layout_at, window_at = {"single_prefill": (6, 7, 8), "single_decode":
                                         (None, 7, 8), "batch_prefill": (10, 11, 12)}[kind]
        k, v = (_nhd(need(a.shape(first + j), NO_SHAPE), a.value(layout_at))
                for j in (1, 2))
        if kind == "single_decode":
            q = [1, *q]  # one query token per head
        if len(q) != 3:
            raise CannotModel("q is not (tokens, heads, dim)")
        mask = a.value(mask_at) if mask_at is not None else 0
        if mask not in (0, 1):
            raise CannotModel("a custom attention mask: its density is tensor data",
                              lower_bound_bytes=floor)
        window = a.value(window_at)
        if not isinstance(window, int) or isinstance(window, bool):
            raise CannotModel("window_left was not recorded")
        (s_q, h, d_qk), (s_k, h_k, _), d_v = q, k, v[2]
        if h_k == 0 or h % h_k:
            raise CannotModel("query heads are not a multiple of the key/value heads")
        # q, k and v read once, the output written once.
        nbytes = numel(q) * size + (numel(k) + numel(v)) * (a.itemsize(first + 1, d) or size)
        nbytes += s_q * h * d_v * (a.itemsize(out_at, size) or size)
        if kind == "batch_prefill" and need(a.shape(first + 3), VARLEN_WHY) != [2]:
            # Several requests: their lengths are qo_indptr / kv_indptr's values.
            raise CannotModel(VARLEN_WHY.replace("cu_seqlens'", "qo_indptr's").replace(
                " and max_seqlen", ""), lower_bound_bytes=nbytes)
        pairs = attended_pairs(s_q, s_k, mask == 1, window)
        return 2.0 * h * pairs * (d_qk + d_v), float(nbytes), precision_of(a, first)

    return formula


# ---- vLLM -------------------------------------------------------------------------------
# vllm-project/vllm vllm/model_executor/layers/attention/attention.py (formerly
# vllm/attention/layer.py), registered with direct_register_custom_op:
# unified_attention(query, key, value, layer_name) -> Tensor and
# unified_attention_with_output(query, key, value, output, layer_name, output_scale,
# output_block_scale, …). query (tokens, heads, head_size), key/value (tokens,
# kv_heads, head_size): only this step's new tokens. The KV cache and every sequence's
# context length live in vLLM's forward context, not in the arguments.
_VLLM_WHY = ("vLLM attention: the KV cache and the context lengths are in vLLM's forward "
             "context, not in the op's arguments")


def _vllm(with_output: bool) -> Formula:
    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        q = need(a.shape(0), NO_SHAPE)
        size = a.itemsize(0, d) or d
        # Reads the new queries, keys and values; writes the output (as big as q when it
        # is not an argument).
        floor = tensor_bytes(a, 0, 1, 2, 3 if with_output else None, default=size)
        if not with_output:
            floor += numel(q) * size
        raise CannotModel(_VLLM_WHY, lower_bound_bytes=floor)

    return formula


# ---- vLLM's memory-side kernels ---------------------------------------------------------
# vllm-project/vllm csrc/torch_bindings.cpp (library _C): rms_norm(Tensor! result, Tensor
# input, Tensor? weight, float epsilon, …); fused_add_rms_norm(Tensor! input, Tensor!
# residual, Tensor? weight, float epsilon, …) (residual += input, then input = norm of
# it); rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, int head_size,
# Tensor cos_sin_cache, bool is_neox) (in place, on the first rot_dim values of each
# head, rot_dim = cos_sin_cache.size(1)); silu_and_mul / mul_and_silu / gelu_and_mul /
# gelu_tanh_and_mul(Tensor! out, Tensor input) (out = act(x[..., :d]) · x[..., d:]).
# FLOPs per element follow :mod:`.pointwise` (4 for an RMS norm, 1 per elementwise op;
# a rotation is 4 multiplies and 2 adds per pair of values).
def _rms_norm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x = need(a.shape(1), NO_SHAPE)
    size = a.itemsize(1, d) or d
    out = tensor_bytes(a, 0, default=size) or numel(x) * size
    return 4.0 * numel(x), numel(x) * size + tensor_bytes(a, 2, default=size) + out, \
        precision_of(a, 1)


def _fused_add_rms_norm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x, r = need(a.shape(0), NO_SHAPE), need(a.shape(1), NO_SHAPE)
    size = a.itemsize(0, d) or d
    # Reads input and residual, writes both back: one add and the norm's 4 per element.
    moved = 2 * (numel(x) * size + numel(r) * (a.itemsize(1, d) or size))
    return 5.0 * numel(x), moved + tensor_bytes(a, 2, default=size), precision_of(a, 0)


def _rotary_embedding(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    positions, q = need(a.shape(0), NO_SHAPE), need(a.shape(1), NO_SHAPE)
    cache = need(a.shape(4), "cos_sin_cache's shape was not recorded")
    head_size = a.value(3)
    tokens = numel(positions)
    if not isinstance(head_size, int) or head_size <= 0 or tokens == 0 or len(cache) != 2:
        raise CannotModel("head_size or the cos/sin cache was not recorded")
    k = a.shape(2)
    heads = (numel(q) + (numel(k) if k is not None else 0)) // (tokens * head_size)
    rot_dim = cache[1]
    rotated = tokens * heads * rot_dim  # values rotated, each read and written once
    size = a.itemsize(1, d) or d
    nbytes = (numel(positions) * (a.itemsize(0, 8) or 8) + 2 * rotated * size
              + tokens * rot_dim * (a.itemsize(4, 4) or 4))  # the cache rows gathered
    return 3.0 * rotated, float(nbytes), precision_of(a, 1)


def _act_and_mul(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    out, x = need(a.shape(0), NO_SHAPE), need(a.shape(1), NO_SHAPE)
    size = a.itemsize(1, d) or d
    return 2.0 * numel(out), numel(x) * size + numel(out) * (a.itemsize(0, d) or size), \
        precision_of(a, 1)


# csrc/torch_bindings.cpp (library _C_cache_ops): reshape_and_cache(_flash)(Tensor key,
# Tensor value, Tensor! key_cache, Tensor! value_cache, Tensor slot_mapping, str
# kv_cache_dtype, …) and concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor!
# kv_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor scale): this step's tokens
# are copied into their cache slots; the rest of the cache is not touched (counting the
# whole cache would be gigabytes no kernel moves).
def _cache_write(sources: tuple[int, ...], caches: tuple[int, ...], slots: int) -> Formula:
    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        for i in sources + caches:
            need(a.shape(i), NO_SHAPE)
        values = sum(numel(a.shape(i)) for i in sources)
        cache_size = a.itemsize(caches[0], 0) or a.itemsize(sources[0], d) or d
        nbytes = tensor_bytes(a, *sources, slots, default=d) + values * cache_size
        return 0.0, float(nbytes), precision_of(a, sources[0])

    return formula


#: name → (family, formula).
SERVING_OPS: dict[str, tuple[str, Formula]] = {
    "vllm::unified_attention": ("attention", _vllm(False)),
    "vllm::unified_attention_with_output": ("attention", _vllm(True)),
    "_C::rms_norm": ("norm", _rms_norm),
    "_C::fused_add_rms_norm": ("norm", _fused_add_rms_norm),
    "_C::rotary_embedding": ("elementwise", _rotary_embedding),
    **{f"_C::{n}": ("elementwise", _act_and_mul)
       for n in ("silu_and_mul", "mul_and_silu", "gelu_and_mul", "gelu_tanh_and_mul")},
    **{f"_C_cache_ops::{n}": ("memory", _cache_write((0, 1), (2, 3), 4))
       for n in ("reshape_and_cache", "reshape_and_cache_flash")},
    "_C_cache_ops::concat_and_cache_mla": ("memory", _cache_write((0, 1), (2,), 3)),
}


def pattern_formula(name: str) -> tuple[str, Formula] | None:
    """The family and formula of an op whose name is generated (FlashInfer's per-variant
    ops), or None."""
    m = FLASHINFER_OP.match(name)
    return ("attention", _flashinfer(m.group(1), m.group(2))) if m else None
