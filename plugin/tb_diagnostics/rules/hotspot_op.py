"""Hotspot op: one op (or one kernel) takes most of the device time.

What it detects
    The op whose *self device time* — the device activities launched directly by
    it, as in the profiler table's "Self CUDA" column — is at least
    ``min_share`` of all device time in the span; or, failing that, one kernel
    name that is. On a CPU-only trace the CPU is the device and the op's self
    CPU time share is used instead.

Why it matters
    The Hugging Face guide's first table reading: "an event dominates CUDA
    total: that is your hotspot, start optimising there". Any other
    optimisation can save at most the remaining share of the device time.

How to fix
    Make that op cheaper or call it less: a smaller or better-shaped problem
    (multiples of 8 for Tensor Cores), lower precision
    (``torch.autocast("cuda", dtype=torch.bfloat16)``), a fused or better
    implementation (``F.scaled_dot_product_attention`` instead of
    ``softmax(q @ k.T) @ v``; ``torch.compile`` for chains of elementwise ops), or
    overlap it (a communication kernel: bucket and overlap with backward).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import launching_op
from tb_diagnostics.analysis.views.tables import kernel_instances, op_table
from tb_diagnostics.names import shorten_name
from tb_diagnostics.rules._util import evidence_rows, fmt_pct, fmt_us, top_by, warm_steps
from tb_diagnostics.rules.base import Finding, Rule
from tb_diagnostics.trace.categories import COMM_NAME


@dataclass(frozen=True)
class Thresholds:
    #: Share of all device time (self device time of one op, or one kernel name)
    #: at which it is "the" hotspot: "most" of the device time.
    min_share: float = 0.5
    #: ...and its time per step must be at least this share of a warm step,
    #: or the step is not bound by it (a 2 µs kernel in a 4 ms step is no hotspot).
    min_step_share: float = 0.05


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    table = op_table(analysis)
    if not len(table):
        return []
    warm = warm_steps(analysis)
    steps = warm.steps(analysis)
    confirm = ("sort the profiler table by self device time (prof.key_averages()"
               ".table(sort_by='self_cuda_time_total')): this op is on top")
    # Shares and times over the warm steps: a cold step's one-time costs pick no hotspot.
    if analysis.cpu_only:
        # A collective's self time on the CPU is waiting for the other ranks, not work:
        # exposed-communication and the run-level rules speak for it.
        is_comm = np.asarray([bool(COMM_NAME.search(m.strings[int(n)]))
                              for n in table.name_ids], dtype=bool)
        values = np.where(is_comm, 0.0, warm.per_window(table.self_cpu_per_window)) * warm.n
        ops = warm.host_rows(analysis, m.without(analysis.op_rows, analysis.comm_rows))
        total = float(m.self_time(ops).sum())
        what = "self CPU time"
    else:
        acts = m.device_activity_rows[warm.activities(analysis)]
        total = float(m.dur[acts].sum())
        values = warm.per_window(table.self_device_per_window) * warm.n
        what = "self device time"
    if total <= 0:
        return []
    floor = th.min_step_share * warm.mean_wall_us * warm.n
    i = int(np.argmax(values))
    share = float(values[i] / total)
    if share >= th.min_share and values[i] >= floor:
        name = m.strings[int(table.name_ids[i])]
        rows = warm.host_rows(analysis, table.rows_of(analysis, i))
        key = m.self_time(rows) if analysis.cpu_only else _device_time_of(analysis, rows)
        ev = evidence_rows(analysis, top_by(rows, key, 6), "a call of the hotspot op")
        if not analysis.cpu_only:
            acts = m.device_activity_rows[np.isin(launching_op(analysis), rows)]
            ev += evidence_rows(analysis, top_by(acts, m.dur[acts], 4),
                                "device work it launched", limit=4)
        return [Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title, subject=name,
            message=(f"{name} takes {fmt_pct(share)} of the {what} ({fmt_us(values[i])} of "
                     f"{fmt_us(total)}, {fmt_us(values[i] / warm.n)} {warm.per} over "
                     f"{rows.size} calls{warm.cold_clause}): start optimising there."),
            steps=steps, evidence=ev, savings_us=None, confirm=confirm)]
    if analysis.cpu_only:
        return []
    ki = kernel_instances(analysis)
    if not len(ki):
        return []
    keep = warm.in_warm(ki.window) if warm.has_steps else np.ones(len(ki), dtype=bool)
    if not keep.any():
        return []
    names, inv = np.unique(ki.name[keep], return_inverse=True)
    kept = ki.rows[keep]
    dev = np.bincount(inv, weights=m.dur[kept])
    k = int(np.argmax(dev))
    share = float(dev[k] / total)
    if share < th.min_share or dev[k] < floor:
        return []
    rows = kept[inv == k]
    kernel = m.strings[int(names[k])]
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title, subject=shorten_name(kernel),
        message=(f"Kernel {kernel} takes {fmt_pct(share)} of the device time "
                 f"({fmt_us(dev[k])}, {rows.size} launches, {fmt_us(dev[k] / warm.n)} "
                 f"{warm.per}{warm.cold_clause}): start optimising there."),
        steps=steps, evidence=evidence_rows(analysis, top_by(rows, m.dur[rows], 6),
                                            "an instance of the hotspot kernel"),
        savings_us=None, confirm=confirm)]


def _device_time_of(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    m = analysis.model
    op_of = launching_op(analysis)
    acts = m.device_activity_rows
    has = np.isin(op_of, rows)
    pos = np.searchsorted(rows, op_of[has])
    return np.bincount(pos, weights=m.dur[acts[has]], minlength=rows.size)


RULE = Rule(id="hotspot-op", title="Hotspot op", severity="info", check=check,
            thresholds=Thresholds(), doc=__doc__,
            no_saving=("an op's own time is its work; the roofline says how far it is from the "
                       "device's limit"))
