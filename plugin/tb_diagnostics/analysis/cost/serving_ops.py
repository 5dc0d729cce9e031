"""Cost formulas of the attention ops of the serving libraries: FlashInfer's
per-variant prefill and decode runs, and vLLM's ``unified_attention`` ops.

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


SERVING_OPS: dict[str, Formula] = {
    "vllm::unified_attention": _vllm(False),
    "vllm::unified_attention_with_output": _vllm(True),
}


def pattern_formula(name: str) -> tuple[str, Formula] | None:
    """The family and formula of an op whose name is generated (FlashInfer's per-variant
    ops), or None."""
    m = FLASHINFER_OP.match(name)
    return ("attention", _flashinfer(m.group(1), m.group(2))) if m else None
