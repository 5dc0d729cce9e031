"""Hidden memcpy: device copies your code did not ask for, and the op that made them.

What it detects
    Device copies (``Memcpy DtoD``/``HtoD``/``DtoH``, launched by
    ``cudaMemcpyAsync``) whose launch sits inside an op that is not itself a
    copy: walking up from the launch past ``aten::copy_`` / ``_to_copy`` / ``to``
    / ``clone`` / ``contiguous``, the first other op is the cause — e.g. the
    bias copy ``aten::addmm`` makes before its GEMM, the gradient copies of
    DDP's ``copy_bucket_to_grad``, or the copies inside a compiled function.
    Copies reached only through copy ops were written by you (``.to()``,
    ``.clone()``), and ops whose job is moving data (``cat``, ``stack``,
    ``index_put``, ``masked_fill``…) are not reported. Grouped by
    causing op and direction, with count, bytes and device time per step.

Why it matters
    ``addmm`` computes ``out = β·C + α·A·B`` and cuBLAS's epilogue needs ``C``
    already in the output buffer, so the bias is copied first (the guide's
    32 MB, ≈33 µs ``Memcpy DtoD`` before the GEMM): the "fused" bias add is not
    free. Copies inside other ops (indexing with host tensors, ``nonzero``,
    ``masked_select``) move data you may not know about and, device→host,
    synchronise. Their device time is what avoiding them saves.

How to fix
    Find the causing op in the evidence. For a bias copy: a 1-D bias broadcast
    over the rows (what ``nn.Linear`` passes) can use cuBLASLt's bias epilogue
    on recent PyTorch builds, with no copy; a full-size ``C`` cannot — add it
    in place after ``torch.mm`` (``out = x @ w; out += b``) or let
    ``torch.compile`` fuse the add into a neighbouring kernel. For DDP's
    gradient copies: ``DistributedDataParallel(model, gradient_as_bucket_view=True)``.
    For
    index/nonzero copies: keep indices on the device and avoid data-dependent
    shapes in the loop (``torch.where`` instead of ``nonzero``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.replay.changes import device_removed_change
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import innermost_op, launching_op
from tb_diagnostics.rules._util import (
    MAX_EVIDENCE,
    change_saving,
    fmt_bytes,
    fmt_count,
    fmt_us,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule, evidence
from tb_diagnostics.trace.categories import Kind

#: Ops that are copies: a memcpy reached only through these was asked for.
COPY_OPS = frozenset({"aten::copy_", "aten::_to_copy", "aten::to", "aten::clone",
                      "aten::contiguous", "aten::_copy_from", "aten::_copy_from_and_resize",
                      "aten::copy", "aten::lift_fresh_copy"})
#: Ops whose job is moving data: their copies are what you asked for.
DATA_MOVEMENT_OPS = frozenset({
    "aten::cat", "aten::_cat", "aten::stack", "aten::index", "aten::index_put",
    "aten::index_put_", "aten::_index_put_impl_", "aten::slice_scatter",
    "aten::select_scatter", "aten::masked_fill", "aten::masked_fill_",
    "aten::masked_scatter", "aten::masked_scatter_", "aten::scatter", "aten::scatter_",
    "aten::constant_pad_nd", "aten::pad", "aten::repeat", "aten::narrow_copy", "aten::roll",
    "aten::flip", "aten::index_select", "aten::index_copy", "aten::index_copy_"})
_DIRECTION = re.compile(r"^Memcpy (\w+)")


@dataclass(frozen=True)
class Thresholds:
    #: Report a causing op when its hidden copies take at least this much device
    #: time per step (µs).
    min_us_per_step: float = 10.0
    #: Report at most this many causing ops.
    max_findings: int = 3


def hidden_copies(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """(memcpy rows, the non-copy op that caused each) for copies nobody wrote."""
    m = analysis.model
    acts = m.device_activity_rows
    is_copy = m.kind[acts] == Kind.MEMCPY
    copies = acts[is_copy]
    op = launching_op(analysis)[is_copy].astype(np.int64)
    inner = innermost_op(analysis)
    copy_ids = np.asarray([m.name_index[n] for n in COPY_OPS if n in m.name_index],
                          dtype=np.int32)
    # Climb past copy ops; what is left (or -1) is the cause.
    live = np.flatnonzero(op >= 0)
    live = live[np.isin(m.name[op[live]], copy_ids)]
    while live.size:
        op[live] = inner[op[live]]
        live = live[op[live] >= 0]
        live = live[np.isin(m.name[op[live]], copy_ids)]
    moving = np.asarray([m.name_index[n] for n in DATA_MOVEMENT_OPS if n in m.name_index],
                        dtype=np.int32)
    keep = op >= 0
    keep[keep] = ~np.isin(m.name[op[keep]], moving)
    return copies[keep], op[keep]


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    if analysis.cpu_only:
        return []
    m = analysis.model
    copies, cause = hidden_copies(analysis)
    if not copies.size:
        return []
    warm = warm_steps(analysis)
    steps_n = warm.n
    win = (analysis.activity_step[np.searchsorted(m.device_activity_rows, copies)]
           if len(analysis.host_steps) else np.zeros(copies.size, dtype=np.int64))
    keep = warm.in_warm(win)
    copies, cause, win = copies[keep], cause[keep], win[keep]
    if not copies.size:
        return []
    direction = np.asarray([(_DIRECTION.match(m.name_of(r)) or [None, "?"])[1]
                            for r in copies.tolist()])
    keys = {}
    for i, (c, d) in enumerate(zip(m.name[cause].tolist(), direction.tolist(), strict=True)):
        keys.setdefault((c, d), []).append(i)
    groups = []
    for (c, d), idx in keys.items():
        idx = np.asarray(idx)
        dev = float(m.dur[copies[idx]].sum())
        if dev / steps_n >= th.min_us_per_step:
            groups.append((dev, c, d, idx))
    groups.sort(key=lambda g: -g[0])
    out = []
    for dev, c, d, idx in groups[: th.max_findings]:
        rows = copies[idx]
        nbytes = m.nbytes[rows]
        nb = float(np.nansum(nbytes))
        steps = step_numbers(analysis, win[idx])
        worst = idx[np.argsort(-m.dur[rows], kind="stable")][:3]
        ev = []
        for i in worst.tolist():
            ev.append(evidence(analysis, int(copies[i]), f"{fmt_bytes(m.nbytes[copies[i]])} "
                               f"copied for {m.strings[c]}"))
            ev.append(evidence(analysis, int(cause[i]), "the op that made the copy"))
            launcher = int(m.launcher[copies[i]])
            if launcher >= 0:
                ev.append(evidence(analysis, launcher, "the copy's launch"))
        if warm.has_steps:
            bytes_text = f", {fmt_bytes(nb / steps_n)}" if nb > 0 else ""
            figures = (f"{fmt_count(idx.size / steps_n)} per step{bytes_text}, "
                       f"{fmt_us(dev / steps_n)} of device time per step")
        else:
            figures = (f"{fmt_bytes(nb)}, " if nb > 0 else "") + f"{fmt_us(dev)} of device time"
        out.append(Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title, subject=f"{m.strings[c]} {d}",
            message=(f"{m.strings[c]} makes {d} copies you did not write: {idx.size} in "
                     f"{steps_text(steps)} ({figures}), launched by "
                     "cudaMemcpyAsync inside it."),
            steps=steps or warm.steps(analysis), evidence=ev[:MAX_EVIDENCE],
            # Replayed without these copies (their device time gone, the rest as it was).
            savings_us=change_saving(analysis, device_removed_change(analysis, rows), steps),
            confirm=("select the copy in the trace and follow its launch flow to the op; the "
                     "copy disappears when that op is replaced (e.g. aten::mm + an in-place "
                     "add)")))
    return out


RULE = Rule(id="hidden-memcpy", title="Copies you did not write", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__)
