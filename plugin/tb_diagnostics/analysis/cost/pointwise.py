"""Cost formulas of the memory-side ops: elementwise, reductions, softmax, norms,
embeddings and copies.

These ops do a few FLOPs per element and are bound by memory on every GPU (their
intensity is far below any ridge point), so their bytes matter and their FLOPs are
counts per element: one for an elementwise op and a reduction, five for a softmax
(max, subtract, exp, sum, divide), eight for a normalisation forward (mean, variance,
normalise, scale, shift), as TraceLens and Nsight Compute's roofline count them.
Bytes are the tensor inputs read once and the outputs written once.
"""

from __future__ import annotations

from tb_diagnostics.analysis.cost.formula import CannotModel, Formula, need
from tb_diagnostics.analysis.cost.shapes import (
    ITEMSIZE,
    PRECISION,
    SCALAR_TYPE_ITEMSIZE,
    OpArgs,
    broadcast,
    numel,
)

_NO_SHAPE = "an input's shape was not recorded"


def _names(text: str) -> list[str]:
    return text.split()


_UNARY = _names("""abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sigmoid tanh
relu gelu silu mish hardswish hardsigmoid leaky_relu elu selu celu softplus softsign
erf erfc erfinv sin cos tan asin acos atan sinh cosh asinh acosh atanh square floor ceil
round trunc frac sign sgn isnan isinf isfinite nan_to_num logical_not bitwise_not
hardtanh relu6 threshold clamp clamp_min clamp_max logit digamma lgamma native_dropout
bernoulli _conj positive""")
_BINARY = _names("""add sub rsub mul div true_divide floor_divide remainder fmod pow maximum minimum
fmax fmin atan2 hypot copysign xlogy logical_and logical_or logical_xor bitwise_and
bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift eq ne lt le gt ge where
masked_fill lerp addcmul addcdiv threshold_backward gelu_backward silu_backward
sigmoid_backward tanh_backward hardtanh_backward leaky_relu_backward elu_backward
softplus_backward hardswish_backward mish_backward native_dropout_backward
_masked_scale""")
_BINARY_SET = frozenset(_BINARY)
_COMPARISON = frozenset(_names("eq ne lt le gt ge isnan isinf isfinite logical_not "
                               "logical_and logical_or logical_xor"))
_WRITE_ONLY = frozenset({"fill_", "zero_", "normal_", "uniform_", "random_"})


def _value_dtype(a: OpArgs, base: str) -> str | None:
    """The dtype of the values: ``where``'s first argument is its bool condition."""
    types = a.types[1:] if base == "where" else a.types
    return next((t for t in types if t in ITEMSIZE), None)


def _itemsize_out(a: OpArgs, d: int, base: str) -> int:
    if base in _COMPARISON:
        return 1
    t = _value_dtype(a, base)
    return ITEMSIZE[t] if t else d


def _precision(a: OpArgs) -> str | None:
    t = a.first_dtype()
    return PRECISION.get(t) if t else None


def _tensor_bytes(a: OpArgs, d: int) -> tuple[float, list[list[int]]]:
    """Bytes of every tensor input, and their shapes (a TensorList counts each member)."""
    total, shapes = 0.0, []
    for i in a.tensor_args():
        if not a.shapes(i):  # a tensor whose recorded shape is malformed
            raise CannotModel("its recorded shapes have an unexpected form")
        for s in a.shapes(i):
            total += numel(s) * (a.itemsize(i, d) or d)
            shapes.append(s)
    return total, shapes


#: Ops of three tensor inputs; the other binary ops take two, the unary ones one.
_TERNARY = frozenset({"where", "lerp", "addcmul", "addcdiv", "masked_fill", "clamp"})


def _arity(base: str) -> int:
    return 3 if base in _TERNARY else 2 if base in _BINARY_SET else 1


def _elementwise(base: str) -> Formula:
    arity = _arity(base)

    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        read, shapes = _tensor_bytes(a, d)
        if not shapes:
            raise CannotModel(_NO_SHAPE)
        if len(shapes) > arity and shapes[-1] == broadcast(*shapes[:-1]):
            # The ``.out`` overload (older traces record it): its last tensor is the result,
            # written, not read.
            read -= numel(shapes[-1]) * (a.itemsize(a.tensor_args()[-1], d) or d)
            shapes = shapes[:-1]
        out = numel(broadcast(*shapes))
        write = out * _itemsize_out(a, d, base)
        if base == "native_dropout":
            write += out  # the bool mask
        t = _value_dtype(a, base)
        return float(out), read + write, PRECISION.get(t) if t else None

    return formula


def _write_only(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    s = need(a.shape(0), _NO_SHAPE)
    return 0.0, float(numel(s) * (a.itemsize(0, d) or d)), _precision(a)


def _foreach(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """``_foreach_*``: an elementwise op over lists of tensors (optimisers)."""
    read, _ = _tensor_bytes(a, d)
    first = a.shapes(0)
    if not first:
        raise CannotModel(_NO_SHAPE)
    out = sum(numel(s) for s in first)
    return float(out), read + out * (a.itemsize(0, d) or d), _precision(a)


# ---- reductions ------------------------------------------------------------------
#: Reductions and the position of their ``dim`` argument.
_REDUCTIONS = {"sum": 1, "mean": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "argmax": 1,
               "argmin": 1, "prod": 1, "logsumexp": 1, "var": 1, "std": 1, "var_mean": 1,
               "std_mean": 1, "all": 1, "any": 1, "nansum": 1, "norm": 2,
               "linalg_vector_norm": 2, "cumsum": -1, "cumprod": -1}


def _reduction(base: str) -> Formula:
    dim_at = _REDUCTIONS[base]

    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        x = need(a.shape(0), _NO_SHAPE)
        n = numel(x)
        size = a.itemsize(0, d) or d
        if dim_at < 0:  # a scan writes as much as it reads
            return float(n), float(2 * n * size), _precision(a)
        dims = a.value(dim_at)
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if isinstance(dims, list) and dims and x and all(isinstance(v, int) for v in dims):
            kept = [s for j, s in enumerate(x) if j not in {v % len(x) for v in dims}]
            out = numel(kept)
        else:  # no dim: everything reduces to one value
            out = 1
        return float(n), float((n + out) * size), _precision(a)

    return formula


# ---- softmax and norms -----------------------------------------------------------
def _per_element(flops_per_element: float, tensors_read: int) -> Formula:
    """An op over its first input's elements that reads ``tensors_read`` tensors of that
    size (and the small parameter tensors there are) and writes one."""

    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        x = need(a.shape(0), _NO_SHAPE)
        n = numel(x)
        size = a.itemsize(0, d) or d
        params = 0.0
        for i in a.tensor_args()[tensors_read:]:
            for s in a.shapes(i):
                if numel(s) < n:  # weight, bias, running stats, mean/rstd
                    params += numel(s) * (a.itemsize(i, d) or d)
        return (flops_per_element * n, float(n * size * (tensors_read + 1)) + params,
                _precision(a))

    return formula


_NORMS: dict[str, Formula] = {}
for _name in ("native_layer_norm", "layer_norm", "native_batch_norm", "batch_norm",
              "cudnn_batch_norm", "miopen_batch_norm", "_batch_norm_impl_index",
              "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
              "native_group_norm", "group_norm", "instance_norm"):
    _NORMS[_name] = _per_element(8, 1)
for _name in ("rms_norm", "_fused_rms_norm"):
    _NORMS[_name] = _per_element(4, 1)
for _name in ("native_layer_norm_backward", "native_batch_norm_backward",
              "cudnn_batch_norm_backward", "miopen_batch_norm_backward",
              "native_group_norm_backward", "_fused_rms_norm_backward",
              "batch_norm_backward"):
    _NORMS[_name] = _per_element(12, 2)

_SOFTMAX: dict[str, Formula] = {
    "_softmax": _per_element(5, 1), "softmax": _per_element(5, 1),
    "_log_softmax": _per_element(5, 1), "log_softmax": _per_element(5, 1),
    "_safe_softmax": _per_element(5, 1),
    "_softmax_backward_data": _per_element(3, 2),
    "_log_softmax_backward_data": _per_element(3, 2),
}


# ---- embedding, copies, gathers ---------------------------------------------------
def _embedding(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    w, idx = need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE)
    if len(w) != 2:
        raise CannotModel("embedding weight is not a matrix")
    out = numel(idx) * w[1]
    size = a.itemsize(0, d) or d
    return 0.0, float(numel(idx) * (a.itemsize(1, 8) or 8) + 2 * out * size), _precision(a)


def _embedding_backward(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    gy, idx = need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE)
    rows = a.value(2)
    size = a.itemsize(0, d) or d
    table = rows * gy[-1] if isinstance(rows, int) and gy else 0
    return (float(numel(gy)),
            float(numel(gy) * size + numel(idx) * (a.itemsize(1, 8) or 8) + table * size),
            _precision(a))


def _copy(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """``copy_(self, src)``: reads src, writes self (each in its own dtype)."""
    dst, src = need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE)
    return (0.0, float(numel(src) * (a.itemsize(1, d) or d) + numel(dst) * (a.itemsize(0, d)
            or d)), PRECISION.get(a.dtype(1) or "") or _precision(a))


def _read_write(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """Ops that read their input once and write a copy of it (clone, _to_copy, contiguous)."""
    x = need(a.shape(0), _NO_SHAPE)
    return 0.0, float(2 * numel(x) * (a.itemsize(0, d) or d)), _precision(a)


def _to_copy(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """``_to_copy(self, *, dtype, …)``: reads self, writes the copy in ``dtype`` (a
    ScalarType code) when one was given."""
    x = need(a.shape(0), _NO_SHAPE)
    size = a.itemsize(0, d) or d
    code = a.value(1)
    out = SCALAR_TYPE_ITEMSIZE.get(code, size) if isinstance(code, int) else size
    return 0.0, float(numel(x) * (size + out)), _precision(a)


def _concat(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    read, shapes = _tensor_bytes(a, d)
    if not shapes:
        raise CannotModel(_NO_SHAPE)
    return 0.0, 2 * read, _precision(a)


def _index_select(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x, idx = need(a.shape(0), _NO_SHAPE), need(a.shape(2), _NO_SHAPE)
    dim = a.value(1)
    if not isinstance(dim, int) or not x:
        raise CannotModel("index_select's dim was not recorded")
    out = numel(x) // max(x[dim % len(x)], 1) * numel(idx)
    size = a.itemsize(0, d) or d
    return 0.0, float(2 * out * size + numel(idx) * 8), _precision(a)


def _gather(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    idx = need(a.shape(2), _NO_SHAPE)
    size = a.itemsize(0, d) or d
    return 0.0, float(numel(idx) * (2 * size + 8)), _precision(a)


def _scatter(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """scatter/scatter_add/index_add_/index_copy_(self, dim, index, src): src elements."""
    idx, src = a.shape(2), a.shape(3)
    src = need(src if src is not None else idx, _NO_SHAPE)
    size = a.itemsize(0, d) or d
    return float(numel(src)), float(numel(src) * 3 * size + numel(idx or []) * 8), \
        _precision(a)


def _index(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """``index(self, indices)`` (advanced indexing): the broadcast index shape times the
    dims that are not indexed."""
    x = need(a.shape(0), _NO_SHAPE)
    indices = a.shapes(1)
    if not indices:
        raise CannotModel(_NO_SHAPE)
    out = numel(broadcast(*indices)) * numel(x[len(indices):])
    size = a.itemsize(0, d) or d
    return 0.0, float(2 * out * size + sum(numel(s) for s in indices) * 8), _precision(a)


def _index_put(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    values = need(a.shape(2), _NO_SHAPE)
    size = a.itemsize(0, d) or d
    return 0.0, float(numel(values) * 2 * size), _precision(a)


def _families() -> dict[str, tuple[str, Formula]]:
    out: dict[str, tuple[str, Formula]] = {}
    for base in _UNARY + _BINARY:
        for name in (base, base + "_"):
            out["aten::" + name] = ("elementwise", _elementwise(base))
    for name in _WRITE_ONLY:
        out["aten::" + name] = ("elementwise", _write_only)
    for base in _REDUCTIONS:
        out["aten::" + base] = ("reduction", _reduction(base))
    for base, f in _SOFTMAX.items():
        out["aten::" + base] = ("softmax", f)
    for base, f in _NORMS.items():
        out["aten::" + base] = ("norm", f)
    out["aten::embedding"] = ("embedding", _embedding)
    out["aten::embedding_dense_backward"] = ("embedding", _embedding_backward)
    memory = {"copy_": _copy, "_to_copy": _to_copy, "to": _read_write,
              "clone": _read_write, "contiguous": _read_write, "cat": _concat,
              "stack": _concat, "index_select": _index_select, "gather": _gather,
              "scatter": _scatter, "scatter_": _scatter, "scatter_add": _scatter,
              "scatter_add_": _scatter, "index_add_": _scatter, "index_copy_": _scatter,
              "index": _index, "_unsafe_index": _index, "index_put_": _index_put,
              "_index_put_impl_": _index_put}
    for base, f in memory.items():
        out["aten::" + base] = ("memory", f)
    return out


#: The memory-side formulas by op name, with their family.
POINTWISE: dict[str, tuple[str, Formula]] = _families()


def foreach_formula(name: str) -> tuple[str, Formula] | None:
    """``aten::_foreach_<op>``: the elementwise formula over tensor lists."""
    return ("elementwise", _foreach) if name.startswith("aten::_foreach_") else None
