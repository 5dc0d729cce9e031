"""DataLoader bottleneck: the device waits for the next batch a large share of the step.

What it detects
    Steps in which the device is idle while the host is inside the DataLoader
    (``enumerate(DataLoader)#…__next__`` or ``dataloader.py(…): __next__``):
    the ``input`` idle of the step verdict, as a share of the step's wall time,
    over all steps. torch-tb-profiler recommends action above 5 % of the step;
    xprof calls input ≥ 5 % "moderate" and ≥ 20 % "high" — the two thresholds
    here (warning, critical).

Why it matters
    Every microsecond the device waits for a batch is lost throughput, and it
    does not shrink with faster kernels. A single-process loader
    (``_SingleProcessDataLoaderIter``, i.e. ``num_workers=0``) decodes and
    augments on the training thread, in series with the step.

How to fix
    Load in parallel and ahead of the step:
    ``DataLoader(ds, batch_size=…, num_workers=4, pin_memory=True,
    prefetch_factor=2, persistent_workers=True)``, then copy with
    ``x.to(device, non_blocking=True)``. If the workers are already busy, move
    heavy augmentation to the GPU or pre-process the data set once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import (
    evidence_rows,
    fmt_pct,
    fmt_us,
    replayed_saving,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Input share of the step at which the rule fires (torch-tb-profiler: > 5 %).
    min_share: float = 0.05
    #: Share at which it is critical (xprof: input ≥ 20 % is "high").
    high_share: float = 0.20


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    windows = analysis.windows
    if not windows or not analysis.input_rows.size:
        return []
    warm = warm_steps(analysis)
    wall = windows.columns.wall_us[warm.index].astype(np.float64)
    idle = windows.columns.idle["input"][warm.index].astype(np.float64)
    if wall.sum() <= 0:
        return []
    share = float(idle.sum() / wall.sum())
    if share < th.min_share:
        return []
    worst_w = windows[int(warm.index[int(np.argmax(idle))])]
    worst = int(np.argmax(idle))
    steps = warm.steps(analysis)
    m = analysis.model
    rows = analysis.input_rows
    names = {m.name_of(r) for r in rows.tolist()}
    single = any("_SingleProcessDataLoaderIter" in n for n in names)
    how = (" The loader runs in the training process (_SingleProcessDataLoaderIter: "
           "num_workers=0)." if single else "")
    per_step = float(idle.mean())
    # The slowest batches first, as evidence.
    order = np.argsort(-m.dur[rows], kind="stable")
    ev = evidence_rows(analysis, rows[order], "host fetching the next batch")
    if warm.has_steps:
        message = (f"The device waited for input {fmt_pct(share)} of the time in "
                   f"{steps_text(steps)}{warm.cold_note}: {fmt_us(per_step)} of a mean "
                   f"{fmt_us(wall.mean())} per step (worst: step {worst_w.step}, "
                   f"{fmt_us(idle[worst])} = {fmt_pct(idle[worst] / wall[worst])}).{how}")
    else:
        message = (f"The device waited for input {fmt_pct(share)} of the span: "
                   f"{fmt_us(per_step)} of {fmt_us(wall.sum())}.{how}")
    win = window_of_rows(analysis, rows)
    win = win[warm.in_warm(win)]
    in_steps = sorted(set(step_numbers(analysis, win)), key=lambda s: s or 0)
    named = in_steps or steps
    return [Finding(
        rule=RULE.id, severity="critical" if share >= th.high_share else RULE.severity,
        title=RULE.title, message=message, steps=named, evidence=ev,
        # What the step would take without the wait, replayed: the device may still be
        # busy with the previous step's work, so it is less than the idle time. The
        # `input` what-if card's number: the warm steps' saving, per step.
        savings_us=replayed_saving(analysis, "input"),
        confirm=("time a loop that only iterates the DataLoader (no model): if one batch "
                 "takes about this long, loading is the bottleneck; the input share should "
                 "fall when num_workers > 0"))]


RULE = Rule(id="dataloader-bottleneck", title="DataLoader bottleneck", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__,
            escalation="critical when the device waits for input high_share or more of the time")
