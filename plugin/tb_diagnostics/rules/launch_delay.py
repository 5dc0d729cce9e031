"""Launch delay: CPU launch → kernel start, first-launch lag vs steady-state queueing.

What it detects
    The delay from the end of each launch call (``cudaLaunchKernel``,
    ``cuLaunchKernel``, ``cudaMemcpyAsync``…) to the start of its device
    activity (HTA's ``launch_delay``), in two findings. The **first-launch
    lag**: the first kernel of the window starting long after its launch on an
    idle device — the profiler initialising (a profiler artefact, excluded from
    every other figure), reported with the steady-state figures for contrast.
    **Launch latency** (a warning): launches onto an idle device whose delay's
    90th percentile reaches ``cutoff_us`` (HTA's launch-delay outlier cut-off);
    only judged on single-stream spans without collectives, because with several
    streams a late start may be a wait for another stream's event or a
    collective's peer, which the trace does not show. Launches queued behind
    earlier work on their stream are *queueing* — the host is ahead, which is
    what a device-bound step looks like — and are reported as figures, never as
    a problem. A kernel's first launch that loads its module (``module-load``) is
    a one-time cost and is left out of both.

Why it matters
    Queueing is healthy: the host stays ahead and the device never waits.
    Latency on an idle device is lost time in every step. Mistaking the
    profiler's one-off first-launch lag (the guide's ~2.5 ms lane offset) for
    either sends you after a problem that is not there.

How to fix
    First-launch lag: nothing; warm up with ``schedule(wait=1, warmup=1, …)``.
    Latency: fewer, larger launches (``torch.compile``, CUDA graphs); check for
    contention on the host (other processes, the DataLoader's workers).
    Queueing: nothing to fix on the host; the kernels themselves are the cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.launch import launch_delays
from tb_diagnostics.rules._util import evidence_rows, fmt_us, step_numbers, top_by
from tb_diagnostics.rules.base import Finding, Rule, evidence

_COLLECTIVE = re.compile(r"^nccl|^rccl|^ncclDevKernel|ncclKernel")


@dataclass(frozen=True)
class Thresholds:
    #: HTA's launch-delay outlier cut-off (µs); the steady-state finding fires when
    #: the 90th percentile of the delays reaches it.
    cutoff_us: float = 100.0
    #: The percentile compared with the cut-off.
    percentile: float = 90.0
    #: Launches onto an idle stream needed before latency is judged.
    min_launches: int = 10


def _steady(ld, th: Thresholds) -> str:
    # A CUDA graph's kernels share one launch call: their delays are not launches'; a
    # module load is one-time.
    ok = ~ld.artefact & ~ld.graph & ~ld.module_load
    q, d = ld.queued[ok], ld.delay[ok]
    parts = []
    if q.any():
        parts.append(f"{int(q.sum())} queued behind earlier work on their stream wait a median "
                     f"{fmt_us(np.median(d[q]))} (the host running ahead: healthy)")
    if (~q).any():
        parts.append(f"{int((~q).sum())} onto an idle stream start a median "
                     f"{fmt_us(np.median(d[~q]))} after the call "
                     f"(p{th.percentile:.0f} {fmt_us(np.percentile(d[~q], th.percentile))})")
    return "; ".join(parts)


def _waits_invisible(analysis: SpanAnalysis) -> bool:
    """Several streams or collectives: a late start may be a wait the trace does not show."""
    m = analysis.model
    acts = m.device_activity_rows
    # int64 first: the columns may be as narrow as int8 (trace.model).
    streams = unique(m.device[acts].astype(np.int64) * (1 << 32) + m.stream[acts])
    return streams.size > 1 or bool(m.rows_matching(_COLLECTIVE).size)


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    ld = launch_delays(analysis)
    if not len(ld):
        return []
    m = analysis.model
    out = []
    art = profiler_artefacts(analysis)
    if art.first_launch >= 0:
        act = art.first_launch
        launcher = int(m.launcher[act])
        steps = step_numbers(analysis, ld.window[ld.acts == act]) or [None]
        steady = _steady(ld, th)
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title="First-launch lag (profiler artefact)",
            message=(f"The first device activity of the window, {m.name_of(act)}, started "
                     f"{fmt_us(art.first_launch_delay_us)} after its {m.name_of(launcher)} "
                     "returned, on an idle device: the profiler's first-launch offset, "
                     "excluded from the other findings."
                     + (f" Steady state: {steady}." if steady else "")),
            steps=steps,
            evidence=[evidence(analysis, launcher, "the first launch"),
                      evidence(analysis, act, f"starts {fmt_us(art.first_launch_delay_us)} "
                               "later")],
            savings_us=None,
            confirm="profile more steps: the lag appears once, at the first launch only",
            artefact=True))
    # Latency: nothing ran anywhere on the device, yet the activity started late. A
    # launch onto an idle stream of a busy device may be waiting on another stream
    # (an event, a collective): not counted.
    ok = ~ld.artefact & ~ld.queued & ~ld.device_busy & ~ld.graph & ~ld.module_load
    if ok.sum() < th.min_launches or _waits_invisible(analysis):
        return out
    delay = ld.delay[ok]
    p = float(np.percentile(delay, th.percentile))
    if p < th.cutoff_us:
        return out
    acts = ld.acts[ok]
    slow = delay >= th.cutoff_us
    ev = evidence_rows(analysis, top_by(acts[slow], delay[slow], 6),
                       "started late on an idle device")
    out.append(Finding(
        rule=RULE.id, severity="warning", title="Launch latency",
        message=(f"Kernels launched onto an idle device start late: p{th.percentile:.0f} "
                 f"{fmt_us(p)}, {int(slow.sum())} of {delay.size} launches ≥ "
                 f"{fmt_us(th.cutoff_us)} (steady state: {_steady(ld, th)})."),
        steps=step_numbers(analysis, ld.window[ok][slow]) or [None], evidence=ev,
        savings_us=None,
        confirm=("check the device lane: the late kernels start well after their launch "
                 "with nothing running on their stream; a host under contention (other "
                 "processes, DataLoader workers) shows the same pattern")))
    return out


RULE = Rule(id="launch-delay", title="Launch delay", severity="info", check=check,
            thresholds=Thresholds(), doc=__doc__,
            escalation="warning for launch latency on an idle device",
            no_saving=("launch latency is the driver's; the launch and graphs projections replay "
                       "cheaper host launches"))
