"""The span's verdict: the step verdict that holds for most of the warm time.

A span's steps can disagree: 11 input-bound iterations of 550 ms and 15
compute-bound ones of 160 ms. The span is what most of its time is, so each
verdict is weighed by the wall time of the warm steps that have it (the cold
step, ``views.warmth``, pays one-time costs and does not decide), not by how
many steps have it; the earliest step breaks a tie. ``split`` says how the warm
time divides, most first, so the headline can say it where no verdict holds at
least :data:`ONE_SIDED_SHARE` of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.warmth import step_walls

#: A verdict holding at least this share of the warm time says the span alone; below
#: it, the headline also says how the time splits between the verdicts.
ONE_SIDED_SHARE = 0.9


@dataclass(frozen=True)
class VerdictTime:
    """The warm steps of one verdict and the wall time they take together."""

    verdict: str
    steps: tuple[int | None, ...]
    wall_us: float

    def to_dict(self, total_us: float) -> dict[str, object]:
        return {"verdict": self.verdict, "steps": list(self.steps),
                "wall_us": round(self.wall_us, 3),
                "share": round(self.wall_us / total_us, 6) if total_us > 0 else 0.0}


@dataclass(frozen=True)
class SpanVerdict:
    verdict: str | None  # None for a span without windows
    split: tuple[VerdictTime, ...]  # by verdict over the warm steps, most time first
    warm_wall_us: float

    @property
    def one_sided(self) -> bool:
        """One verdict holds (nearly) all of the warm time: no split worth saying."""
        return len(self.split) <= 1 or self.split[0].wall_us >= ONE_SIDED_SHARE * \
            self.warm_wall_us


def verdict_by_time(steps: Iterable[tuple[int | None, str, float]]) -> tuple[VerdictTime, ...]:
    """``(step, verdict, wall µs)`` in step order, grouped by verdict, the most wall time
    first; among equal times, the verdict of the earlier step first."""
    groups: dict[str, list[tuple[int | None, float]]] = {}
    for step, verdict, wall in steps:
        groups.setdefault(verdict, []).append((step, float(wall)))
    out = [VerdictTime(v, tuple(s for s, _ in g), float(sum(w for _, w in g)))
           for v, g in groups.items()]  # dicts keep first-seen order: the earliest step's
    return tuple(sorted(out, key=lambda x: -x.wall_us))  # stable: ties keep that order


@computed
def span_verdict(analysis: SpanAnalysis) -> SpanVerdict:
    """The verdict of the span's warm time (every window's when none is warm)."""
    windows = analysis.windows
    if not windows:
        return SpanVerdict(None, (), 0.0)
    cold = step_walls(analysis).cold
    warm = ~cold if (~cold).any() else np.ones(len(windows), dtype=bool)
    split = verdict_by_time((w.step, w.verdict, w.wall_us)
                            for w, keep in zip(windows, warm.tolist(), strict=True) if keep)
    return SpanVerdict(split[0].verdict, split, float(sum(x.wall_us for x in split)))
