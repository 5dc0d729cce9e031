"""Memory-bound chains: runs of elementwise and normalisation kernels that fusion would
merge.

What it detects
    On one stream, runs of at least ``min_ops`` consecutive kernels launched by
    different op calls that are all memory-bound elementwise, normalisation, softmax
    or reduction ops by the roofline (intensity below the ridge point; by family
    when the device has no peaks). Each op of such a chain reads its input from device
    memory and writes its output back, to have the next op read it again. The finding
    reports the chains per step, the longest-running kind (its ops in order) and what
    fusing them would save.

Why it matters
    Memory-bound kernels run at the speed of memory, not of the math units; a chain of
    k of them moves its tensors through memory k times where a fused kernel would
    read the inputs and write the result once. On an H100, an elementwise op on a
    100 MB tensor costs ~60 µs, almost all of it moving bytes. This is what
    torch.compile's Inductor does first: it fuses pointwise and reduction chains into
    one Triton kernel. The saving assumes the fused kernel moves as many bytes as the
    chain's largest op (its outside inputs and its result, tensors of the same size) at
    the bandwidth the chain achieved.

How to fix
    Compile the module: ``model = torch.compile(model)`` (or the function that holds the
    chain). Use the fused forms where they exist: ``F.scaled_dot_product_attention``
    for ``bmm → softmax → bmm``, ``nn.LayerNorm``/``F.rms_norm`` instead of hand-written
    norms, fused optimisers (``torch.optim.AdamW(..., fused=True)``), and in-place
    activations where autograd allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.op_costs import op_costs
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    fmt_bytes,
    fmt_count,
    fmt_us,
    n_steps,
    short_name,
    step_numbers,
    steps_text,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind

FUSABLE = frozenset({"elementwise", "norm", "softmax", "reduction"})


@dataclass(frozen=True)
class Thresholds:
    #: Distinct op calls in a chain.
    min_ops: int = 3
    #: Fire when fusion saves at least this share of the busy time per step...
    min_saving_share: float = 0.03
    #: ...and at least this many µs per step.
    min_saving_us: float = 20.0


@dataclass
class _Chain:
    kernels: list[int]  # model rows
    owners: list[int]  # distinct op rows, in order
    step: int  # window index
    time_us: float
    bytes: float
    saving_us: float


def _chains(analysis: SpanAnalysis, th: Thresholds) -> list[_Chain]:
    m = analysis.model
    rf, oc = roofline(analysis), op_costs(analysis)
    fusable = np.asarray([f.modelled and f.group.cost.family in FUSABLE and f.bound != "compute"
                          for f in rf.figures] or [False])
    call_bytes = np.asarray([f.group.cost.bytes if f.modelled else 0.0 for f in rf.figures]
                            or [0.0])
    acts = m.device_activity_rows
    group = oc.activity_group
    ok = (group >= 0) & fusable[np.maximum(group, 0)] & (m.kind[acts] == Kind.KERNEL)
    steps = (analysis.activity_step if len(analysis.host_steps)
             else np.zeros(acts.shape[0], dtype=np.int32))
    out: list[_Chain] = []
    order = np.lexsort((m.start[acts], m.stream[acts]))
    current: list[int] = []

    def close() -> None:
        owners = list(dict.fromkeys(int(oc.activity_owner[i]) for i in current))
        if len(owners) >= th.min_ops:
            rows = acts[current]
            t = float(m.dur[rows].sum())
            groups = [int(group[i]) for i in current]
            by_owner = dict(zip([int(oc.activity_owner[i]) for i in current], groups,
                                strict=True))
            total = float(sum(call_bytes[by_owner[o]] for o in owners))
            fused = float(max(call_bytes[by_owner[o]] for o in owners))
            saving = t * (1.0 - fused / total) if total > 0 else 0.0
            out.append(_Chain(kernels=rows.tolist(), owners=owners, step=int(steps[current[0]]),
                              time_us=t, bytes=total, saving_us=saving))
        current.clear()

    prev_stream = prev_step = None
    for i in order.tolist():
        if not ok[i] or m.stream[acts[i]] != prev_stream or steps[i] != prev_step:
            close()
        prev_stream, prev_step = m.stream[acts[i]], steps[i]
        if ok[i]:
            current.append(i)
    close()
    return out


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only:
        return []
    chains = _chains(analysis, th)
    if not chains:
        return []
    m = analysis.model
    n = n_steps(analysis)
    saving = sum(c.saving_us for c in chains) / n
    busy = sum(w.device_busy_us for w in analysis.windows) / n
    if saving < th.min_saving_us or saving < th.min_saving_share * busy:
        return []
    kinds: dict[tuple[str, ...], list[_Chain]] = {}
    for c in chains:
        kinds.setdefault(tuple(m.name_of(o) for o in c.owners), []).append(c)
    sig, worst = max(kinds.items(), key=lambda kv: sum(c.saving_us for c in kv[1]))
    example = max(worst, key=lambda c: c.saving_us)
    ops_text = " → ".join(short_name(s.removeprefix("aten::"), 30) for s in sig[:6])
    if len(sig) > 6:
        ops_text += f" → … ({len(sig)} ops)"
    time = sum(c.time_us for c in chains) / n
    moved = sum(c.bytes for c in chains) / n
    ev = [evidence(analysis, r, "kernel of a memory-bound chain") for r in example.kernels]
    ev += [evidence(analysis, o, "op of the chain") for o in example.owners]
    steps = step_numbers(analysis, {c.step for c in chains})
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{fmt_count(len(chains) / n)} chains of memory-bound kernels per step in "
                 f"{steps_text(steps)} take {fmt_us(time)} and move {fmt_bytes(moved)} "
                 f"through memory; the costliest kind, {ops_text}, runs "
                 f"{fmt_count(len(worst) / n)} times per step. Fused (torch.compile), they "
                 f"would read and write each tensor once: ~{fmt_us(saving)} per step less."),
        steps=steps, evidence=ev[:MAX_EVIDENCE], savings_us=saving,
        confirm=("with torch.compile the chain's kernels become one triton_ kernel per chain "
                 "and the step's memory-bound busy time drops"))]


RULE = Rule(id="memory-bound-chain", title="Chains of memory-bound kernels to fuse",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            tags=("roofline",))
