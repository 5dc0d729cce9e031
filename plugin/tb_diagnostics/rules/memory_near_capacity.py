"""Memory near capacity: the allocator's peak reserved memory close to the device's total.

What it detects
    With ``profile_memory=True``: the peak ``Total Reserved`` of each CUDA
    device (``Total Allocated`` where reserved is not recorded) above
    ``max_share`` of its ``totalGlobalMem`` from ``deviceProperties``.
    torch-tb-profiler's rule uses the same 90 % (on allocated memory).

Why it matters
    A run this close to the limit fails with out-of-memory on the first larger
    batch or longer sequence, and before that the caching allocator starts
    freeing and re-allocating (``cudaFree``/``cudaMalloc`` in the trace), which
    synchronises the device.

How to fix
    Lower the activation memory: mixed precision (``torch.autocast(device_type=
    "cuda", dtype=torch.bfloat16)``), activation checkpointing
    (``torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)``), a
    smaller micro-batch with gradient accumulation; free gradients between
    steps with ``optimizer.zero_grad(set_to_none=True)``; and reduce fragmentation with
    ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.memory import memory_series
from tb_diagnostics.rules._util import evidence_rows, fmt_bytes, fmt_pct
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Share of totalGlobalMem above which the device is near capacity (torch-tb-profiler).
    max_share: float = 0.90


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    out = []
    for dev in memory_series(analysis):
        if dev.device_type != 1 or not dev.total_mem or dev.relative:
            continue
        which = "reserved"
        peak = dev.peak_reserved_span
        per_win = dev.peak_reserved
        if np.isnan(peak):
            which, peak, per_win = "allocated", dev.peak_alloc_span, dev.peak_alloc
        share = peak / dev.total_mem
        if np.isnan(share) or share < th.max_share:
            continue
        k = int(np.nanargmax(per_win)) if not np.isnan(per_win).all() else -1
        w = analysis.windows[k] if k >= 0 else None
        where = f" in step {w.step}" if w is not None and w.step is not None else ""
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title, subject=dev.label,
            message=(f"{dev.label}: peak {which} memory {fmt_bytes(peak)}{where} is "
                     f"{fmt_pct(share)} of the device's {fmt_bytes(dev.total_mem)} "
                     f"(threshold {fmt_pct(th.max_share)}); peak allocated "
                     f"{fmt_bytes(dev.peak_alloc_span)}."),
            steps=[w.step] if w is not None else [None],
            evidence=evidence_rows(analysis, [w.row] if w is not None else [],
                                   "the step with the peak"),
            savings_us=None,
            confirm=("torch.cuda.max_memory_reserved() after a step gives the same peak; "
                     "a slightly larger batch fails with CUDA out of memory")))
    return out


RULE = Rule(id="memory-near-capacity", title="Device memory near capacity", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="it is about memory, not time")
