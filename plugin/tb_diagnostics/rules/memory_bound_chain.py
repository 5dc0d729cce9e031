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
from tb_diagnostics.analysis.views.chains import Chain, memory_bound_chains
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    fmt_bytes,
    fmt_count,
    fmt_us,
    replayed_saving,
    short_name,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    #: Distinct op calls in a chain.
    min_ops: int = 3
    #: Fire when fusion saves at least this share of the busy time per step...
    min_saving_share: float = 0.03
    #: ...and at least this many µs per step.
    min_saving_us: float = 20.0


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only:
        return []
    chains = memory_bound_chains(analysis, th.min_ops)
    if not chains:
        return []
    m = analysis.model
    warm = warm_steps(analysis)
    chains = [c for c in chains if warm.mask[c.step]] if warm.mask.size else chains
    if not chains:
        return []
    n = warm.n
    saving = sum(c.saving_us for c in chains) / n
    # Summed in order, as Python's sum would (a cumulative sum, not numpy's pairwise one).
    dev = analysis.windows.columns.device_busy_us[warm.index].astype(np.float64)
    busy = (float(np.cumsum(dev)[-1]) if dev.size else 0) / n
    if saving < th.min_saving_us or saving < th.min_saving_share * busy:
        return []
    kinds: dict[tuple[str, ...], list[Chain]] = {}
    for c in chains:
        kinds.setdefault(tuple(m.name_of(o) for o in c.owners), []).append(c)
    sig, worst = max(kinds.items(), key=lambda kv: sum(c.saving_us for c in kv[1]))
    example = max(worst, key=lambda c: c.saving_us)
    ops_text = " → ".join(short_name(s.removeprefix("aten::"), 30) for s in sig[:6])
    if len(sig) > 6:
        ops_text += f" → … ({len(sig)} ops)"
    time = sum(c.time_us for c in chains) / n
    moved = sum(c.bytes for c in chains) / n
    replayed = replayed_saving(analysis, "fusion")  # the `fusion` what-if card's number
    ev = [evidence(analysis, r, "kernel of a memory-bound chain") for r in example.kernels]
    ev += [evidence(analysis, o, "op of the chain") for o in example.owners]
    steps = step_numbers(analysis, {c.step for c in chains})
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{fmt_count(len(chains) / n)} chains of memory-bound kernels per step in "
                 f"{steps_text(steps)} take {fmt_us(time)} and move {fmt_bytes(moved)} "
                 f"through memory; the costliest kind, {ops_text}, runs "
                 f"{fmt_count(len(worst) / n)} times per step. Fused (torch.compile), they "
                 f"would read and write each tensor once: the chains' kernels take "
                 f"{fmt_us(saving)} less per step, and the step "
                 f"{fmt_us(replayed or 0.0)} less (replayed)."),
        steps=steps, evidence=ev[:MAX_EVIDENCE], savings_us=replayed,
        confirm=("with torch.compile the chain's kernels become one triton_ kernel per chain "
                 "and the step's memory-bound busy time drops"))]


RULE = Rule(id="memory-bound-chain", title="Chains of memory-bound kernels to fuse",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            tags=("roofline",))
