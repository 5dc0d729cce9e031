"""The precision of an op group's math and the peak that is its ceiling (the roofline's).

A product's precision comes from its input types (bf16/fp16/fp8/fp4/int8 at once); the
names of the kernels it launched refine it (fp32 inputs on a TF32 tensor-op kernel run as
TF32) or supply it when no types were recorded (:data:`KERNEL_PRECISION`).
:func:`peak_precision` maps that precision to the peak-table key the group is rated
against: vector-unit work at fp32 (fp64), FP4/FP6 without such math at bf16, a precision
the part has no peak for at fp32. :mod:`.roofline` and :mod:`.kernels` read these.
"""

from __future__ import annotations

import re

import numpy as np

from tb_diagnostics.analysis.cost.peaks import PEAK_KEYS, DevicePeaks
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.op_costs import OpGroup
from tb_diagnostics.trace.categories import Kind

#: fp32 GEMM/conv kernels that run on Tensor Cores in TF32 (cuBLAS, cuBLASLt, CUTLASS).
TF32_KERNEL = re.compile(r"tf32|tensorop_s\d|s1688|s16816|s1684", re.I)
#: Without recorded types, the precision a kernel's name gives away.
KERNEL_PRECISION = [
    ("fp8", re.compile(r"e4m3|e5m2|fp8|f8f8", re.I)),
    ("bf16", re.compile(r"bf16|bfloat16", re.I)),
    ("int8", re.compile(r"i8816|imma|int8|s8s8", re.I)),
    ("fp16", re.compile(r"f16|fp16|half|h884|h1688|h16816|hmma|hgemm", re.I)),
    ("tf32", TF32_KERNEL),
    ("fp64", re.compile(r"dgemm|f64|double", re.I)),
    ("fp32", re.compile(r"sgemm|scudnn|simt|<float|f32f32_f32f32|gemm_f32|fp32", re.I)),
]
PRODUCT_PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")


def kernel_precision(names: list[str]) -> str | None:
    """The first precision of :data:`KERNEL_PRECISION` that one of the kernel names gives away."""
    for precision, pattern in KERNEL_PRECISION:
        if any(pattern.search(n) for n in names):
            return precision
    return None


def group_precisions(analysis: SpanAnalysis, groups: list[OpGroup],
                     activity_group: np.ndarray) -> list[str | None]:
    """Each group's precision: from its input types, refined (fp32 → tf32) or supplied
    (no types recorded) by the names of the kernels it launched."""
    m = analysis.model
    out: list[str | None] = [g.cost.precision if g.cost else None for g in groups]
    if analysis.cpu_only:
        return out
    acts = m.device_activity_rows
    kernels = (m.kind[acts] == Kind.KERNEL) & (activity_group >= 0)
    if not kernels.any():
        return out
    # The distinct (group, name) pairs in (group, name) order, as one int64 key each: a
    # unique over columns (axis=1) sorts them as records, 1.3 s on 10⁶ kernels.
    width = max(len(m.strings), 1)
    key = unique(activity_group[kernels].astype(np.int64) * width
                 + m.name[acts][kernels].astype(np.int64))
    names_of: dict[int, list[str]] = {}
    for g, sid in zip((key // width).tolist(), (key % width).tolist(), strict=True):
        names_of.setdefault(g, []).append(m.strings[sid])
    for g, names in names_of.items():
        cost = groups[g].cost
        if cost is None or not cost.tensor_op:
            continue
        if cost.precision == "fp32" and any(TF32_KERNEL.search(n) for n in names):
            out[g] = "tf32"
        elif cost.precision is None:
            out[g] = kernel_precision(names)
    return out


def peak_precision(precision: str | None, tensor_op: bool, peaks: DevicePeaks | None,
                   ) -> str | None:
    """The peak-table key that is a group's compute ceiling."""
    if not tensor_op:  # vector units: the dtype of a copy or a gather does not matter
        return "fp64" if precision == "fp64" else "fp32"
    if precision is None:
        return None
    key = precision if precision in PRODUCT_PRECISIONS else "fp32"
    if key in ("fp4", "fp6") and (key not in PEAK_KEYS or (
            peaks is not None and peaks.peak(key) is None)):
        # No FP4/FP6 math on this part (or in the table): the kernels dequantise to 16 bits.
        key = "bf16"
    if peaks is not None and peaks.peak(key) is None and key != "fp32":
        key = "fp32"  # e.g. bf16 on a V100: emulated on the CUDA cores
    return key
