"""Low FLOP utilisation: compute-bound steps whose busy time is far from the roofline.

What it detects
    Compute-bound steps (the device is busy) in which the op calls that the cost model
    prices took much longer than the roofline allows for their work: the sum over those
    calls of their ideal time, max(FLOPs / peak, bytes / bandwidth) at the device's
    peaks (``roofline.device``), is under ``max_roofline_fraction`` of their device
    time, and they cover at least ``min_modelled_share`` of the compute busy time
    (device activity that is not communication: NCCL/RCCL, symmetric-memory and custom
    all-reduce kernels and whatever a ``c10d::`` / ``symm_mem::`` collective launched).
    It names the
    op groups (name and shapes) that lose the most time against their roofline time,
    with the step's FLOP utilisation (FLOPs ÷ wall time × peak of its dominant
    precision: MFU counted in hardware FLOPs).

Why it matters
    "Compute-bound" only says the device is never idle; it does not say the device's
    time is well spent. Large GEMMs reach 60–80 % of a GPU's peak; a step whose kernels
    sit at 10 % is waiting on small or badly shaped products, memory-bound kernels or
    slow precisions, and that is where its time can still be won. xprof's roofline
    and AMD TraceLens's per-op performance model make the same comparison.

How to fix
    Start with the ops listed. For memory-bound ones (softmax, elementwise and
    normalisation chains, attention computed as ``bmm`` → ``softmax`` → ``bmm``): fuse
    them (``torch.compile``; ``F.scaled_dot_product_attention`` for attention). For
    compute-bound products far below peak: use bf16/fp16 autocast (or TF32), make the
    dimensions multiples of 8 (16 for fp8), batch small GEMMs, and raise the batch
    size. Example: ``with torch.autocast("cuda", dtype=torch.bfloat16): y = model(x)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.replay.changes import tuned_change
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.op_costs import op_costs
from tb_diagnostics.analysis.views.roofline import (
    compute_busy_us,
    roofline,
    step_groups,
    step_utilisation,
)
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    change_saving,
    fmt_pct,
    fmt_us,
    op_label,
    step_numbers,
    steps_text,
    top_by,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    #: The priced calls' roofline time under this share of their device time...
    max_roofline_fraction: float = 0.5
    #: ...with the priced calls at least this share of the steps' busy time.
    min_modelled_share: float = 0.3
    #: The share of its roofline a well-tuned kernel reaches: savings are counted to it.
    attainable_fraction: float = 0.7
    #: Op groups named in the message.
    top_ops: int = 3


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    rf = roofline(analysis)
    if rf.peaks is None or not rf.figures:
        return []
    windows = analysis.windows
    warm = warm_steps(analysis).mask
    # From the verdict column, not a view per window.
    chosen = np.flatnonzero((windows.columns.verdict == "compute-bound") & warm).tolist()
    if not chosen:
        return []
    sg = step_groups(analysis)
    priced = np.asarray([f.ideal_us is not None for f in rf.figures])
    device = sg.device_us[chosen][:, priced].sum()
    ideal = sg.ideal_us[chosen][:, priced].sum()
    # The compute time (collectives wait for other ranks: no roofline to reach).
    busy = float(compute_busy_us(analysis)[chosen].sum())
    if device <= 0 or busy <= 0 or device / busy < th.min_modelled_share:
        return []
    if ideal / device >= th.max_roofline_fraction:
        return []
    n = len(chosen)
    per_group_dev = sg.device_us[chosen].sum(axis=0) / n
    per_group_ideal = sg.ideal_us[chosen].sum(axis=0) / n
    loss = np.where(priced, np.maximum(per_group_dev - per_group_ideal, 0.0), 0.0)
    order = [int(g) for g in np.argsort(-loss, kind="stable")[:th.top_ops] if loss[g] > 0]
    named = []
    for g in order:
        f = rf.figures[g]
        pct = per_group_ideal[g] / per_group_dev[g] if per_group_dev[g] > 0 else 0.0
        named.append(f"{op_label(f.group.name, f.group.input_dims)} loses "
                     f"{fmt_us(loss[g])} at {fmt_pct(pct)} of its roofline "
                     f"({f.bound}-bound, {f.precision or '?'})")
    wall = windows.columns.wall_us[chosen].tolist()
    utils = [step_utilisation(rf, k, w)[1] for k, w in zip(chosen, wall, strict=True)]
    utils = [u for u in utils if u is not None]
    util_text = (f"; FLOP utilisation {fmt_pct(float(np.median(utils)))} of the "
                 f"{rf.step_precision[chosen[0]]} peak" if utils else "")
    steps = step_numbers(analysis, chosen)
    oc = op_costs(analysis)
    ev = []
    for g in order:
        rows = oc.rows[oc.group == g]
        for r in top_by(rows, analysis.model.dur[rows], 2).tolist():
            ev.append(evidence(analysis, r, f"{rf.figures[g].bound}-bound, far from its "
                                            "roofline"))
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"In {steps_text(steps)} (compute-bound) the priced op calls keep the "
                 f"device busy {fmt_us(device / n)} per step where the roofline of "
                 f"{rf.peaks.name} needs {fmt_us(ideal / n)} "
                 f"({fmt_pct(ideal / device)} of roofline){util_text}. Most time lost: "
                 + "; ".join(named) + "."),
        steps=steps, evidence=ev[:MAX_EVIDENCE],
        # Replayed with every priced op at the attainable share of its roofline.
        savings_us=change_saving(analysis, tuned_change(analysis, th.attainable_fraction),
                                 steps),
        confirm=("after the change the same ops' achieved TFLOP/s (or GB/s) in the "
                 "roofline chart move up towards their ceiling and the step's busy time "
                 "drops"))]


RULE = Rule(id="low-flop-utilisation", title="Busy time far below the roofline",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            tags=("roofline",))
