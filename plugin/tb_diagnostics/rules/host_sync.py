"""Host syncs inside steps: ``.item()``, ``torch.cuda.synchronize()``, blocking copies.

What it detects
    Calls inside a step that block the host until the device catches up:
    ``cudaDeviceSynchronize`` / ``cudaStreamSynchronize`` / ``cudaEventSynchronize``
    (and their driver and HIP twins), synchronous ``cudaMemcpy``, and
    ``cudaMemcpyAsync`` copies to pageable host memory (which CUDA runs
    synchronously). Each is tied to the op that issued it (``aten::item`` →
    ``aten::_local_scalar_dense``, ``aten::copy_``…) and, where the trace has
    stacks, to the Python code that called it: the innermost frame outside torch
    and the standard library (``python_function`` frames name the function with
    the line it starts at; a 2021 ``Call stack`` names the calling line). Calls at
    the same site are grouped. The
    profiler's own flush sync is excluded (see ``profiler-flush-sync``).

Why it matters
    While the host waits it launches nothing, so once the device drains its
    queue it sits idle until the host has launched new work and that work
    arrives. The message gives that device idle time: from the
    sync's start to the first device activity after it when the device was busy
    as the sync began, at most the sync's own duration (the host's work after it
    is not the sync's); only the sync's own idle time when it was idle already
    (the host was behind anyway). The saving replays the site's syncs without
    their wait, over the warm steps among the site's: one part of the ``syncs``
    what-if card, which lists it with the same figure.
    Nsight Systems' ``cuda_api_sync`` rule lists the same calls; HTA's runtime
    outlier cut-off is 50 µs.

How to fix
    Keep values on the device and read them rarely: accumulate
    ``running_loss += loss.detach()`` and call ``.item()`` every N steps instead of
    every step; avoid ``print(tensor)``, ``tensor.cpu()``, ``if tensor:`` and
    ``torch.nonzero`` in the loop; time with ``torch.cuda.Event(enable_timing=True)``
    instead of ``torch.cuda.synchronize()``; copy to the host with
    ``x.to("cpu", non_blocking=True)`` into pinned memory. Find every such call
    with ``torch.cuda.set_sync_debug_mode("warn")``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import covered
from tb_diagnostics.analysis.replay.changes import sync_change
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.hierarchy import innermost_op, outermost_op
from tb_diagnostics.analysis.views.pystack import python_stack, user_frame
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    WarmSteps,
    change_savings,
    fmt_us,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Evidence, Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind

#: Runtime/driver calls that block the host until the device is done.
BLOCKING_CALL = re.compile(
    r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$|^cu(?:Ctx|Stream|Event)Synchronize$"
    r"|^(?:cuda|hip)Memcpy(?:2D|3D)?$"
)
#: Device copies CUDA runs synchronously although launched with cudaMemcpyAsync.
PAGEABLE_DTOH = re.compile(r"^Memcpy DtoH \(Device -> Pageable\)")
_TORCH_SYNC = re.compile(r"torch/cuda/__init__\.py\(\d+\): synchronize$")


@dataclass(frozen=True)
class Thresholds:
    #: A site is reported when the device idle it causes reaches this much per step
    #: (µs; HTA's runtime-call outlier cut-off is the same 50 µs).
    min_idle_per_step_us: float = 50.0
    #: Findings whose device idle per step reaches this share of a warm step are critical.
    critical_share: float = 0.2


@dataclass
class _Site:
    label: str
    frame: tuple[int, str] | None
    calls: list[int] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)
    windows: set[int] = field(default_factory=set)


def blocking_calls(analysis: SpanAnalysis) -> np.ndarray:
    """Host rows that block on the device, profiler flush excluded."""
    m = analysis.model
    rows = m.rows_matching(BLOCKING_CALL)
    rows = rows[np.isin(m.kind[rows], (Kind.RUNTIME, Kind.DRIVER))]
    acts = m.device_activity_rows
    # The pattern is anchored: its ``search`` is its ``match``.
    copies = acts[np.isin(m.name[acts], m.name_ids_matching(PAGEABLE_DTOH))]
    launchers = m.launcher[copies]
    rows = sorted_sets.union1d(rows, launchers[launchers >= 0])
    return sorted_sets.setdiff1d(rows, profiler_artefacts(analysis).rows)


def _idle_caused(analysis: SpanAnalysis, row: int, window_end: float) -> tuple[float, int]:
    """Device idle the sync causes, and the first device activity after it.

    If the device was busy when the sync began, the host could have kept it fed:
    the device idle from the sync's start to the next device activity is the
    sync's, but no more than the call's own duration: freed, the host would still
    do its own work before the next launch (a sync of 0.9 ms followed by 75 ms of
    host work causes 0.9 ms of the idle, not 75 ms). If it was already idle, the
    host was behind anyway and the sync only adds its own duration to the wait.
    """
    m = analysis.model
    acts = m.device_activity_rows
    j = int(np.searchsorted(m.start[acts], m.end[row], side="left"))
    nxt = int(acts[j]) if j < acts.size else -1
    lo = float(m.start[row])
    busy_iv = analysis.busy_intervals
    k = int(np.searchsorted(busy_iv.start, lo, side="right")) - 1
    busy_at_start = k >= 0 and busy_iv.end[k] > lo
    hi = (min(float(m.start[nxt]) if nxt >= 0 else window_end, window_end) if busy_at_start
          else float(m.end[row]))
    if hi <= lo:
        return 0.0, nxt
    busy = float(covered(busy_iv, np.asarray([lo]), np.asarray([hi]))[0])
    return min(max(hi - lo - busy, 0.0), float(m.dur[row])), nxt


def _site_label(analysis: SpanAnalysis, row: int) -> str:
    m = analysis.model
    top = int(outermost_op(analysis)[row])
    inner = int(innermost_op(analysis)[row])
    if top >= 0:
        label = m.name_of(top)
        if inner >= 0 and inner != top:
            label += f" → {m.name_of(inner)}"
        return f"{label} → {m.name_of(row)}"
    if any(_TORCH_SYNC.search(name) for _, name in python_stack(analysis, row)[:3]):
        return f"torch.cuda.synchronize() → {m.name_of(row)}"
    return m.name_of(row)


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only:
        return []
    rows = blocking_calls(analysis)
    win = window_of_rows(analysis, rows)
    rows, win = rows[win >= 0], win[win >= 0]
    windows = analysis.windows
    sites: dict[tuple[str, str | None], _Site] = {}
    for r, k in zip(rows.tolist(), win.tolist(), strict=True):
        label = _site_label(analysis, r)
        frame = user_frame(analysis, r)
        site = sites.setdefault((label, frame[1] if frame else None), _Site(label, frame))
        idle, _ = _idle_caused(analysis, r, windows[k].end)
        site.calls.append(r)
        site.idle.append(idle)
        site.windows.add(k)
    warm = warm_steps(analysis)
    out = []
    for site in sites.values():
        # Per warm step: a sync the cold step alone ran is one-time cost (cold-start-step).
        in_warm = warm.in_warm(window_of_rows(analysis, np.asarray(site.calls)))
        per_step = float(np.asarray(site.idle)[in_warm].sum()) / warm.n
        if per_step < th.min_idle_per_step_us:
            continue
        out.append(_finding(analysis, site, per_step, warm, th))
    return out


def _subject(analysis: SpanAnalysis, site: _Site) -> str:
    """``aten::item → cudaMemcpyAsync in train_step (train.py:42)``: the op and call that
    sync, and the user's line that called them."""
    m = analysis.model
    row = site.calls[0]
    top = int(outermost_op(analysis)[row])
    subject = (f"{m.name_of(top)} → {m.name_of(row)}" if top >= 0 and top != row
               else site.label.rsplit(" → ", 1)[0] if " → " in site.label else site.label)
    if site.frame:
        where, _, func = site.frame[1].partition(": ")
        file, _, line = where.rpartition("(")
        file = file.rsplit("/", 1)[-1]
        subject += (f" in {func} ({file}:{line.rstrip(')')})" if func and file
                    else f" from {site.frame[1]}")
    return subject


def _position(analysis: SpanAnalysis, row: int, k: int) -> str:
    w = analysis.windows[k]
    if w.step is None:
        return "in the span"
    span = max(w.host_end - w.host_start, 1e-9)
    at = (analysis.model.start[row] - w.host_start) / span
    where = "at the start of" if at < 0.1 else "at the end of" if at > 0.9 else "in"
    return f"{where} step {w.step}"


def _finding(analysis: SpanAnalysis, site: _Site, per_step: float, warm: WarmSteps,
             th: Thresholds) -> Finding:
    m = analysis.model
    calls = np.asarray(site.calls)
    idle = np.asarray(site.idle)
    worst = int(calls[np.argmax(m.dur[calls])])
    worst_k = int(window_of_rows(analysis, np.asarray([worst]))[0])
    steps = [analysis.windows[k].step for k in sorted(site.windows)]
    caller = f", called from {site.frame[1]}" if site.frame else ""
    if len(calls) == 1:
        head = (f"{site.label} blocked the host {fmt_us(m.dur[worst])} "
                f"{_position(analysis, worst, worst_k)}{caller}")
    else:
        head = (f"{site.label} blocked the host {len(calls)} times in {steps_text(steps)} "
                f"({fmt_us(m.dur[calls].sum())} in all, longest {fmt_us(m.dur[worst])} "
                f"{_position(analysis, worst, worst_k)}){caller}")
    share = float(warm.share(per_step))
    message = (f"{head}; the device sat idle {fmt_us(idle.sum())} because of it "
               f"({fmt_us(per_step)} {warm.per}, {warm.share_text(per_step)}).")
    severity = "critical" if share >= th.critical_share else RULE.severity
    # Replayed: without these calls' waits the host runs ahead; the device work stays.
    # One part of the `syncs` what-if card, which lists it with this same figure: the
    # median over the warm steps among these (a cold step's syncs are one-time).
    saving = change_savings(analysis, sync_change(analysis, calls), steps)
    return Finding(
        rule=RULE.id, severity=severity, title=RULE.title, message=message, steps=steps,
        subject=_subject(analysis, site),
        evidence=_evidence(analysis, site, calls, idle),
        savings_us=None if saving is None else saving.saves_us,
        savings_total_us=None if saving is None else saving.saves_us_total,
        confirm=("run with torch.cuda.set_sync_debug_mode('warn') to see each synchronizing "
                 "call with its Python line; remove or defer it and re-profile: the device "
                 "idle after it should close"))


def _evidence(analysis: SpanAnalysis, site: _Site, calls: np.ndarray,
              idle: np.ndarray) -> list[Evidence]:
    m = analysis.model
    out: list[Evidence] = []
    for i in np.argsort(-m.dur[calls], kind="stable")[:3].tolist():
        r = int(calls[i])
        out.append(evidence(analysis, r, f"blocks the host; device idle {fmt_us(idle[i])}"))
        top = int(outermost_op(analysis)[r])
        if top >= 0:
            out.append(evidence(analysis, top, "the op that synchronizes"))
        frame = user_frame(analysis, r)
        if frame and frame[0] >= 0:
            out.append(evidence(analysis, frame[0], "the Python line that called it"))
        k = int(window_of_rows(analysis, np.asarray([r]))[0])
        _, nxt = _idle_caused(analysis, r, analysis.windows[k].end)
        if nxt >= 0:
            out.append(evidence(analysis, nxt, "first device work after the sync"))
    return out[:MAX_EVIDENCE]


RULE = Rule(id="host-sync", title="Host sync inside a step", severity="warning", check=check,
            thresholds=Thresholds(), doc=__doc__,
            escalation=("critical when the device idle it causes is critical_share or more of a "
                        "warm step"))
