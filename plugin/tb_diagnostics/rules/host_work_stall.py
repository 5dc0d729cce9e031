"""The device idles while the thread that feeds it runs code that launches nothing.

What it detects
    Warm steps whose device sits idle for at least ``min_share`` of the step while a host
    thread that launches the device's work runs code of its own: a stretch of at least
    1 ms (``views.host_work.HOST_WORK_MIN_US``) in which that thread, and every other
    thread that feeds the device, starts no torch op and no runtime call (video decoding,
    numpy resizing and normalising, tokenising, Python bookkeeping). It is the part of the
    verdict's ``launch`` cause (``steps[].idle_host_work_us``) that is not dispatch:
    per-op dispatch costs µs to tens of µs, so 1 ms without a call is no dispatch. The
    finding names the longest stretch, the innermost Python frame or ``record_function``
    label covering it, and the calls before and after it.

Why it matters
    The device has nothing queued while that code runs, so the step is as long as the
    host's work plus the device's. CUDA graphs and ``torch.compile`` cannot help: they
    remove dispatch and launch overhead, and this code issues no device work to capture.
    The saving is the ``host-work`` what-if card's: the span replayed with the stretches'
    time gone from their thread (as the ``input`` card removes a DataLoader's wait), what
    moving the work off that thread gains, the device's work staying as it is.

How to fix
    Take the work off the thread that feeds the device: preprocess in ``DataLoader``
    workers (``num_workers > 0``, ``pin_memory=True``) or ahead of time (cache decoded and
    resized inputs), do it on the device (``torchvision.transforms.v2`` on CUDA tensors,
    ``torchvision.io.decode_jpeg(device="cuda")``, NVIDIA DALI), or overlap it with the
    previous step's device work (a background thread or process that prepares batch N+1
    while the device runs batch N). For an inference pipeline, batch the requests and
    run its preprocessing in a separate worker pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.host_work import HOST_WORK_MIN_US, host_work
from tb_diagnostics.rules._util import fmt_us, replayed_saving, warm_steps
from tb_diagnostics.rules.base import Evidence, Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind


@dataclass(frozen=True)
class Thresholds:
    #: Reported when the device idles this share of a warm step (time-weighted over the
    #: warm steps) while the host runs its own code: a tenth of the step is worth moving.
    min_share: float = 0.10
    #: Critical from this share: the host's own code is most of the step.
    critical_share: float = 0.5


def _neighbours(analysis: SpanAnalysis, a: float, b: float) -> tuple[int, int]:
    """The dispatch call (op or runtime) that ends last before ``a`` and the first that
    starts at or after ``b`` (-1 where none): what the stretch lies between."""
    m = analysis.model
    calls = sorted_sets.union1d(analysis.op_rows, m.rows_of({Kind.RUNTIME, Kind.DRIVER}))
    after = calls[m.start[calls] >= b]
    before = calls[m.end[calls] <= a]
    nxt = int(after[0]) if after.size else -1
    prev = int(before[np.argmax(m.end[before])]) if before.size else -1
    return prev, nxt


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only:  # the CPU is the device: no idle accelerator waits for it
        return []
    hw = host_work(analysis)
    warm = warm_steps(analysis)
    if not warm.index.size or not hw.by_lane:
        return []
    per_step = float(warm.per_window(hw.idle_us))
    share = float(warm.share(per_step))
    if share < th.min_share:
        return []
    idx = warm.index
    k = int(idx[np.argmax(hw.longest_us[idx])])
    us, a, b = (float(hw.longest_us[k]), float(hw.longest_start[k]),
                float(hw.longest_end[k]))
    m = analysis.model
    frame = int(hw.longest_frame[k])
    lane = m.lanes[int(hw.longest_lane[k])].label
    where = f" in `{m.name_of(frame)}`" if frame >= 0 else ""
    step = analysis.windows[k].step
    at = f" of step {step}" if step is not None else ""
    steps = warm.steps(analysis)
    # The `host-work` what-if card's number (the finding claims it: one number for both).
    saving = replayed_saving(analysis, "host-work")
    message = (f"The device sat idle {fmt_us(per_step)} per step ({warm.share_text(per_step)}"
               f"{warm.cold_clause}) while the host ran code that launches no device work "
               f"(no op or runtime call for {fmt_us(HOST_WORK_MIN_US)} or more); the longest "
               f"stretch{at}: {fmt_us(us)}{where} on {lane}. CUDA graphs and torch.compile "
               "will not shorten it: the code issues no device work to capture.")
    if saving is not None and saving > 0:
        # Beside the device idle in the stretches: the replay may find less (later
        # device work or a sync that held the step anyway).
        message += (f" Moving that work off the thread saves {fmt_us(saving)} "
                    f"per step (replayed; the device idles {fmt_us(per_step)} in it).")
    else:
        message += (" The replay finds no step shorter without that work: later device work "
                    "or a sync holds each step's end anyway.")
    return [Finding(
        rule=RULE.id, severity="critical" if share >= th.critical_share else RULE.severity,
        title=RULE.title, message=message, steps=steps,
        subject=m.name_of(frame) if frame >= 0 else None,
        evidence=_evidence(analysis, frame, a, b, us),
        savings_us=saving,
        confirm=("profile with with_stack=True and read the stretch's Python frames: no "
                 "aten:: op or cudaLaunch* call runs under them; move the work to DataLoader "
                 "workers (or ahead of time) and re-profile: the device idle there closes"))]


def _evidence(analysis: SpanAnalysis, frame: int, a: float, b: float,
              us: float) -> list[Evidence]:
    out = []
    if frame >= 0:
        out.append(evidence(analysis, frame, f"covers the longest stretch ({fmt_us(us)} of "
                                             "device idle, no op or runtime call)"))
    prev, nxt = _neighbours(analysis, a, b)
    if prev >= 0:
        out.append(evidence(analysis, prev, "the last call before the stretch"))
    if nxt >= 0:
        out.append(evidence(analysis, nxt, "the first call after it"))
    return out


RULE = Rule(id="host-work-stall", title="Device idle while the host runs its own code",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            escalation="critical when it is critical_share or more of a warm step")
