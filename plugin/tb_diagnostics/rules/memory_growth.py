"""Memory growth: allocated memory rising step over step, or inside one window (a leak).

What it detects
    With ``profile_memory=True``: the allocator's allocated memory at the end of
    each step, per device. It grows when the last step ends at least
    ``min_growth_bytes`` above the first and at least ``min_rising_share`` of
    the step-to-step changes are increases, over at least ``min_steps`` steps.
    When the curve is flat the rule still reports the figures it evaluated (an
    info finding), so a clean run is visibly clean. Where there are too few steps
    to see a trend (one step, or a span without steps, such as one inference
    forward), growth inside a window counts: the window ends at least
    ``min_window_growth_bytes`` and ``min_window_growth_share`` above where it
    started (an MoE forward that goes from 2.3 GB to 23.1 GB and keeps it), and
    the finding names the ops that made what is still allocated at its end.

Why it matters
    Tensors kept across iterations — a loss appended to a list with its graph
    (``losses.append(loss)``), a growing cache, hooks holding activations —
    add the same amount every step until the device runs out of memory, hours
    into a run. The allocation/free imbalance per step is the leak rate. xprof
    documents this check as a manual workflow; no tool automates it.

How to fix
    Keep only what you need, detached: ``losses.append(loss.item())`` (or
    ``loss.detach()``) instead of ``loss``; clear per-step caches; remove hooks
    that store tensors. Find the tensors with
    ``torch.cuda.memory._record_memory_history()`` and
    ``torch.cuda.memory._dump_snapshot("snap.pickle")`` (view at
    pytorch.org/memory_viz).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.memory import DeviceMemory, memory_series
from tb_diagnostics.analysis.views.memory_view import (
    device_views,
    event_range,
    group_by_op,
    kept_at_end,
    window_bounds,
)
from tb_diagnostics.rules._util import evidence_rows, fmt_bytes, fmt_pct, step_numbers, steps_text
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Growth from the first step's end to the last one's (bytes).
    min_growth_bytes: float = 8 * 2**20
    #: Share of step-to-step changes that must be increases.
    min_rising_share: float = 0.75
    #: Steps with memory events needed to judge a trend.
    min_steps: int = 3
    #: Growth inside one window (its end above its start) that counts when there are
    #: too few steps for a trend: bytes, and a share of what the window started with.
    min_window_growth_bytes: float = 2**30
    min_window_growth_share: float = 0.5


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    out = []
    for dev in memory_series(analysis):
        has = np.flatnonzero(~np.isnan(dev.end_alloc))
        if has.size < th.min_steps or not len(analysis.host_steps):
            out.extend(_within_windows(analysis, dev, has, th))
            continue
        end = dev.end_alloc[has]
        steps = step_numbers(analysis, has)
        delta = np.diff(end)
        growth = float(end[-1] - end[0])
        rising = float((delta > 0).mean()) if delta.size else 0.0
        if growth >= th.min_growth_bytes and rising >= th.min_rising_share:
            out.append(_growing(analysis, dev, has, steps, growth, rising))
        elif dev.device_type == 1 and not dev.relative:
            out.append(_flat(analysis, dev, has, steps, growth))
    return out


def _within_windows(analysis: SpanAnalysis, dev: DeviceMemory, has: np.ndarray,
                    th: Thresholds) -> list[Finding]:
    """Windows that end far above where they started: growth no trend can show."""
    start = dev.start_alloc[has]
    growth = dev.end_alloc[has] - start
    enough = growth >= th.min_window_growth_bytes
    if not dev.relative:  # a running sum has no absolute start to compare with
        enough &= growth >= th.min_window_growth_share * np.nan_to_num(start, nan=0.0)
    out = []
    for k, g in zip(has[enough].tolist(), growth[enough].tolist(), strict=True):
        w = analysis.windows[k]
        where = steps_text([w.step])
        kept = _kept_by(analysis, dev, k)
        base = " (relative to the start of profiling)" if dev.relative else ""
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title="Memory grows inside a window",
            subject=dev.label,
            message=(f"{dev.label}: allocated memory grows {fmt_bytes(g)} inside {where}, "
                     f"from {fmt_bytes(dev.start_alloc[k])} to {fmt_bytes(dev.end_alloc[k])}"
                     f"{base} at its end (peak {fmt_bytes(dev.peak_alloc[k])} inside it)"
                     f"{kept}; {_figures(dev)}. What a window keeps allocated at its end "
                     "stays for the next one."),
            steps=[w.step], evidence=evidence_rows(analysis, [w.row], "the window that grows"),
            savings_us=None,
            confirm=("profile several steps (or forwards): growth that repeats is a leak; "
                     "a cache filled once (KV cache, optimizer state) stops growing")))
    return out


def _kept_by(analysis: SpanAnalysis, dev: DeviceMemory, k: int) -> str:
    """``; still allocated at its end: 20.8 GB by aten::empty (3 allocations), …``."""
    for dv in device_views(analysis):
        if (dv.series.device_type, dv.series.device_id) != (dev.device_type, dev.device_id):
            continue
        lo, hi = window_bounds(analysis)
        a, b = event_range(dv, float(lo[k]), float(hi[k]))
        groups = group_by_op(analysis, dv, kept_at_end(dv, a, b))[:3]
        if groups:
            return "; still allocated at its end: " + ", ".join(
                f"{fmt_bytes(g.bytes)} made by {g.op} ({g.count} allocation"
                f"{'s' if g.count != 1 else ''})" for g in groups)
    return ""


def _figures(dev: DeviceMemory) -> str:
    text = f"peak allocated {fmt_bytes(dev.peak_alloc_span)}"
    if not np.isnan(dev.peak_reserved_span):
        text += f", peak reserved {fmt_bytes(dev.peak_reserved_span)}"
        if dev.total_mem:
            share = dev.peak_reserved_span / dev.total_mem
            text += f" ({fmt_pct(share)} of {fmt_bytes(dev.total_mem)})"
    return text


def _growing(analysis: SpanAnalysis, dev: DeviceMemory, has: np.ndarray,
             steps: list[int | None], growth: float, rising: float) -> Finding:
    per_step = growth / max(has.size - 1, 1)
    ends = ", ".join(fmt_bytes(v) for v in dev.end_alloc[has][:6])
    base = " (relative to the start of profiling)" if dev.relative else ""
    ev_rows = [analysis.windows[k].row for k in has.tolist()]
    return Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title, subject=dev.label,
        message=(f"{dev.label}: allocated memory grows {fmt_bytes(per_step)} per step over "
                 f"{steps_text(steps)} ({fmt_bytes(growth)} in all; {fmt_pct(rising)} of the "
                 f"steps grow); at each step's end{base}: {ends}; {_figures(dev)}. Tensors are "
                 "kept across iterations."),
        steps=steps, evidence=evidence_rows(analysis, ev_rows, "a step that ends higher"),
        savings_us=None,
        confirm=("profile more steps: a leak keeps growing by about the same amount every "
                 "step, while warm-up growth (optimizer state, caches) stops after step 1"))


def _flat(analysis: SpanAnalysis, dev: DeviceMemory, has: np.ndarray,
          steps: list[int | None], growth: float) -> Finding:
    end = dev.end_alloc[has]
    return Finding(
        rule=RULE.id, severity="info", title="Memory per step: no growth", subject=dev.label,
        message=(f"{dev.label}: allocated memory does not grow across {steps_text(steps)}: "
                 f"{fmt_bytes(end[0])} at the end of the first step, {fmt_bytes(end[-1])} at "
                 f"the end of the last ({'+' if growth >= 0 else '−'}{fmt_bytes(abs(growth))}"
                 f"); {_figures(dev)}."),
        steps=steps, evidence=[], savings_us=None,
        confirm="the allocated curve in the memory view returns to the same level every step")


RULE = Rule(id="memory-growth", title="Memory grows step over step", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__,
            escalation="info when memory does not grow (it says so)",
            no_saving="it is about memory, not time")
