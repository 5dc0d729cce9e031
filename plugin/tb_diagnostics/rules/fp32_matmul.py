"""fp32 matmul: single-precision GEMMs/convolutions on a GPU with Tensor Cores.

What it detects
    On a CUDA device with Tensor Cores (compute capability ≥ ``min_compute_major``
    from ``deviceProperties``; TF32 needs 8.0), GEMMs and convolutions that run in
    plain fp32 on the CUDA cores, taking at least ``min_share`` of the device time,
    while half-precision products (fp16/bf16/fp8/int8) take less than
    ``max_low_precision_share`` of the product time. The precision comes from the op's
    input types (``record_shapes``): fp32 inputs whose kernel is a TF32 tensor-op
    kernel (``tf32``, ``tensorop_s1688``…) use the Tensor Cores already and are not
    counted; any other kernel of an fp32 product is fp32 on the CUDA cores, including
    cuBLASLt's ``xmma`` kernels, whose names carry no ``sgemm``. Without recorded
    types the kernel name decides (cuBLAS ``sgemm``, cuDNN ``scudnn`` and ``<float, …>``
    engines, CUTLASS ``simt``).

Why it matters
    fp32 on CUDA cores leaves the Tensor Cores idle: an A100 does 19.5 TFLOPS
    in fp32 against 156 in TF32 and 312 in bf16. torch-tb-profiler recommends
    AMP when Tensor-Core-eligible ops run without Tensor Cores; xprof when
    16-bit is under 10 % of the compute.

How to fix
    Mixed precision: ``with torch.autocast(device_type="cuda",
    dtype=torch.bfloat16):`` around the forward pass (fp16 plus
    ``torch.amp.GradScaler`` on V100, which has no bf16). On compute capability
    ≥ 8.0, at least allow TF32: ``torch.backends.cuda.matmul.allow_tf32 = True``
    and ``torch.backends.cudnn.allow_tf32 = True`` (or
    ``torch.set_float32_matmul_precision("high")``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import distinct
from tb_diagnostics.analysis.views.hierarchy import launching_op
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    fmt_pct,
    fmt_us,
    replayed_saving,
    short_name,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind

#: Kernels that do a GEMM or convolution's arithmetic (not layout or norm kernels).
MATMUL_KERNEL = re.compile(r"gemm|conv|dgrad|wgrad|fprop|scudnn|winograd|xmma", re.I)
NOT_MATMUL = re.compile(r"bn_|batch_?norm|nchwToNhwc|nhwcToNchw|elementwise|reduce", re.I)
LOW_PRECISION = re.compile(r"bf16|f16|fp16|half|h884|h1688|h16816|hmma|hgemm|i8816|int8"
                           r"|e4m3|e5m2", re.I)
TF32 = re.compile(r"tf32|tensorop_s\d{3,5}", re.I)
FP32 = re.compile(r"sgemm|cgemm|scudnn|simt|<float|implicit_convolve_sgemm|fft2d", re.I)


@dataclass(frozen=True)
class Thresholds:
    #: Devices from this compute capability have Tensor Cores (torch-tb-profiler: 7).
    min_compute_major: int = 7
    #: fp32 GEMM/conv kernels at least this share of all device time...
    min_share: float = 0.10
    #: ...while half-precision kernels are under this share of the GEMM time (xprof: 10 %).
    max_low_precision_share: float = 0.10


def compute_capability(analysis: SpanAnalysis) -> tuple[int, int] | None:
    """(major, minor) of the device the activities ran on, from ``deviceProperties``."""
    chosen = analysis.model.used_device_properties
    if not chosen or not isinstance(chosen.get("computeMajor"), int):
        return None
    return int(chosen["computeMajor"]), int(chosen.get("computeMinor") or 0)


def classify(name: str) -> str | None:
    """``low``, ``tf32``, ``fp32`` for a GEMM/conv kernel name; None for anything else."""
    if not MATMUL_KERNEL.search(name) or NOT_MATMUL.search(name):
        return None
    if LOW_PRECISION.search(name):
        return "low"
    if TF32.search(name):
        return "tf32"
    if FP32.search(name):
        return "fp32"
    return None


#: A product's precision (from its input types, refined by its kernels) → its class.
_PRECISION_CLASS = {"fp32": "fp32", "tf32": "tf32", "bf16": "low", "fp16": "low",
                    "fp8": "low", "int8": "low", "fp64": ""}


def kernel_classes(analysis: SpanAnalysis, kernels: np.ndarray) -> np.ndarray:
    """``low``/``tf32``/``fp32``/"" for each kernel row: from the precision of the product
    op that launched it when its types were recorded, else from the kernel's name."""
    m = analysis.model
    # np.unique's ids and inverse, by a presence table of the name ids (not a sort)
    ids, inv = distinct(m.name[kernels].astype(np.int64))
    names = [m.strings[i] for i in ids.tolist()]
    cls = np.asarray([classify(n) or "" for n in names], dtype="<U4")[inv]
    # Layout and norm kernels a product launches on the side are not its math.
    side = np.asarray([bool(NOT_MATMUL.search(n)) for n in names] or [False])[inv]
    rf = roofline(analysis)
    by_group = np.asarray([_PRECISION_CLASS.get(f.precision or "", "?")
                           if f.modelled and f.group.cost.tensor_op else "?"
                           for f in rf.figures] or ["?"], dtype="<U4")
    pos = np.searchsorted(m.device_activity_rows, kernels)
    group = rf.activity_group[pos]
    known = np.where((group >= 0) & ~side, by_group[np.maximum(group, 0)], "?")
    return np.where(known != "?", known, cls)


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    if analysis.cpu_only or m.device_kind != "cuda":
        return []
    cc = compute_capability(analysis)
    if cc is None or cc[0] < th.min_compute_major:
        return []
    warm = warm_steps(analysis)
    kernels = warm.device_rows(analysis, m.rows_of({Kind.KERNEL}))
    cls = kernel_classes(analysis, kernels)
    dur = m.dur[kernels]
    total = float(m.dur[m.device_activity_rows[warm.activities(analysis)]].sum())
    gemm = float(dur[cls != ""].sum())
    fp32 = float(dur[cls == "fp32"].sum())
    low = float(dur[cls == "low"].sum())
    if total <= 0 or gemm <= 0 or fp32 / total < th.min_share or \
            low / gemm >= th.max_low_precision_share:
        return []
    rows = kernels[cls == "fp32"]
    names, k_inv = np.unique(m.name[rows], return_inverse=True)
    per = np.bincount(k_inv, weights=m.dur[rows])
    top = [m.strings[int(names[i])] for i in np.argsort(-per)[:2]]
    op_of = launching_op(analysis)
    pos = np.searchsorted(m.device_activity_rows, rows)
    ops = op_of[pos]
    op_names = sorted({m.name_of(int(o)) for o in ops[ops >= 0][:200].tolist()})[:4]
    steps_n = warm.n
    advice = ("enable TF32 or bf16 autocast" if cc[0] >= 8 else
              "use fp16 autocast (TF32 needs compute capability 8.0)")
    ev = []
    for r in rows[np.argsort(-m.dur[rows], kind="stable")][:5].tolist():
        ev.append(evidence(analysis, r, "fp32 GEMM/conv kernel on CUDA cores"))
        o = int(op_of[np.searchsorted(m.device_activity_rows, r)])
        if o >= 0 and len(ev) < MAX_EVIDENCE:
            ev.append(evidence(analysis, o, "the op that launched it"))
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"fp32 GEMM/convolution kernels take {fmt_pct(fp32 / total)} of the device "
                 f"time ({fmt_us(fp32 / steps_n)} {warm.per}) on a compute capability "
                 f"{cc[0]}.{cc[1]} GPU with Tensor Cores, while half-precision kernels are "
                 f"{fmt_pct(low / gemm)} of the GEMM time; e.g. "
                 f"{'; '.join(short_name(t, 60) for t in top)}"
                 f"{' from ' + ', '.join(op_names) if op_names else ''}: {advice}."),
        steps=warm.steps(analysis), evidence=ev[:MAX_EVIDENCE],
        # Replayed with the GEMMs at the low-precision peak (None without device peaks).
        savings_us=replayed_saving(analysis, "amp"),
        confirm=("with autocast/TF32 on, the same ops launch kernels named with "
                 "bf16/f16/h884/hmma/tf32/s1688 and their device time drops"))]


RULE = Rule(id="fp32-matmul", title="fp32 matmuls on a Tensor Core GPU", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__)
