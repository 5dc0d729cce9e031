"""Module load: a kernel's first launch blocking the host for hundreds of milliseconds.

What it detects
    Kernel launch calls (``cudaLaunchKernel``, ``cuLaunchKernel``,
    ``hipLaunchKernel``…) lasting at least 100 ms (``views.launch``'s
    ``MODULE_LOAD_MIN_US``) that launch the first instance of their kernel in
    the trace, on a stream whose queue is not full: the driver loading the
    kernel's module (lazy loading, ``CUDA_MODULE_LOADING=LAZY``, the default
    since CUDA 12.2; cuDNN and cuBLAS load their kernels the same way). Each is
    named with the kernel, the op that launched it and its step; the time is
    kept out of every launch figure (launch delays, ``launch-delay``,
    ``tiny-kernels``) so that a one-time load is not read as launch overhead.

Why it matters
    A normal launch costs the host 5–20 µs. A 420 ms module load inside the
    window is one-time, yet counted as launch time it makes its step look
    overhead-bound and the launch projections promise savings that no fewer or
    cheaper launches could give. In a warm step it also means the profile is not
    of the steady state.

How to fix
    Nothing in the model. Run one warm-up iteration before profiling (or give
    the schedule ``warmup`` steps) so every kernel has been loaded; set
    ``CUDA_MODULE_LOADING=EAGER`` to load all modules at start-up instead (at
    the price of start-up time and memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import launching_op
from tb_diagnostics.analysis.views.launch import module_loads
from tb_diagnostics.names import short_name
from tb_diagnostics.rules._util import evidence_rows, fmt_us, step_numbers, warm_steps
from tb_diagnostics.rules.base import Finding, Rule, evidence


@dataclass(frozen=True)
class Thresholds:
    #: Module loads listed one by one in the message.
    top: int = 3


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    ml = module_loads(analysis)
    if not len(ml):
        return []
    m = analysis.model
    acts = m.device_activity_rows
    pos = np.searchsorted(acts, ml.acts)
    windows = (analysis.activity_step[pos] if len(analysis.host_steps)
               else np.zeros(pos.shape[0], dtype=np.int64))
    warm = warm_steps(analysis).in_warm(windows) if len(analysis.host_steps) else \
        np.zeros(pos.shape[0], dtype=bool)
    op_of = launching_op(analysis)[pos]
    order = np.argsort(-m.dur[ml.rows], kind="stable")
    parts = []
    for i in order[: th.top].tolist():
        op = f" (from {m.name_of(int(op_of[i]))})" if op_of[i] >= 0 else ""
        step = windows[i]
        where = (f" in step {analysis.windows[step].step}"
                 if len(analysis.host_steps) and step >= 0 else "")
        parts.append(f"{fmt_us(m.dur[ml.rows[i]])} in {m.name_of(int(ml.rows[i]))} for "
                     f"{short_name(m.name_of(int(ml.acts[i])), 60)}{op}{where}")
    more = f" and {len(ml) - th.top} more" if len(ml) > th.top else ""
    ev = []
    for i in order[:4].tolist():
        ev.append(evidence(analysis, int(ml.rows[i]), "blocks the host: the module loads"))
        ev += evidence_rows(analysis, [int(ml.acts[i])], "the kernel's first launch", limit=1)
    return [Finding(
        rule=RULE.id, severity="warning" if warm.any() else RULE.severity, title=RULE.title,
        message=(f"{len(ml)} first launch(es) of a kernel block the host for "
                 f"{fmt_us(ml.total_us)} in all: {'; '.join(parts)}{more}. Each is the "
                 "driver loading the kernel's module, a one-time cost: it is kept out of "
                 "the launch figures"
                 + (", and it falls in a warm step, so the profile is not of the steady "
                    "state" if warm.any() else "") + "."),
        steps=step_numbers(analysis, windows[windows >= 0]) or [None], evidence=ev,
        savings_us=None,
        confirm=("profile again after a warm-up iteration: the same launch returns in "
                 "microseconds"),
        subject=None)]


RULE = Rule(id="module-load", title="One-time module load in a launch", severity="info",
            check=check, thresholds=Thresholds(), doc=__doc__,
            escalation="warning when it falls in a warm step",
            no_saving="the load is paid once; a warm-up iteration moves it out of the profile")
