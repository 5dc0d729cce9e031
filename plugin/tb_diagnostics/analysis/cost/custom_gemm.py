"""Cost formulas of the scaled and custom GEMMs: ``aten::_scaled_mm`` with per-tensor,
row-wise and block scales (FP8, MXFP8, NVFP4/MXFP4), and TransformerEngine's GEMM op.

FLOPs are 2·M·N·K (plus one per output element for a bias add); bytes are both
operands, their scales when they are more than one number, and the output, each moved
once. A ``Float4_e2m1fn_x2`` element packs two 4-bit values, so the logical K is twice
the stored size (pytorch/pytorch aten/src/ATen/native/cuda/ScaledBlas.cpp: "Expected
mat1 to be Float8 or Float4_x2 matrix", and the grouped path's ``packed_multiplier =
mat.scalar_type() == at::kFloat4_e2m1fn_x2 ? 2 : 1``).
"""

from __future__ import annotations

from tb_diagnostics.analysis.cost.formula import CannotModel, Formula, need
from tb_diagnostics.analysis.cost.shapes import (
    ITEMSIZE,
    PRECISION,
    SCALAR_TYPE_ITEMSIZE,
    OpArgs,
    numel,
)

_NO_SHAPE = "an operand's shape was not recorded"
FP4_X2 = "c10::Float4_e2m1fn_x2"
#: Lower is narrower: a GEMM of two input types runs at the wider one's rate.
_NARROW = ("fp4", "fp8", "int8", "fp16", "bf16", "tf32", "fp32", "fp64")


def _itemsize(a: OpArgs, i: int, default: int) -> int:
    t = a.types[i] if i < len(a.types) else ""
    return ITEMSIZE.get(t) or default


def _precision_of(t: str) -> str | None:
    return PRECISION.get(t)


def _wider(*precisions: str | None) -> str | None:
    known = [p for p in precisions if p in _NARROW]
    return max(known, key=_NARROW.index) if known else None


def _scale_bytes(a: OpArgs, i: int) -> float:
    """A block or row-wise scale's bytes; a per-tensor scale (one number) is left out, as
    the other formulas leave out scalars."""
    s = a.shape(i)
    if s is None or numel(s) <= 1:
        return 0.0
    return float(numel(s) * _itemsize(a, i, 4))


def _scaled_mm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """``_scaled_mm(mat1, mat2, scale_a, scale_b, bias, scale_result, out_dtype,
    use_fast_accum)`` (aten/src/ATen/native/native_functions.yaml)."""
    x, y = need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE)
    if len(x) != 2 or len(y) != 2:
        raise CannotModel("_scaled_mm operands are not matrices")
    (m, k_stored), n = x, y[1]
    t_a = a.types[0] if a.types else ""
    k = 2 * k_stored if t_a == FP4_X2 else k_stored
    size_a, size_b = _itemsize(a, 0, 1), _itemsize(a, 1, 1)
    out_code = a.value(6)
    if isinstance(out_code, int):
        out_size = SCALAR_TYPE_ITEMSIZE.get(out_code, 2)
    else:  # out_dtype=None writes the input's dtype; unrecorded, assume bf16
        out_size = size_a if len(a.concrete) > 6 else 2
    bias = a.shape(4)
    flops = 2.0 * m * n * k + (m * n if bias is not None else 0)
    nbytes = (m * k_stored * size_a + y[0] * n * size_b + m * n * out_size
              + _scale_bytes(a, 2) + _scale_bytes(a, 3))
    if bias is not None:
        nbytes += numel(bias) * _itemsize(a, 4, out_size)
    t_b = a.types[1] if len(a.types) > 1 else ""
    return flops, float(nbytes), _wider(_precision_of(t_a), _precision_of(t_b)) or "fp8"


# ---- TransformerEngine ---------------------------------------------------------------
# NVIDIA/TransformerEngine 1.x, transformer_engine/pytorch/csrc/ts_fp8_op.cpp:
# TORCH_LIBRARY(tex_ts) te_gemm_ts(A, A_scale_inverse, A_fp8_tensor, A_type, transa, B,
# B_scale_inverse, B_fp8_tensor, B_type, transb, D, D_scale, D_type, D_amax, bias,
# bias_type, pre_gelu_out, grad, workspace, workspaceSize, accumulate,
# use_split_accumulator), called by cpp_extensions/gemm.py gemm()/fp8_gemm() for every
# GEMM; cuBLAS column-major, so in row-major terms D (m, n) = op(B) · op(A) with
# m = B.shape[1] if transb else B.shape[0], n = A.shape[0] if transa else A.shape[1].
# FP8 operands are stored as uint8: A_type/B_type (transformer_engine.h DType: 3 fp32,
# 4 fp16, 5 bf16, 6 fp8 e4m3, 7 fp8 e5m2) give the math. TE ≥ 2.0 calls cuBLAS through
# a pybind function (tex.generic_gemm), which the profiler does not record as an op.
_TE_DTYPE = {3: "fp32", 4: "fp16", 5: "bf16", 6: "fp8", 7: "fp8"}
_TE_ITEMSIZE = {3: 4, 4: 2, 5: 2, 6: 1, 7: 1}


def _te_gemm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    w, x = need(a.shape(0), _NO_SHAPE), need(a.shape(5), _NO_SHAPE)
    if len(w) != 2 or len(x) != 2:
        raise CannotModel("te_gemm operands are not matrices")
    trans_a, trans_b = a.value(4), a.value(9)
    if not all(isinstance(t, (bool, int)) for t in (trans_a, trans_b)):
        raise CannotModel("the transpose flags were not recorded")
    n, k = (w[0], w[1]) if trans_a else (w[1], w[0])
    m, k_b = (x[1], x[0]) if trans_b else (x[0], x[1])
    if k != k_b:
        raise CannotModel("te_gemm operands' inner sizes differ")
    codes = [a.value(i) for i in (3, 8, 12)]
    size_a, size_b, size_d = (
        _TE_ITEMSIZE.get(c) if isinstance(c, int) else None for c in codes)
    size_a = size_a or _itemsize(a, 0, d)
    size_b = size_b or _itemsize(a, 5, d)
    size_d = size_d or _itemsize(a, 10, d)
    nbytes = (numel(w) * size_a + numel(x) * size_b + m * n * size_d
              * (2 if a.value(20) is True or a.value(20) == 1 else 1))  # accumulate reads D
    bias = a.shape(14)
    has_bias = bias is not None and numel(bias) > 0
    grad = a.value(17) in (True, 1)
    if has_bias:
        nbytes += numel(bias) * _itemsize(a, 14, size_d)
    gelu = a.shape(16)
    if gelu is not None and numel(gelu) > 0:
        nbytes += numel(gelu) * _itemsize(a, 16, size_d)  # pre-GELU output (or input)
    # A forward bias is added per output element; in a backward the bias slot receives
    # the bias gradient, a reduction of B (one add per element of B).
    flops = 2.0 * m * n * k + ((numel(x) if grad else m * n) if has_bias else 0)
    math = [_TE_DTYPE.get(c) if isinstance(c, int) else None for c in codes[:2]]
    # TE keeps FP8 data in uint8 tensors: a uint8 operand is FP8, never int8.
    recorded = ["fp8" if t == "unsigned char" else _precision_of(t)
                for t in (a.types[i] if i < len(a.types) else "" for i in (0, 5))]
    precision = _wider(*(mt or rt for mt, rt in zip(math, recorded, strict=True)))
    return flops, float(nbytes), precision


GEMM_OPS: dict[str, Formula] = {
    "aten::_scaled_mm": _scaled_mm,
    "tex_ts::te_gemm_ts": _te_gemm,
}
