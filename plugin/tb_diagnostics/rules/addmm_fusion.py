"""addmm fusion: ``aten::addmm`` where eager code would run ``aten::mm`` + ``aten::add``.

What it detects
    ``aten::addmm`` calls, split by where they come from: ``nn.Linear``
    (``aten::linear → aten::addmm``), compiled code (under a
    ``Torch-Compiled Region`` / ``CompiledFunction``, where Inductor rewrote
    ``mm`` + ``add``) or called directly; with what ran on the device for them —
    the GEMM kernel(s) and any copy launched before it (the bias seeding
    ``Memcpy DtoD`` or copy kernel). One summary per span.

Why it matters
    ``addmm`` is fusion at the dispatcher level, not a new kernel: the device
    still runs the same cuBLAS GEMM, with the bias added in the GEMM epilogue
    (``out = β·C + α·A·B``), which needs ``C`` copied into the output first. So
    compiled ``addmm`` is not free: it is one GEMM plus one copy, and its host
    time per call is what shrank, not the device time (the Hugging Face
    guide's ``torch.compile`` example).

How to fix
    Nothing to fix; information. If the bias copy is large (a full-size ``C``),
    see ``hidden-memcpy``. To really fuse the bias add, let it ride on a
    following elementwise op (``torch.compile`` with more of the model in the
    graph) or use a 1-D bias so cuBLASLt's bias epilogue applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.compiled import compiled_view
from tb_diagnostics.analysis.views.hierarchy import ancestors, innermost_op, launching_op
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    fmt_bytes,
    fmt_count,
    fmt_us,
    short_name,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind

_COPY_KERNEL = re.compile(r"copy", re.IGNORECASE)


@dataclass(frozen=True)
class Thresholds:
    #: Report when there are at least this many addmm calls in the span.
    min_calls: int = 1


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    rows = m.rows_named({"aten::addmm"})
    warm = warm_steps(analysis)
    rows = warm.host_rows(analysis, rows[m.kind[rows] == Kind.CPU_OP])
    if rows.size < th.min_calls:
        return []
    cv = compiled_view(analysis)
    compiled = set(np.concatenate([cv.regions, cv.functions, cv.fx_graphs]).tolist())
    origin = {"nn.Linear (aten::linear)": 0, "compiled code": 0, "direct calls": 0}
    for r in rows.tolist():
        up = ancestors(analysis, r)
        if any(a in compiled for a in up):
            origin["compiled code"] += 1
        elif up and m.name_of(up[0]) == "aten::linear":
            origin["nn.Linear (aten::linear)"] += 1
        else:
            origin["direct calls"] += 1
    steps_n = warm.n
    parts = [f"{fmt_count(v / steps_n)} {warm.per} from {k}" for k, v in origin.items() if v]
    text = f"aten::addmm: {', '.join(parts)}."
    ev = [evidence(analysis, int(rows[0]), "an addmm call")]
    if not analysis.cpu_only:
        acts = m.device_activity_rows
        op_of = launching_op(analysis)
        inside = _under(analysis, op_of, rows)
        gemm = acts[inside & (m.kind[acts] == Kind.KERNEL) & ~_is_copy_kernel(analysis, acts)]
        copies = acts[inside & ((m.kind[acts] == Kind.MEMCPY) | _is_copy_kernel(analysis, acts))]
        if gemm.size:
            names, counts = np.unique(m.name[gemm], return_counts=True)
            top = names[np.argmax(counts)]
            text += (f" On the device: {fmt_count(gemm.size / steps_n)} GEMM kernel(s) {warm.per} "
                     f"({fmt_us(m.dur[gemm].sum() / steps_n)}; mostly "
                     f"{short_name(m.strings[int(top)])})")
            ev.append(evidence(analysis, int(gemm[0]), "the GEMM kernel"))
        if copies.size:
            nb = float(np.nansum(m.nbytes[copies]))
            text += (f" plus {fmt_count(copies.size / steps_n)} bias copy(ies) {warm.per} "
                     f"({fmt_us(m.dur[copies].sum() / steps_n)}"
                     f"{', ' + fmt_bytes(nb / steps_n) if nb > 0 else ''}) before the GEMM: "
                     "the fusion is at the dispatcher level, the GEMM is the same kernel.")
            ev.append(evidence(analysis, int(copies[0]), "the bias copy"))
        elif gemm.size:
            text += "; no separate bias copy (the bias rides in the GEMM epilogue)."
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title, message=text,
        steps=warm.steps(analysis), evidence=ev[:MAX_EVIDENCE], savings_us=None,
        confirm=("run the same code eagerly: aten::mm + aten::add appear instead, with the "
                 "same GEMM kernel"))]


def _under(analysis: SpanAnalysis, op_of: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Which device activities were launched inside one of ``rows`` (up to 4 ops deep)."""
    inner = innermost_op(analysis)
    cur = op_of.astype(np.int64)
    hit = np.zeros(cur.size, dtype=bool)
    for _ in range(4):
        ok = cur >= 0
        hit[ok] |= np.isin(cur[ok], rows)
        cur = np.where(ok & ~hit, inner[np.maximum(cur, 0)], -1)
    return hit


def _is_copy_kernel(analysis: SpanAnalysis, acts: np.ndarray) -> np.ndarray:
    m = analysis.model
    return np.isin(m.name[acts], m.name_ids_matching(_COPY_KERNEL))


RULE = Rule(id="addmm-fusion", title="addmm: dispatcher-level fusion", severity="info",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="it explains how the op runs, and there is nothing to remove")
