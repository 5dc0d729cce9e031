"""Pageable memcpy: host→device copies from pageable (unpinned) memory.

What it detects
    ``Memcpy HtoD (Pageable -> Device)`` activities inside steps, with the
    ``cudaMemcpyAsync`` that launched them, the op (``aten::copy_`` under
    ``aten::to``) and, where the trace has stacks, the Python line. CUPTI names
    the source memory kind in the copy's name since 2021; older traces that do
    not are not judged. Nsight Systems' ``cuda_memcpy_async`` rule is the same
    check ("Async Memcpy with Pageable Memory").

Why it matters
    The device can only DMA from pinned memory. From pageable memory the
    driver first copies into a pinned staging buffer, and
    ``cudaMemcpyAsync`` turns synchronous: the host blocks for the whole copy,
    cannot launch anything meanwhile, and the copy cannot overlap compute —
    ``non_blocking=True`` has no effect. The finding says what the host link (PCIe
    generation and width of the part, NVLink-C2C on Grace parts) allows per direction
    and what share of it the copies reached: the staging copy on the host usually keeps
    pageable copies well below it. The saving replays the copies' calls as from
    pinned memory (they return in 5 µs): one part of the ``syncs`` what-if card,
    which lists it with the same figure.

How to fix
    Pin the source and copy asynchronously:
    ``DataLoader(..., pin_memory=True)`` then
    ``x = x.to(device, non_blocking=True)``; for tensors you build yourself,
    ``x = x.pin_memory()`` once (or allocate with ``pin_memory=True``) and reuse
    the buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.cost.host_link import host_link
from tb_diagnostics.analysis.replay.changes import pinned_change
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import launching_op, outermost_op
from tb_diagnostics.analysis.views.pystack import user_frame
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    change_savings,
    fmt_bytes,
    fmt_count,
    fmt_pct,
    fmt_us,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence
from tb_diagnostics.trace.categories import PAGEABLE_HTOD


@dataclass(frozen=True)
class Thresholds:
    #: Report when the pageable copies block the host at least this long per step (µs).
    min_host_us_per_step: float = 10.0


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only:
        return []
    m = analysis.model
    acts = m.device_activity_rows
    sel = np.isin(m.name[acts], m.name_ids_matching(PAGEABLE_HTOD))
    win = (analysis.activity_step if len(analysis.host_steps)
           else np.zeros(acts.size, dtype=np.int64))
    warm = warm_steps(analysis)
    sel &= warm.in_warm(win)
    if not sel.any():
        return []
    copies, cwin = acts[sel], win[sel]
    launcher = m.launcher[copies]
    steps_n = warm.n
    host = float(m.dur[launcher[launcher >= 0]].sum()) / steps_n
    if host < th.min_host_us_per_step:
        return []
    nbytes = float(np.nansum(m.nbytes[copies])) / steps_n
    dev = float(m.dur[copies].sum()) / steps_n
    op_of = launching_op(analysis)[sel]
    top = outermost_op(analysis)
    who = sorted({m.name_of(int(top[o])) for o in op_of.tolist() if o >= 0})
    frame = None
    for r in launcher[launcher >= 0].tolist():
        frame = user_frame(analysis, r)
        if frame:
            break
    where = f", called from {frame[1]}" if frame else ""
    ev = []
    for i in np.argsort(-m.dur[copies], kind="stable")[:3].tolist():
        ev.append(evidence(analysis, int(copies[i]), f"{fmt_bytes(m.nbytes[copies[i]])} from "
                           "pageable memory"))
        if launcher[i] >= 0:
            ev.append(evidence(analysis, int(launcher[i]), "blocks the host for the copy"))
        if op_of[i] >= 0:
            ev.append(evidence(analysis, int(top[op_of[i]]), "the op that copies"))
    if frame and frame[0] >= 0:
        ev.append(evidence(analysis, frame[0], "the Python line"))
    steps = step_numbers(analysis, cwin)
    link = host_link(m.device_name, m.used_device_properties)
    link_text = ""
    if link is not None and dev > 0 and nbytes > 0:
        rate = nbytes / (dev * 1e3)  # GB/s
        link_text = (f" The host link ({link.name}) allows {link.gbps:g} GB/s per direction; "
                     f"these copies reach {rate:.1f} GB/s ({fmt_pct(rate / link.gbps)} of it).")
    # Replayed with pinned memory: the copies' calls return at once. One part of the
    # `syncs` what-if card, which lists it with this same figure.
    saving = change_savings(analysis, pinned_change(analysis, launcher[launcher >= 0]), steps)
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{fmt_count(copies.size / steps_n)} host→device copies {warm.per} from "
                 f"pageable memory ({fmt_bytes(nbytes)}, {fmt_us(dev)} on the device)"
                 f"{' in ' + steps_text(steps) if warm.has_steps else ''}; their "
                 f"cudaMemcpyAsync blocks the host {fmt_us(host)} {warm.per}"
                 f"{' (' + ', '.join(who) + ')' if who else ''}{where}.{link_text}"),
        steps=steps, evidence=ev[:MAX_EVIDENCE],
        savings_us=None if saving is None else saving.saves_us,
        savings_total_us=None if saving is None else saving.saves_us_total,
        confirm=("after pin_memory=True the copies are named 'Memcpy HtoD (Pinned -> Device)' "
                 "and their cudaMemcpyAsync returns in a few µs"))]


RULE = Rule(id="pageable-memcpy", title="Copies from pageable host memory", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__)
