"""GPU idle gaps: the device waits between kernels inside a step.

What it detects
    Gaps of at least ``min_gap_us`` between consecutive device activities of
    the same step (any stream) that add up to at least ``min_step_share`` of the
    step, and what the host was doing meanwhile: waiting for input, blocked in
    a sync, launching work (Python, ops, runtime calls) or nothing recorded.
    Gaps that are profiler time (a buffer request, the first-launch offset) are
    excluded and counted separately.

Why it matters
    Between kernels the device computes nothing; the step is as long as its
    kernels *plus* these gaps. HTA attributes each gap to host wait (the next
    launch came after the previous kernel ended) or kernel wait; xprof flags
    device idle above 10 % of the step; Nsight Systems' ``gpu_gaps`` rule lists
    gaps (500 ms by default, far coarser than a step). Closing the gaps is the
    saving estimated here.

How to fix
    Depends on what the host was doing: in syncs, remove them (see
    ``host-sync``); launching many small ops, cut the launches (``torch.compile``,
    CUDA graphs via ``torch.compile(mode="reduce-overhead")``, larger batches);
    waiting for input, see ``dataloader-bottleneck``; nothing recorded, profile
    with ``with_stack=True`` to see the Python in between.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.gaps import device_gaps, host_causes, host_rows_during
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    fmt_pct,
    fmt_us,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Evidence, Finding, Rule, evidence

_CAUSE_WORDS = {"input": "waiting for input", "sync": "blocked in a sync",
                "comm": "blocked in a collective", "launch": "launching work",
                "other": "with nothing recorded"}


@dataclass(frozen=True)
class Thresholds:
    #: Gaps shorter than this (µs) are normal kernel-to-kernel latency (HTA counts
    #: gaps under 30 µs as kernel wait).
    min_gap_us: float = 50.0
    #: Fire when the counted gaps reach this share of the step time (xprof's smart
    #: suggestion: device idle > 10 %).
    min_step_share: float = 0.10
    #: Describe this many of the largest gaps.
    largest: int = 3


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    g = device_gaps(analysis)
    if not len(g):
        return []
    windows = analysis.windows
    big = g.dur >= th.min_gap_us
    warm = warm_steps(analysis)
    real = big & ~g.artefact & warm.in_warm(g.window)
    if not real.any():
        return []
    per_win = np.bincount(g.window[real], weights=g.dur[real], minlength=len(windows))
    per_step = float(warm.per_window(per_win))
    share = float(warm.share(per_step))
    if share < th.min_step_share:
        return []
    idx = np.flatnonzero(real)
    causes = host_causes(analysis, g.start[idx], g.end[idx])
    total = float(g.dur[idx].sum())
    mix = ", ".join(f"{_CAUSE_WORDS[c]} {fmt_pct(float(v.sum()) / total)}"
                    for c, v in sorted(causes.items(), key=lambda kv: -float(kv[1].sum()))
                    if v.sum() > 0.005 * total)
    steps = step_numbers(analysis, g.window[idx])
    largest = idx[np.argsort(-g.dur[idx], kind="stable")[: th.largest]]
    described, ev = _describe(analysis, largest)
    art = big & g.artefact
    art_note = (f" {int(art.sum())} gap(s) ({fmt_us(g.dur[art].sum())}) are profiler time and "
                "not counted." if art.any() else "")
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"The device idles between kernels: {idx.size} gap(s) of ≥ "
                 f"{fmt_us(th.min_gap_us)} take {fmt_us(per_step)} {warm.per} "
                 f"({warm.share_text(per_step)}"
                 f"{', ' + steps_text(steps) if warm.has_steps else ''}). Meanwhile the "
                 f"host was {mix}. Largest: {described}.{art_note} What closing them saves is "
                 "replayed per cause: see the findings on those causes and the What-if "
                 "projections."),
        # Its idle time is what the findings on its causes (dataloader-bottleneck,
        # host-sync…) save, replayed; claiming it here too would count it twice.
        steps=steps, evidence=ev, savings_us=None,
        confirm=("profile more steps: gaps that recur at the same place in every step are "
                 "the program's; one that appears once is the profiler or a one-off"))]


def _describe(analysis: SpanAnalysis, gaps_idx: np.ndarray) -> tuple[str, list[Evidence]]:
    m = analysis.model
    g = device_gaps(analysis)
    texts = []
    ev: list[Evidence] = []
    for i in gaps_idx.tolist():
        lo, hi = float(g.start[i]), float(g.end[i])
        causes = host_causes(analysis, np.asarray([lo]), np.asarray([hi]))
        main = max(causes, key=lambda c: float(causes[c][0]))
        host = host_rows_during(analysis, lo, hi, limit=1)
        w = analysis.windows[int(g.window[i])]
        where = f"step {w.step}" if w.step is not None else "the span"
        doing = f" in {m.name_of(host[0])}" if host else ""
        texts.append(f"{fmt_us(hi - lo)} in {where}, host {_CAUSE_WORDS[main]}{doing}")
        if g.before[i] >= 0:
            ev.append(evidence(analysis, int(g.before[i]), f"the gap of {fmt_us(hi - lo)} "
                               "opens after it"))
        if g.after[i] >= 0:
            ev.append(evidence(analysis, int(g.after[i]), "the gap closes when it starts"))
        ev.extend(evidence(analysis, r, "what the host was doing") for r in host)
    return "; ".join(texts), ev[:MAX_EVIDENCE]


RULE = Rule(id="gpu-idle-gap", title="Device idle between kernels", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__)
