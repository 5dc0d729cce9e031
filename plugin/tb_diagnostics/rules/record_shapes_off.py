"""record_shapes off: the span has op calls but none recorded its input shapes.

What it detects
    A span with at least ``min_ops`` operator calls of which none carries
    ``Input Dims`` (the profiler ran with ``record_shapes=False``, its default), while
    the device did work (or, on a CPU-only trace, heavy op calls ran).

Why it matters
    Without shapes nothing can say how much work an op did: no FLOPs, no bytes, no
    roofline, no FLOP utilisation, no memory-bound chains, and the shape rules
    (``misaligned-half-gemm``, ``matmul-to-bmm``) and the precision of each GEMM (its
    input types) stay silent. Recording shapes costs a few per cent of host time while
    profiling, and only then.

How to fix
    Profile with shapes: ``torch.profiler.profile(..., record_shapes=True,
    on_trace_ready=tensorboard_trace_handler("./log/run"))``.
    For FLOPs of every product in the trace itself, add ``with_flops=True``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.op_costs import op_costs
from tb_diagnostics.rules._util import all_steps, top_by
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    #: Spans with fewer op calls are too small to matter.
    min_ops: int = 20


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    ops = analysis.op_rows
    if ops.size < th.min_ops or op_costs(analysis).shapes_recorded:
        return []
    if analysis.cpu_only and not analysis.heavy_op_rows.size:
        return []
    m = analysis.model
    ev = [evidence(analysis, r, "recorded without Input Dims")
          for r in top_by(ops, m.dur[ops], 3).tolist()]
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"None of the span's {ops.size} op calls recorded its input shapes "
                 "(record_shapes was off): no FLOPs, no roofline and no FLOP utilisation, "
                 "and the rules that read shapes and types stay silent. Profile with "
                 "record_shapes=True."),
        steps=all_steps(analysis), evidence=ev, savings_us=None,
        confirm="the next trace's op events carry 'Input Dims' and 'Input type' args")]


RULE = Rule(id="record-shapes-off", title="Shapes not recorded", severity="info",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving='it is a recording setting, not a cost', tags=("roofline",))
