"""What would a fix save? Each change replayed (:mod:`..replay`), and all of them together.

A projection is the span's windows replayed with one change: their walls before and
after. Savings read from it are per step (the median over the steps asked for), so two
findings that propose the same change claim the same time once, and the projection of
every change together shows what fixing all of them gives: savings do not add up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.replay.changes import (
    ASSUMES,
    amp_change,
    combine,
    fusion_change,
    graphs_change,
    input_change,
    launch_change,
    profiler_change,
    sync_change,
)
from tb_diagnostics.analysis.replay.engine import Change, replay
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts

#: Per-step savings whose standard deviation exceeds this fraction of their mean differ
#: widely: the what-if card gives their total next to the median.
UNEVEN_SAVING_CV = 0.5


@dataclass(frozen=True)
class Projection:
    id: str
    change: str  # one sentence
    rules: tuple[str, ...]  # the rules that propose it
    assumes: str
    before_us: np.ndarray  # per window
    after_us: np.ndarray

    def saving(self, windows: Iterable[int] | None = None) -> float:
        """Median saving per step over ``windows`` (all when None)."""
        return median_saving(self.before_us, self.after_us, windows)

    def step_savings(self, windows: Iterable[int] | None = None) -> np.ndarray:
        """Each of ``windows``' (all when None) saving, never below zero: removing work
        does not lengthen a step, so a replayed step a few µs longer is the replay's
        noise, not a cost (the findings' savings are clipped the same way)."""
        diff = np.maximum(self.before_us - self.after_us, 0.0)
        return diff if windows is None else diff[list(windows)]

    def total_saving(self, windows: Iterable[int] | None = None) -> float:
        """The steps' savings added up: the time the span saves."""
        return float(self.step_savings(windows).sum())

    def uneven(self, windows: Iterable[int] | None = None) -> bool:
        """Whether the steps' savings differ widely (coefficient of variation above
        :data:`UNEVEN_SAVING_CV`): then the median of one step says little of the span,
        whose 11 slow input-bound steps may save seconds while 15 others save nothing."""
        saved = self.step_savings(windows)
        if saved.shape[0] < 2:
            return False
        mean = float(saved.mean())
        return mean > 0 and float(saved.std()) > UNEVEN_SAVING_CV * mean


def median_saving(before_us: np.ndarray, after_us: np.ndarray,
                  windows: Iterable[int] | None = None) -> float:
    """The median over ``windows`` (all when None) of each window's saving."""
    diff = before_us - after_us
    idx = list(range(diff.shape[0])) if windows is None else list(windows)
    return float(np.median(diff[idx])) if idx else 0.0


def _user_syncs(analysis: SpanAnalysis) -> Change | None:
    art = profiler_artefacts(analysis)
    rows = analysis.model.without(analysis.sync_rows, art.flush_syncs)
    return sync_change(analysis, rows)


#: (id, the change in a sentence, the rules proposing it, how to build it)
CHANGES: list[tuple[str, str, tuple[str, ...], Callable[[SpanAnalysis], Change | None]]] = [
    ("input", "The training thread no longer waits for the DataLoader.",
     ("dataloader-bottleneck", "gpu-idle-gap"), input_change),
    ("syncs", "The host no longer blocks in syncs (item(), synchronize(), pageable copies).",
     ("host-sync", "pageable-memcpy"), _user_syncs),
    ("profiler", "The profiler's own host time and flush sync are gone.",
     ("profiler-flush-sync", "profiler-buffer-request"), profiler_change),
    ("launch", "Each launch costs the host 5 µs, no more (less Python and dispatch per op).",
     ("tiny-kernels", "launch-delay", "high-call-count"), launch_change),
    ("graphs", "The step's launches are replayed as CUDA graphs.",
     ("tiny-kernels",), graphs_change),
    ("fusion", "Each chain of memory-bound kernels runs as one fused kernel.",
     ("memory-bound-chain",), fusion_change),
    ("amp", "fp32 GEMMs and convolutions run in bf16 (fp16 where there is no bf16).",
     ("fp32-matmul",), amp_change),
]


def replayed(analysis: SpanAnalysis, change: Change) -> tuple[np.ndarray, np.ndarray]:
    """(walls before, walls after) of every window, the change replayed."""
    before = np.asarray([w.wall_us for w in analysis.windows])
    return before, replay(analysis, change).wall_us


@computed
def projections(analysis: SpanAnalysis) -> list[Projection]:
    """One projection per change that applies to the span, then ``all`` of them."""
    out, changes = [], []
    for cid, sentence, rules, build in CHANGES:
        change = build(analysis)
        if change is None:
            continue
        changes.append(change)
        out.append(Projection(cid, sentence, rules, ASSUMES[cid], *replayed(analysis, change)))
    if len(changes) > 1:
        out.append(Projection(
            "all", "Every change above at once (savings do not add up: the changes overlap "
            "and the device work they leave still takes its time).",
            tuple(r for p in out for r in p.rules), "all of the above",
            *replayed(analysis, combine(changes))))
    return out


def projection(analysis: SpanAnalysis, change_id: str) -> Projection | None:
    return next((p for p in projections(analysis) if p.id == change_id), None)
