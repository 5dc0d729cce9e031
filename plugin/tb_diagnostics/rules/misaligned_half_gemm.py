"""Misaligned half GEMM: fp16/bf16 matmuls whose last two dimensions are not multiples of 8.

What it detects
    ``aten::mm``, ``aten::addmm``, ``aten::bmm`` and ``aten::baddbmm`` calls
    with an fp16 or bf16 input whose last two dimensions are not all multiples
    of ``multiple`` (from ``Input Dims`` / ``Input type``, recorded with
    ``record_shapes=True``), grouped by shape, with the device time of the
    kernels they launched. Same test as torch's own profiler pattern
    ``MatMulDimInFP16Pattern`` ("every last-2 dim a multiple of 8").

Why it matters
    Tensor Core GEMM kernels read their operands in 16-byte vectors: eight
    fp16/bf16 values. A dimension that is not a multiple of 8 forces a
    slower, narrower-aligned kernel (``align1``/``align2`` in CUTLASS names)
    or padding, so the GEMM runs well below peak.

How to fix
    Pad the dimensions to a multiple of 8 (16 or 64 is better still): vocabulary
    and hidden sizes (``vocab_size = ((vocab_size + 63) // 64) * 64``),
    sequence lengths (``tokenizer(..., pad_to_multiple_of=8)``), batch sizes;
    or ``torch.nn.functional.pad`` the operands once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import launching_op
from tb_diagnostics.rules._util import MAX_EVIDENCE, fmt_count, fmt_us, warm_steps
from tb_diagnostics.rules.base import Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind

GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"})
HALF_TYPES = frozenset({"c10::Half", "c10::BFloat16", "Half", "BFloat16"})


@dataclass(frozen=True)
class Thresholds:
    #: Every last-two dimension of a half-precision operand must divide by this.
    multiple: int = 8
    #: Report at most this many shapes.
    max_shapes: int = 3


def _misaligned(dims_text: str | None, types_text: str | None, multiple: int) -> bool:
    if not dims_text or not types_text:
        return False
    try:
        dims, types = json.loads(dims_text), json.loads(types_text)
    except ValueError:
        return False
    if not isinstance(dims, list) or not isinstance(types, list):
        return False
    for shape, dtype in zip(dims, types, strict=False):
        if (dtype in HALF_TYPES and isinstance(shape, list) and shape
                and any(isinstance(d, int) and d % multiple for d in shape[-2:])):
            return True
    return False


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    rows = m.rows_named(GEMM_OPS)
    warm = warm_steps(analysis)
    rows = warm.host_rows(analysis, rows[(m.kind[rows] == Kind.CPU_OP) & (m.input_dims[rows] >= 0)])
    if not rows.size:
        return []
    verdicts: dict[tuple[int, int], bool] = {}
    bad = []
    for r in rows.tolist():
        key = (int(m.input_dims[r]), int(m.input_types[r]))
        if key not in verdicts:
            verdicts[key] = _misaligned(m.string(key[0]), m.string(key[1]), th.multiple)
        if verdicts[key]:
            bad.append(r)
    if not bad:
        return []
    bad_rows = np.asarray(bad)
    acts = m.device_activity_rows
    op_of = launching_op(analysis)
    device_us = np.zeros(bad_rows.size)
    hit = np.isin(op_of, bad_rows)
    if hit.any():
        pos = np.searchsorted(bad_rows, op_of[hit])
        np.add.at(device_us, pos, m.dur[acts[hit]])
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(bad_rows.tolist()):
        groups[(m.name_of(r), m.string(int(m.input_dims[r])) or "?")].append(i)
    steps_n = warm.n
    ranked = sorted(groups.items(), key=lambda kv: -float(device_us[kv[1]].sum()))
    texts, ev = [], []
    for (op, dims), idx in ranked[: th.max_shapes]:
        texts.append(f"{op} {dims} ×{fmt_count(len(idx) / steps_n)} per step "
                     f"({fmt_us(device_us[idx].sum() / steps_n)} on the device)")
        ev.append(evidence(analysis, int(bad_rows[idx[0]]), f"half-precision {op} {dims}"))
        k = acts[op_of == bad_rows[idx[0]]]
        if k.size:
            ev.append(evidence(analysis, int(k[0]), "the kernel it launched"))
    total_dev = float(device_us.sum()) / steps_n
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{fmt_count(bad_rows.size / steps_n)} fp16/bf16 GEMM call(s) per step have "
                 f"a last-two dimension that is not a multiple of {th.multiple} "
                 f"({fmt_us(total_dev)} of device time per step): " + "; ".join(texts) + "."),
        steps=warm.steps(analysis), evidence=ev[:MAX_EVIDENCE],
        savings_us=None,
        confirm=(f"pad the dimension to a multiple of {th.multiple} and compare the kernel: "
                 "its name changes (e.g. align1 → align8) and its time drops"))]


RULE = Rule(id="misaligned-half-gemm", title="fp16/bf16 GEMM with unaligned dimensions",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving=("how much faster an aligned GEMM runs depends on the kernel the library "
                       "then picks"))
