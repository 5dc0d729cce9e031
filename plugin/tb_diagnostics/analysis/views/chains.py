"""Memory-bound chains: runs of memory-bound kernels on one stream that fusion would merge.

Read by the ``memory-bound-chain`` rule and by the replay's fusion change. A chain is a
run of consecutive kernels on one stream, in one step, launched by at least ``min_ops``
different op calls whose op is a memory-bound elementwise, norm, softmax or reduction op
(by the roofline; by family when the device has no peaks). Fused, a chain is assumed to
move as many bytes as its largest op (its outside inputs and its result, tensors of the
same size) at the bandwidth the chain achieved.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.op_costs import op_costs
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.trace.categories import Kind

FUSABLE = frozenset({"elementwise", "norm", "softmax", "reduction"})
#: Distinct op calls in a chain, by default.
MIN_OPS = 3


@dataclass(frozen=True)
class Chain:
    kernels: list[int]  # model rows
    activities: list[int]  # their positions in model.device_activity_rows
    owners: list[int]  # distinct op rows, in order
    step: int  # window index
    time_us: float
    bytes: float
    saving_us: float  # the chain's time less the fused kernel's

    @property
    def fused_factor(self) -> float:
        """What the chain's kernels' time is multiplied by when fused."""
        return 1.0 - self.saving_us / self.time_us if self.time_us > 0 else 1.0


def memory_bound_chains(analysis: SpanAnalysis, min_ops: int = MIN_OPS) -> list[Chain]:
    """The span's chains of at least ``min_ops`` op calls (the default's are computed once)."""
    if min_ops == MIN_OPS:
        return _default_chains(analysis)
    return [] if analysis.cpu_only else _chains(analysis, min_ops)


@computed
def _default_chains(analysis: SpanAnalysis) -> list[Chain]:
    return [] if analysis.cpu_only else _chains(analysis, MIN_OPS)


def _chains(analysis: SpanAnalysis, min_ops: int) -> list[Chain]:
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
    out: list[Chain] = []
    order = np.lexsort((m.start[acts], m.stream[acts]))
    # The runs: consecutive kernels (by stream, then start) that fusion may merge, on one
    # stream in one step; any other activity between two ends the run. Found as columns:
    # only a run of at least min_ops kernels can hold min_ops op calls, and only those
    # are read one by one (a per-kernel loop took 2 s on 200,000 kernels of no run).
    keep = ok[order]
    stream, step = m.stream[acts[order]], steps[order]
    starts_new = np.ones(order.shape[0], dtype=bool)
    starts_new[1:] = (~keep[:-1] | (stream[1:] != stream[:-1]) | (step[1:] != step[:-1]))
    first = np.flatnonzero(keep & starts_new)
    stops = np.append(np.flatnonzero(~keep | starts_new), order.shape[0])
    last = stops[np.searchsorted(stops, first, side="right")]
    for a, b in zip(first.tolist(), last.tolist(), strict=True):
        if b - a < min_ops:
            continue
        current = order[a:b].tolist()
        owners = list(dict.fromkeys(int(oc.activity_owner[i]) for i in current))
        if len(owners) >= min_ops:
            rows = acts[current]
            t = float(m.dur[rows].sum())
            groups = [int(group[i]) for i in current]
            by_owner = dict(zip([int(oc.activity_owner[i]) for i in current], groups,
                                strict=True))
            total = float(sum(call_bytes[by_owner[o]] for o in owners))
            fused = float(max(call_bytes[by_owner[o]] for o in owners))
            saving = t * (1.0 - fused / total) if total > 0 else 0.0
            out.append(Chain(kernels=rows.tolist(), activities=list(current), owners=owners,
                             step=int(steps[current[0]]), time_us=t, bytes=total,
                             saving_us=saving))
    return out


