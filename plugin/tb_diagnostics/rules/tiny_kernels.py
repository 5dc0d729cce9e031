"""Tiny kernels: many kernels shorter than the host call that launched them.

What it detects
    Kernels whose duration is shorter than their launch call on the host
    (HTA's "short GPU kernels": ``gpu_dur < cpu_dur``), in steps where they are
    at least ``min_fraction`` of the kernels and at least ``min_per_step`` of
    them, and the device is not already compute-bound (it computes less than 80 % of
    the step: collective kernels keep it busy, but they are communication, not
    compute). Launches inflated by a profiler buffer request are left out.

Why it matters
    When launching a kernel costs the host more than running it costs the
    device, the device can never be kept busy: it finishes each kernel and
    waits for the next launch. The step is launch-overhead bound; faster
    kernels change nothing. The Hugging Face guide's 64×64 matmul is the
    textbook case (2.3 ms of CPU for 23 µs of GPU).

How to fix
    Give each launch more work or launch less: larger batches; fuse chains of
    small ops with ``torch.compile``; capture the step once and replay it with
    CUDA graphs (``torch.compile(mode="reduce-overhead")`` or
    ``torch.cuda.graphs``); replace per-parameter loops with ``torch._foreach_*``
    or fused optimizers (``Adam(fused=True)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.intervals import covered
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.launch import launch_delays
from tb_diagnostics.rules._util import (
    busy_share,
    evidence_rows,
    fmt_count,
    fmt_pct,
    fmt_us,
    replayed_saving,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule
from tb_diagnostics.trace.categories import Kind


@dataclass(frozen=True)
class Thresholds:
    #: Share of a step's kernels that are tiny.
    min_fraction: float = 0.5
    #: ...and at least this many tiny kernels per step.
    min_per_step: int = 50
    #: Steps at or above this device-busy fraction are compute-bound: not reported
    #: (the verdict's compute-bound threshold, torch-tb-profiler's 80 %).
    max_busy: float = 0.80


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only:
        return []
    m = analysis.model
    ld = launch_delays(analysis)
    is_k = m.kind[ld.acts] == Kind.KERNEL
    acts, launcher, win = ld.acts[is_k], ld.launcher[is_k], ld.window[is_k]
    art = profiler_artefacts(analysis).host
    inflated = covered(art, m.start[launcher], m.end[launcher]) > 0
    # Kernels a CUDA graph replays share one launch call: none is launched on its own.
    graph = ld.graph[is_k]
    keep = (win >= 0) & ~inflated & ~graph & ~ld.module_load[is_k]  # a load is one-time
    acts, launcher, win = acts[keep], launcher[keep], win[keep]
    if not acts.size:
        return []
    tiny = m.dur[acts] < m.dur[launcher]
    windows = analysis.windows
    n = len(windows)
    total = np.bincount(win, minlength=n)
    small = np.bincount(win[tiny], minlength=n)
    # Compute, as the verdict reads it: a step busy in collective kernels still waits on
    # launches between them.
    busy = busy_share(windows.columns.compute_busy_us, windows.columns.wall_us)
    frac = small / np.maximum(total, 1)
    hit = np.flatnonzero((frac >= th.min_fraction) & (small >= th.min_per_step)
                         & (busy < th.max_busy) & warm_steps(analysis).mask)
    if not hit.size:
        return []
    sel = tiny & np.isin(win, hit)
    k_dur = float(np.median(m.dur[acts[sel]]))
    l_dur = float(np.median(m.dur[launcher[sel]]))
    steps = step_numbers(analysis, hit)
    host_cost = float(m.dur[launcher[sel]].sum()) / hit.size
    dev_work = float(m.dur[acts[sel]].sum()) / hit.size
    # Show a few of the tiny kernels with their launches, from the first step hit.
    first = np.flatnonzero(sel & (win == hit[0]))[:4]
    ev = []
    for i in first.tolist():
        ev += evidence_rows(analysis, [int(launcher[i])], "the launch call", limit=1)
        ev += evidence_rows(analysis, [int(acts[i])],
                            f"runs {fmt_us(m.dur[acts[i]])}, shorter than its launch", limit=1)
    graphed = np.bincount(ld.window[is_k][graph & (ld.window[is_k] >= 0)], minlength=n)[hit]
    graph_note = (f" {fmt_count(float(graphed.mean()))} kernels per step already replay from "
                  "CUDA graphs (not counted): capture the rest of the step too."
                  if graphed.any() else "")
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{int(small[hit].mean()):d} kernels per step ({fmt_pct(float(frac[hit].mean()))} "
                 f"of them) run shorter than their launch call in {steps_text(steps)}: median "
                 f"kernel {fmt_us(k_dur)} vs launch {fmt_us(l_dur)}. Launching them costs the "
                 f"host {fmt_us(host_cost)} {warm_steps(analysis).per} for {fmt_us(dev_work)} of "
                 "device work; "
                 f"the device computes {fmt_pct(float(busy[hit].mean()))} of the step."
                 f"{graph_note}"),
        # Replayed with the step's launches as CUDA graphs.
        steps=steps, evidence=ev, savings_us=replayed_saving(analysis, "graphs"),
        confirm=("double the batch size: if the step time barely moves, the step was bound "
                 "by launches, not by the kernels"))]


RULE = Rule(id="tiny-kernels", title="Kernels shorter than their launch", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__)
