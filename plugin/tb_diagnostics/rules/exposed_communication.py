"""A large share of the step is communication that compute does not hide.

What it detects
    Steps where collective communication runs with nothing to hide it: on a GPU, the
    NCCL/RCCL kernel time (``ncclDevKernel_*``, ``ncclKernel_*``) not overlapped by
    any other kernel, copy or memset on the same device; on a CPU-only trace (gloo),
    the host time inside collectives (``c10d::*``, ``gloo:*``, ``record_param_comms``)
    not overlapped by heavy op work. It fires when that exposed communication
    reaches a share of the step in most steps, and reports the overlap ratio (the
    share of communication that compute did hide).
Why it matters
    Exposed communication is time the device spends neither computing nor able to
    compute: the step cannot be shorter than compute plus exposed communication.
    Data-parallel training is designed to overlap the gradient all-reduce with the
    backward pass (DDP's buckets); a low overlap means that design is not working,
    or that the ranks wait for one another (then see ``distributed-straggler``).
    HTA's communication/computation overlap analysis measures the same ratio.
How to fix
    Let DDP overlap: keep ``gradient_as_bucket_view=True``, tune ``bucket_cap_mb``
    so the first bucket is ready early, avoid ``find_unused_parameters=True`` when it
    is not needed; with FSDP, enable ``forward_prefetch`` / ``backward_prefetch``;
    accumulate gradients over several micro-batches under ``model.no_sync()`` to
    communicate less often; compress gradients with a DDP comm hook
    (``fp16_compress_hook``) when bandwidth is the limit; on a CPU cluster prefer
    fewer, larger collectives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.comm import collective_rows, step_comm
from tb_diagnostics.rules._util import fmt_pct, fmt_us, step_numbers, steps_text, warm_steps
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    #: A step counts when its exposed communication reaches this share of its wall time
    #: (xprof and HTA flag communication above ~20 % of the step as the thing to overlap).
    min_step_share: float = 0.20
    #: Fire when at least this share of the steps count.
    min_steps: float = 0.5
    #: Ignore steps whose exposed communication is below this (µs): a few small
    #: collectives (a loss all-reduce) are not worth a finding.
    min_exposed_us: float = 500.0
    #: Findings whose mean exposed share reaches this are critical.
    critical_share: float = 0.5


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    windows = analysis.windows
    rows = collective_rows(analysis)
    if not windows or not rows.size:
        return []
    sc = step_comm(analysis)
    wall = windows.columns.wall_us.astype(np.float64)
    exposed = sc.exposed_us
    share = np.divide(exposed, wall, out=np.zeros_like(wall), where=wall > 0)
    warm = warm_steps(analysis)
    hit = (share >= th.min_step_share) & (exposed >= th.min_exposed_us) & warm.mask
    if hit.sum() < max(1, th.min_steps * warm.n):
        return []
    idx = np.flatnonzero(hit)
    steps = step_numbers(analysis, idx)
    mean_exposed = float(exposed[idx].mean())
    mean_comm = float(sc.comm_us[idx].mean())
    mean_share = float(share[idx].mean())
    worst = int(idx[np.argmax(share[idx])])
    overlap = 1.0 - mean_exposed / mean_comm if mean_comm > 0 else 0.0
    where = ("host time blocked in collectives" if analysis.cpu_only
             or not analysis.model.has_device_activity else "communication kernel time")
    message = (f"Communication not hidden by compute took {fmt_pct(mean_share)} of "
               f"{steps_text(steps)}: {fmt_us(mean_exposed)} per step of {fmt_us(mean_comm)} "
               f"of {where} (overlap {fmt_pct(max(overlap, 0.0))}; worst: step "
               f"{windows[worst].step}, {fmt_pct(float(share[worst]))}).")
    m = analysis.model
    in_worst = rows[(m.start[rows] >= windows[worst].start) & (m.start[rows] < windows[worst].end)]
    top = in_worst[np.argsort(-m.dur[in_worst], kind="stable")[:5]]
    ev = [evidence(analysis, int(r), "a collective of the worst step") for r in top.tolist()]
    severity = "critical" if mean_share >= th.critical_share else RULE.severity
    return [Finding(
        rule=RULE.id, severity=severity, title=RULE.title, message=message, steps=steps,
        evidence=ev, savings_us=None,
        confirm=("compare comm_us and exposed_comm_us in the step table after the change; "
                 "the overlap ratio should rise and the step shorten"))]


RULE = Rule(id="exposed-communication", title="Communication not overlapped by compute",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            escalation=("critical when the exposed communication is critical_share or more of "
                        "the steps"),
            # Overlap moves collectives against compute, and when the other ranks arrive
            # decides how long they take: not a change the replay of one rank can make.
            no_saving=("how much overlap would hide depends on the other ranks and on where "
                       "the collectives move, which a replay of one rank cannot know"))
