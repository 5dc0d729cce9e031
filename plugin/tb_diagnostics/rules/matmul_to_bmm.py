"""matmul → bmm: ``aten::matmul`` resolving to ``aten::bmm`` (3-D) or ``aten::mm`` (2-D).

What it detects
    What each ``aten::matmul`` call dispatched to — ``aten::bmm`` for batched
    (3-D and higher) inputs, ``aten::mm`` for 2-D ones (``aten::mv``/``dot`` for
    vectors) — with example input shapes where ``record_shapes=True``. One
    summary per span.

Why it matters
    ``matmul`` is a front end: the work and the kernel are chosen by its input
    ranks. A batched matmul with a batch of one, or 3-D activations that could
    be flattened to 2-D (``x.view(-1, k) @ w``), run as ``bmm`` with a different
    (often smaller-tile) kernel than the single large ``mm`` you may expect;
    conversely a loop of 2-D matmuls is a ``bmm`` waiting to happen.

How to fix
    Nothing to fix; information. Flatten leading dimensions when the weight is
    shared (``(x.reshape(-1, k) @ w).reshape(*x.shape[:-1], n)`` — what
    ``F.linear`` does), and batch independent 2-D products into one
    ``torch.bmm``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.rules._util import MAX_EVIDENCE, fmt_count, warm_steps
from tb_diagnostics.rules.base import Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind

TARGETS = ("aten::bmm", "aten::mm", "aten::mv", "aten::dot", "aten::_unsafe_view")


@dataclass(frozen=True)
class Thresholds:
    #: Report when at least this many matmul calls resolve to bmm or mm.
    min_calls: int = 1


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    rows = m.rows_named({"aten::matmul"})
    warm = warm_steps(analysis)
    rows = warm.host_rows(analysis, rows[m.kind[rows] == Kind.CPU_OP])
    if not rows.size:
        return []
    resolved: Counter[str] = Counter()
    example: dict[str, int] = {}
    for r in rows.tolist():
        kids = [m.name_of(k) for k in m.children(r).tolist()]
        target = next((t for t in TARGETS[:4] if t in kids), None)
        if target is None:
            continue
        resolved[target] += 1
        example.setdefault(target, r)
    if sum(resolved.values()) < th.min_calls:
        return []
    steps_n = warm.n
    parts = []
    ev = []
    for target, count in resolved.most_common():
        r = example[target]
        dims = m.string(int(m.input_dims[r]))
        rank = {"aten::bmm": "batched: both inputs 3-D or more",
                "aten::mm": "2-D, or leading dimensions folded into one 2-D product"
                }.get(target, "vectors")
        shape = f", e.g. {dims}" if dims else ""
        parts.append(f"to {target} {fmt_count(count / steps_n)} time(s) {warm.per} "
                     f"({rank}{shape})")
        ev.append(evidence(analysis, r, f"aten::matmul → {target}"))
        kid = next((k for k in m.children(r).tolist() if m.name_of(k) == target), -1)
        if kid >= 0:
            ev.append(evidence(analysis, kid, "what it dispatched to"))
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message="aten::matmul resolves " + "; ".join(parts) + ".",
        steps=warm.steps(analysis), evidence=ev[:MAX_EVIDENCE], savings_us=None,
        confirm="record_shapes=True shows the input ranks of each aten::matmul call")]


RULE = Rule(id="matmul-to-bmm", title="matmul resolving to bmm or mm", severity="info",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="it explains which product the op runs")
