"""High call count: an op called very often per step, each call cheap.

What it detects
    Op names the program calls directly (not from inside another ``ns::`` op,
    not the autograd engine's bookkeeping) at least ``min_calls_per_step`` times per step
    (median over warm steps), each call taking at most ``max_us_per_call`` of CPU
    total (its children and launches included), that add up to at least
    ``min_step_share`` of a warm step. The ``max_findings`` costliest are
    reported. Spans without steps are skipped (no "per step").

Why it matters
    The guide's table reading: "an event with a high # of Calls is a potential
    bottleneck even if each call is cheap — check whether it can be fused or
    batched". Each eager call pays Python, the dispatcher and a kernel launch
    (5-20 µs of host time, HTA's launch docs), so hundreds of tiny calls make a
    step overhead-bound however fast each kernel is.

How to fix
    Batch the calls into one: stack the tensors and call once; use the
    ``torch._foreach_*`` ops or the fused optimizers (``SGD(params, foreach=True)``,
    ``Adam(params, fused=True)``) for per-parameter updates; let
    ``torch.compile`` fuse chains of small ops; capture a static step with CUDA
    graphs (``torch.compile(mode="reduce-overhead")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.hierarchy import innermost_op
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import evidence_rows, fmt_us, warm_steps
from tb_diagnostics.rules.base import Finding, Rule

#: The autograd engine's per-node bookkeeping: called by the engine, not by the program.
_ENGINE = "autograd::engine::evaluate_function"


@dataclass(frozen=True)
class Thresholds:
    #: Calls per step (median over warm steps) from which an op is "called very often".
    min_calls_per_step: float = 100.0
    #: ...each call this cheap (µs of CPU total: a few dispatches and launches)...
    max_us_per_call: float = 50.0
    #: ...and all its calls this much of a warm step (CPU total / wall; xprof
    #: calls kernel-launch time ≥ 3 % of the step "moderate").
    min_step_share: float = 0.03
    #: Report at most this many ops.
    max_findings: int = 3


def namespaced(name_ids: np.ndarray, strings: Sequence[str]) -> np.ndarray:
    """Whether each name (a string id) has a ``::`` namespace: each distinct name tested
    once (a test per string of the model read every step's name too: 10^6 of them on a
    span of 10^6 steps)."""
    ids = unique(name_ids)
    has = np.asarray(["::" in strings[i] for i in ids.tolist()], dtype=bool)
    return has[np.searchsorted(ids, name_ids)]


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    windows = analysis.windows
    if not len(analysis.host_steps):
        return []
    ops = analysis.op_rows
    # Called by the program: no op above, or only a label (2021 traces file
    # record_function labels such as "Optimizer.step#SGD.step" as ops) or an
    # autograd node; not from inside another ATen/library op.
    inner = innermost_op(analysis)[ops]
    direct = inner < 0
    direct[~direct] = ~namespaced(m.name[inner[~direct]], m.strings)
    del inner
    rows = ops[direct]
    if not rows.size:
        return []
    ids, entry = m.name_groups(rows)
    win = window_of_rows(analysis, rows)
    warm = warm_steps(analysis)
    ok = warm.in_warm(win)
    n_win = len(windows)
    counted = entry[ok]
    per_win = np.bincount(counted.astype(np.int64) * n_win + win[ok],
                          minlength=ids.size * n_win).reshape(ids.size, n_win)
    calls_step = np.median(per_win[:, warm.index], axis=1)
    total = np.bincount(counted, weights=m.dur[rows[ok]], minlength=ids.size)
    calls = np.bincount(counted, minlength=ids.size)
    del counted
    per_call = total / np.maximum(calls, 1)
    total_step = total / warm.n
    share = warm.share(total_step)
    engine = np.asarray([m.strings[i].startswith(_ENGINE) for i in ids.tolist()], dtype=bool)
    hit = np.flatnonzero((calls_step >= th.min_calls_per_step)
                         & (per_call <= th.max_us_per_call)
                         & (share >= th.min_step_share) & ~engine)
    hit = hit[np.argsort(-total_step[hit], kind="stable")][: th.max_findings]
    out = []
    for i in hit.tolist():
        name = m.strings[int(ids[i])]
        first = int(warm.index[0]) if warm.index.size else 0
        mine = rows[(entry == i) & (win == first)]
        self_call = float(m.self_time(rows[(entry == i) & ok]).mean())
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title,
            subject=name,
            message=(f"{name} is called {calls_step[i]:.0f} times per step at "
                     f"{fmt_us(per_call[i])} each (self {fmt_us(self_call)}); the calls "
                     f"take {fmt_us(total_step[i])} per step "
                     f"({warm.share_text(total_step[i])}): fuse or batch them."),
            steps=warm.steps(analysis),
            evidence=evidence_rows(analysis, mine[:8], "one of the calls"), savings_us=None,
            confirm=("count the calls per step in the profiler table (# of Calls / steps); "
                     "after batching, the count and the step's host time should both drop")))
    return out


RULE = Rule(id="high-call-count", title="Op called very often", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving=("no change of this op alone is replayed; the launch, graphs, compile "
                       "and compile-graphs what-if cards, which it is related to, replay "
                       "cheaper launches for every op"))
