"""Cost formulas of the products: matmul family, convolutions, attention.

FLOPs follow ``torch.utils.flop_counter`` (2 per multiply-add), plus one FLOP per
output element for the bias add of ``addmm``/``baddbmm``/``linear`` and of a
convolution with a bias (the counter leaves it out). Bytes are every operand read
once and the output written once: the traffic of an ideal kernel, which is what a
roofline compares a kernel against.
"""

from __future__ import annotations

import math

from tb_diagnostics.analysis.cost.formula import CannotModel, Formula, need
from tb_diagnostics.analysis.cost.shapes import PRECISION, OpArgs, broadcast, numel

_NO_SHAPE = "an operand's shape was not recorded"


def _precision(a: OpArgs, i: int) -> str | None:
    t = a.dtype(i)
    return PRECISION.get(t) if t else None


def _size(a: OpArgs, i: int, default: int) -> int:
    return a.itemsize(i, default) or default


def _bias_bytes(a: OpArgs, i: int, default: int) -> float:
    s = a.shape(i)
    return float(numel(s) * _size(a, i, default)) if s is not None else 0.0


def _mm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x, y = need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE)
    if len(x) != 2 or len(y) != 2:
        raise CannotModel("mm operands are not matrices")
    (m, k), n = x, y[1]
    s = _size(a, 0, d)
    return 2.0 * m * n * k, float((m * k + k * n + m * n) * s), _precision(a, 0)


def _addmm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x, y = need(a.shape(1), _NO_SHAPE), need(a.shape(2), _NO_SHAPE)
    if len(x) != 2 or len(y) != 2:
        raise CannotModel("addmm operands are not matrices")
    (m, k), n = x, y[1]
    s = _size(a, 1, d)
    return (2.0 * m * n * k + m * n,
            float((m * k + k * n + m * n) * s) + _bias_bytes(a, 0, s), _precision(a, 1))


def _bmm_dims(x: list[int], y: list[int]) -> tuple[int, int, int, int]:
    if len(x) != 3 or len(y) != 3:
        raise CannotModel("bmm operands are not batches of matrices")
    return x[0], x[1], x[2], y[2]


def _bmm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    b, m, k, n = _bmm_dims(need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE))
    s = _size(a, 0, d)
    return 2.0 * b * m * n * k, float(b * (m * k + k * n + m * n) * s), _precision(a, 0)


def _baddbmm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    b, m, k, n = _bmm_dims(need(a.shape(1), _NO_SHAPE), need(a.shape(2), _NO_SHAPE))
    s = _size(a, 1, d)
    return (2.0 * b * m * n * k + b * m * n,
            float(b * (m * k + k * n + m * n) * s) + _bias_bytes(a, 0, s), _precision(a, 1))


def _addbmm(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    b, m, k, n = _bmm_dims(need(a.shape(1), _NO_SHAPE), need(a.shape(2), _NO_SHAPE))
    s = _size(a, 1, d)
    return (2.0 * b * m * n * k + m * n,
            float((b * (m * k + k * n) + m * n) * s) + _bias_bytes(a, 0, s), _precision(a, 1))


def _matmul(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x, y = need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE)
    if not x or not y:
        raise CannotModel("matmul of a 0-d tensor")
    xm = [1, *x] if len(x) == 1 else x
    ym = [*y, 1] if len(y) == 1 else y
    m, k, n = xm[-2], xm[-1], ym[-1]
    batch = math.prod(broadcast(xm[:-2], ym[:-2]))
    s = _size(a, 0, d)
    return (2.0 * batch * m * n * k, float((numel(x) + numel(y) + batch * m * n) * s),
            _precision(a, 0))


def _linear(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x, w = need(a.shape(0), _NO_SHAPE), need(a.shape(1), _NO_SHAPE)
    if not x or len(w) not in (1, 2):
        raise CannotModel("linear operands have unexpected ranks")
    k = x[-1]
    n = w[0] if len(w) == 2 else 1
    m = numel(x) // max(k, 1)
    bias = a.shape(2)
    s = _size(a, 0, d)
    flops = 2.0 * m * n * k + (m * n if bias is not None else 0)
    return flops, float((numel(x) + numel(w) + m * n) * s) + _bias_bytes(a, 2, s), \
        _precision(a, 0)


def _mv(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    x = need(a.shape(0), _NO_SHAPE)
    if len(x) != 2:
        raise CannotModel("mv operand is not a matrix")
    m, n = x
    s = _size(a, 0, d)
    return 2.0 * m * n, float((m * n + n + m) * s), _precision(a, 0)


MATMUL: dict[str, Formula] = {
    "aten::mm": _mm, "aten::addmm": _addmm, "aten::bmm": _bmm, "aten::baddbmm": _baddbmm,
    "aten::addbmm": _addbmm, "aten::matmul": _matmul, "aten::linear": _linear,
    "aten::mv": _mv,  # aten::_scaled_mm: custom_gemm (block scales, FP4)
}


# ---- convolutions -----------------------------------------------------------
#: Argument positions: (input, weight, bias or None, stride, padding, dilation,
#: transposed (index or a fixed bool), output_padding (index or None), groups).
_CONV_ARGS: dict[str, tuple[int, int, int | None, int, int, int, int | bool, int | None, int]] = {
    "aten::conv1d": (0, 1, 2, 3, 4, 5, False, None, 6),
    "aten::conv2d": (0, 1, 2, 3, 4, 5, False, None, 6),
    "aten::conv3d": (0, 1, 2, 3, 4, 5, False, None, 6),
    "aten::convolution": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "aten::_convolution": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "aten::cudnn_convolution": (0, 1, None, 3, 2, 4, False, None, 5),
    "aten::miopen_convolution": (0, 1, 2, 4, 3, 5, False, None, 6),
    "aten::mkldnn_convolution": (0, 1, 2, 4, 3, 5, False, None, 6),
    "aten::cudnn_convolution_transpose": (0, 1, None, 4, 2, 5, True, 3, 6),
    "aten::conv_transpose1d": (0, 1, 2, 3, 4, 7, True, 5, 6),
    "aten::conv_transpose2d": (0, 1, 2, 3, 4, 7, True, 5, 6),
    "aten::conv_transpose3d": (0, 1, 2, 3, 4, 7, True, 5, 6),
}

_NO_CONCRETE = ("stride and padding were not recorded (no Concrete Inputs: PyTorch < 2.1): "
                "the output size is unknown")


def conv_products(x: list[int], w: list[int], out: list[int], transposed: bool) -> float:
    """``torch.utils.flop_counter.conv_flop_count``: 2 FLOPs per multiply-add."""
    conv_shape = (x if transposed else out)[2:]
    c_out, c_in, *kernel = w
    return 2.0 * math.prod(conv_shape) * math.prod(kernel) * x[0] * c_out * c_in


def _conv_out(a: OpArgs, spec: tuple, x: list[int], w: list[int]) -> tuple[list[int], bool]:
    _, _, _, i_stride, i_pad, i_dil, i_tr, i_opad, i_groups = spec
    n = len(x) - 2
    transposed = i_tr if isinstance(i_tr, bool) else bool(a.value(i_tr))
    groups = a.value(i_groups)
    groups = groups if isinstance(groups, int) and groups > 0 else 1
    kernel = w[2:]
    stride = need(a.int_list(i_stride, n, 1), _NO_CONCRETE)
    dilation = a.int_list(i_dil, n, 1) or [1] * n
    pad_value = a.value(i_pad)
    if pad_value == "same":
        spatial = list(x[2:])
    else:
        pad = [0] * n if pad_value == "valid" else need(a.int_list(i_pad, n, 0), _NO_CONCRETE)
        if transposed:
            opad = (a.int_list(i_opad, n, 0) if i_opad is not None else None) or [0] * n
            spatial = [(x[2 + j] - 1) * stride[j] - 2 * pad[j] + dilation[j] * (kernel[j] - 1)
                       + opad[j] + 1 for j in range(n)]
        else:
            spatial = [(x[2 + j] + 2 * pad[j] - dilation[j] * (kernel[j] - 1) - 1)
                       // stride[j] + 1 for j in range(n)]
    c_out = w[1] * groups if transposed else w[0]
    return [x[0], c_out, *spatial], transposed


def _conv(name: str) -> Formula:
    spec = _CONV_ARGS[name]

    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        x, w = need(a.shape(spec[0]), _NO_SHAPE), need(a.shape(spec[1]), _NO_SHAPE)
        if len(x) < 3 or len(w) != len(x):
            raise CannotModel("convolution operands have unexpected ranks")
        out, transposed = _conv_out(a, spec, x, w)
        if min(out) <= 0:
            raise CannotModel("convolution output would be empty")
        has_bias = spec[2] is not None and a.shape(spec[2]) is not None
        flops = conv_products(x, w, out, transposed) + (numel(out) if has_bias else 0)
        s = _size(a, spec[0], d)
        nbytes = float((numel(x) + numel(w) + numel(out)) * s)
        if has_bias:
            nbytes += _bias_bytes(a, spec[2], s)
        return flops, nbytes, _precision(a, spec[0])

    return formula


def _t(shape: list[int]) -> list[int]:
    return [shape[1], shape[0], *shape[2:]]


def _conv_backward(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """``aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask)``: the gradients' two
    products, as ``torch.utils.flop_counter.conv_backward_flop`` counts them."""
    gy, x, w = (need(a.shape(i), _NO_SHAPE) for i in range(3))
    if len(x) < 3 or len(w) != len(x) or len(gy) != len(x):
        raise CannotModel("convolution_backward operands have unexpected ranks")
    transposed = bool(a.value(7))
    mask = a.value(10)
    if not (isinstance(mask, list) and len(mask) == 3):
        mask = [True, True, True]
    flops = 0.0
    s = _size(a, 0, d)
    nbytes = float((numel(gy) + numel(x) + numel(w)) * s)
    if mask[0]:
        flops += conv_products(gy, w, x, not transposed)
        nbytes += numel(x) * s
    if mask[1]:
        if transposed:
            flops += conv_products(_t(gy), _t(x), _t(w), False)
        else:
            flops += conv_products(_t(x), _t(gy), _t(w), False)
        nbytes += numel(w) * s
    return flops, nbytes, _precision(a, 0)


def _cudnn_backward(a: OpArgs, d: int) -> tuple[float, float, str | None]:
    """PyTorch < 1.11's ``aten::cudnn_convolution_backward(self, grad_output, weight, padding,
    stride, dilation, groups, benchmark, deterministic, allow_tf32, output_mask)``."""
    moved = OpArgs(dims=[a.dims[1], a.dims[0], *a.dims[2:3], [], [], [], [], [], [], [],
                         a.dims[10] if len(a.dims) > 10 else []],
                   types=[a.types[1] if len(a.types) > 1 else "", *a.types[0:1],
                          *a.types[2:3]],
                   concrete=["", "", "", "", "", "", "", "", "", "",
                             a.concrete[10] if len(a.concrete) > 10 else ""])
    return _conv_backward(moved, d)


CONV: dict[str, Formula] = {name: _conv(name) for name in _CONV_ARGS}
CONV["aten::convolution_backward"] = _conv_backward
CONV["aten::cudnn_convolution_backward"] = _cudnn_backward


# ---- attention ----------------------------------------------------------------
#: name → (index of query, index of is_causal (or of a mask type), layout, backward).
#: Layout "bhsd" is SDPA's (batch, heads, sequence, head dim); the kernels' own entry
#: points take "bshd". Backward entry points have grad_out at 0, so query is at 1.
_ATTENTION: dict[str, tuple[int, int, str, bool]] = {
    "aten::scaled_dot_product_attention": (0, 5, "bhsd", False),
    "aten::_scaled_dot_product_flash_attention": (0, 4, "bhsd", False),
    "aten::_scaled_dot_product_efficient_attention": (0, 6, "bhsd", False),
    "aten::_scaled_dot_product_cudnn_attention": (0, 6, "bhsd", False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (0, 4, "bhsd", False),
    "aten::_scaled_dot_product_fused_attention_overrideable": (0, 5, "bhsd", False),
    "aten::_flash_attention_forward": (0, 8, "bshd", False),
    "aten::_efficient_attention_forward": (0, 9, "bshd", False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 11, "bhsd", True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 11, "bhsd", True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 14, "bhsd", True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": (1, 7, "bhsd", True),
    "aten::_flash_attention_backward": (1, 11, "bshd", True),
    "aten::_efficient_attention_backward": (1, 14, "bshd", True),
}
#: FlashAttention's convention (and torch.utils.flop_counter's): the backward does the
#: forward's two products again plus three more, 2.5× the forward (exactly so when the
#: query/key and value head dims are equal: the products are 3 over D_qk and 2 over D_v).
BACKWARD_FACTOR = 2.5


def attention_products(q: list[int], k: list[int], v: list[int], causal: bool,
                       backward: bool = False) -> float:
    """4·B·H·S_q·S_kv·D (bhsd shapes), halved for causal masking: the masked half of
    the score matrix is skipped by the fused kernels. The backward is
    2·B·H·S_q·S_kv·(3·D_qk + 2·D_v), ``torch.utils.flop_counter``'s five products."""
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    n_qk, n_v = (3, 2) if backward else (1, 1)
    flops = 2.0 * b * h * s_q * s_k * (n_qk * d_q + n_v * d_v)
    return flops / 2 if causal else flops


def _attention(name: str) -> Formula:
    qi, ci, layout, backward = _ATTENTION[name]

    def formula(a: OpArgs, d: int) -> tuple[float, float, str | None]:
        q, k, v = (need(a.shape(qi + j), _NO_SHAPE) for j in range(3))
        if not (len(q) == len(k) == len(v) == 4):
            raise CannotModel("attention operands are not 4-d (batch, heads, sequence, dim)")
        if layout == "bshd":
            q, k, v = ([t[0], t[2], t[1], t[3]] for t in (q, k, v))
        flag = a.value(ci)
        causal = bool(flag) if isinstance(flag, (bool, int)) else False
        flops = attention_products(q, k, v, causal, backward)
        s = _size(a, qi, d)
        out = q[0] * q[1] * q[2] * v[3]
        if backward:  # reads grad_out, q, k, v, out; writes dq, dk, dv
            nbytes = (2 * out + 2 * (numel(q) + numel(k) + numel(v))) * s
        else:
            nbytes = (numel(q) + numel(k) + numel(v) + out) * s
        return flops, float(nbytes), _precision(a, qi)

    return formula


ATTENTION: dict[str, Formula] = {name: _attention(name) for name in _ATTENTION}
