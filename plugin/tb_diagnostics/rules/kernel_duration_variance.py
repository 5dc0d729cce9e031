"""Kernel duration variance: the same kernel takes very different times across steps.

What it detects
    "The same kernel" is the k-th launch, within a step, of one kernel name
    with one launch shape (its grid and block, else the launching op's ``Input Dims``):
    the same point of the program in every step (only kernels launched equally
    often in every step are compared, so the k-th launches line up).
    Communication kernels (NCCL/RCCL), whose duration includes waiting for
    their peers, are left out, and so are kernels whose launch is not in the
    trace (queued before the record window opened). Across the warm steps (the cold first step is
    left out) its durations are compared; a kernel whose
    slowest instance is at least ``ratio`` × its fastest, ``min_spread_us``
    apart, with a median of at least ``min_median_us``, varies. One finding per
    span lists the kernels with the largest spread.

Why it matters
    Identical work taking 580 µs in one step and 1 ms in another (the Hugging
    Face guide's example) is the device, not your code: clocks ramping, thermal
    or power throttling, another process or a concurrent stream competing, the
    driver's housekeeping. A mean over such instances describes no step;
    report the spread (min / median / max) and compare medians.

How to fix
    Nothing in the model. For stable measurements: warm the device up before
    the active steps, keep other jobs off the GPU, and lock clocks where you
    control the machine (``nvidia-smi --lock-gpu-clocks``). Compare runs by
    median, not mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.tables import kernel_instances
from tb_diagnostics.analysis.views.warmth import step_walls
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    fmt_us,
    short_name,
    step_numbers,
    steps_text,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence

#: Communication kernels wait for their peers: their duration is not their work.
_COLLECTIVE = re.compile(r"^nccl|^rccl|ncclKernel|ncclDevKernel")


@dataclass(frozen=True)
class Thresholds:
    #: Slowest / fastest instance of the same kernel across steps.
    ratio: float = 1.5
    #: ...and at least this far apart (µs), so 3 µs vs 5 µs is not "varying".
    min_spread_us: float = 50.0
    #: Only kernels whose median is at least this long (µs).
    min_median_us: float = 20.0
    #: The kernel must appear in at least this many warm steps.
    min_steps: int = 3
    #: List this many kernels.
    top: int = 3


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if not len(analysis.host_steps) or analysis.cpu_only:
        return []
    ki = kernel_instances(analysis)
    warm = step_walls(analysis).warm
    ok = (ki.window >= 0) & warm[np.maximum(ki.window, 0)]
    if ok.sum() < th.min_steps:
        return []
    m = analysis.model
    ok &= ~np.isin(ki.name, _collective_ids(analysis))
    # A kernel whose launch is not in the trace (queued before the record window opened)
    # is at no point of the step's program: its "k-th launch" lines up with nothing.
    launched = m.launcher[ki.rows] >= 0
    if launched.any():
        ok &= launched
    ok &= _stable_counts(ki, ok)
    if ok.sum() < th.min_steps:  # nothing left to compare
        return []
    rows, name, shape, ordinal = ki.rows[ok], ki.name[ok], ki.shape[ok], ki.ordinal[ok]
    dur = m.dur[rows]
    order = np.lexsort((dur, ordinal, shape, name))
    # Runs of equal (name, shape, ordinal), a key at a time (no stacked copy of the three).
    new = np.zeros(order.size, dtype=bool)
    new[:1] = True
    for key in (name, shape, ordinal):
        k = key[order]
        new[1:] |= k[1:] != k[:-1]
    del k
    bounds = np.append(np.flatnonzero(new), order.size)
    first, last = bounds[:-1], bounds[1:] - 1
    count = last - first + 1
    d = dur[order]
    lo, hi = d[first], d[last]
    cand = np.flatnonzero((count >= th.min_steps) & (hi >= th.ratio * np.maximum(lo, 1e-9))
                          & (hi - lo >= th.min_spread_us))
    med = np.zeros(first.size)
    for g in cand.tolist():  # medians only where the spread already qualifies
        med[g] = float(np.median(d[first[g]:last[g] + 1]))
    bad = cand[med[cand] >= th.min_median_us]
    if not bad.size:
        return []
    bad = bad[np.argsort(-(hi[bad] - lo[bad]), kind="stable")]
    texts, ev = [], []
    rows_o = rows[order]
    for g in bad[: th.top].tolist():
        fast, slow = int(rows_o[first[g]]), int(rows_o[last[g]])
        texts.append(f"{short_name(m.name_of(slow))} (launch {int(ordinal[order][first[g]]) + 1} "
                     f"of its step): min {fmt_us(lo[g])}, median {fmt_us(med[g])}, max "
                     f"{fmt_us(hi[g])} over {count[g]} steps")
        ev.append(evidence(analysis, fast, f"fastest instance, {fmt_us(lo[g])}"))
        ev.append(evidence(analysis, slow, f"slowest instance, {fmt_us(hi[g])} "
                           f"({hi[g] / lo[g]:.1f}×)"))
    windows_bad = unique(ki.window[np.isin(ki.rows, rows_o[last[bad]])])
    steps = step_numbers(analysis, windows_bad)
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{bad.size} kernel(s) vary by ≥ {th.ratio:g}× across warm steps "
                 f"(slowest in {steps_text(steps)}): " + "; ".join(texts)
                 + ". Compare medians, not means."),
        steps=steps, evidence=ev[:MAX_EVIDENCE], savings_us=None,
        confirm=("run the same steps again (or more active steps): a kernel whose slow "
                 "instance moves between steps is the device, not the code; nvidia-smi -q -d "
                 "CLOCK,PERFORMANCE shows throttling"))]


def _collective_ids(analysis: SpanAnalysis) -> np.ndarray:
    return analysis.model.name_ids_matching(_COLLECTIVE)


def _stable_counts(ki, ok: np.ndarray) -> np.ndarray:
    """Instances of (name, shape) launched equally often in every warm step they appear in.

    Only then does "the k-th launch" name the same point of the program in
    every step; otherwise the ordinals are misaligned and nothing is compared.
    """
    idx = np.flatnonzero(ok)
    if not idx.size:
        return ok
    # One sort by (name, shape, step) and runs of equal keys (np.unique on stacked keys
    # sorts rows of tuples: several times slower on a launch per step of 10^6 steps).
    name, shape, win = ki.name[idx], ki.shape[idx], ki.window[idx]
    order = np.lexsort((win, shape, name))
    name, shape, win = name[order], shape[order], win[order]
    new_pair = np.ones(idx.size, dtype=bool)
    new_pair[1:] = (name[1:] != name[:-1]) | (shape[1:] != shape[:-1])
    new_step = new_pair.copy()
    new_step[1:] |= win[1:] != win[:-1]
    step_group = np.cumsum(new_step) - 1
    per = np.bincount(step_group)[step_group]  # launches of its (name, shape) in its step
    starts = np.flatnonzero(new_pair)
    same = np.minimum.reduceat(per, starts) == np.maximum.reduceat(per, starts)
    out = np.zeros_like(ok)
    out[idx[order]] = same[np.cumsum(new_pair) - 1]
    return out


RULE = Rule(id="kernel-duration-variance", title="Kernel duration varies across steps",
            severity="info", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="which of the runs is the normal one, the trace cannot say")
