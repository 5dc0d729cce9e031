"""The span's verdict: the step verdict that holds for most of the time judged.

A span's steps can disagree: 11 input-bound iterations of 550 ms and 15
compute-bound ones of 160 ms. The span is what most of its time is, so each
verdict is weighed by the time its warm steps were judged on, not by how many
steps have it; the earliest step breaks a tie. The time judged is what each
step's own verdict read (``analysis.span``): its wall without the profiler's own
time and the one-time costs (compilation inside the window, module loads;
``verdict.UNJUDGED``), over the warm steps only (the cold step, ``views.warmth``,
pays one-time costs and does not decide, nor does the profiler's empty trailing
stub). So a step that compiles for 1.7 s and runs 1 ms of work weighs 1 ms, not
1.7 s: compilation does not decide the span
any more than it decides the step. ``split`` says how the time judged divides,
most first (with each verdict's wall time too), so the headline can say it where
no verdict holds at least :data:`ONE_SIDED_SHARE` of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.verdict import UNJUDGED
from tb_diagnostics.analysis.views.warmth import step_walls

#: A verdict holding at least this share of the time judged says the span alone; below
#: it, the headline also says how the time splits between the verdicts.
ONE_SIDED_SHARE = 0.9


def judged_us(wall_us: float, idle: Mapping[str, float]) -> float:
    """The time a step's verdict is judged on: its wall less the labelled idle time no
    verdict reads (``verdict.UNJUDGED``: the profiler's own time, compilation, module
    loads), never below zero. ``idle`` is a window's ``idle`` (keys ``compile``…) or a
    step document's (``compile_us``…)."""
    left = sum(float(idle.get(c, idle.get(f"{c}_us", 0.0)) or 0.0) for c in UNJUDGED)
    return max(float(wall_us) - left, 0.0)


@dataclass(frozen=True)
class VerdictTime:
    """The warm steps of one verdict, the time they were judged on and their wall."""

    verdict: str
    steps: tuple[int | None, ...]
    wall_us: float
    judged_us: float

    def to_dict(self, total_judged_us: float) -> dict[str, object]:
        """``share`` is of the span's time judged (``total_judged_us``)."""
        return {"verdict": self.verdict, "steps": list(self.steps),
                "wall_us": round(self.wall_us, 3), "judged_us": round(self.judged_us, 3),
                "share": (round(self.judged_us / total_judged_us, 6) if total_judged_us > 0
                          else 0.0)}


@dataclass(frozen=True)
class SpanVerdict:
    verdict: str | None  # None for a span without windows
    split: tuple[VerdictTime, ...]  # by verdict over the warm steps, most time judged first
    warm_wall_us: float
    warm_judged_us: float

    @property
    def one_sided(self) -> bool:
        """One verdict holds (nearly) all of the time judged: no split worth saying."""
        return len(self.split) <= 1 or self.split[0].judged_us >= ONE_SIDED_SHARE * \
            self.warm_judged_us


def verdict_by_time(steps: Iterable[tuple]) -> tuple[VerdictTime, ...]:
    """``(step, verdict, wall µs[, judged µs])`` in step order (the time judged is the
    wall where not given), grouped by verdict, the most time judged first; among equal
    times, the verdict of the earlier step first."""
    groups: dict[str, list[tuple[int | None, float, float]]] = {}
    for step, verdict, wall, *judged in steps:
        groups.setdefault(verdict, []).append(
            (step, float(wall), float(judged[0]) if judged else float(wall)))
    out = [VerdictTime(v, tuple(s for s, _, _ in g), float(sum(w for _, w, _ in g)),
                       float(sum(j for _, _, j in g)))
           for v, g in groups.items()]  # dicts keep first-seen order: the earliest step's
    return tuple(sorted(out, key=lambda x: -x.judged_us))  # stable: ties keep that order


def verdict_split(steps: np.ndarray | None, verdict: np.ndarray, wall: np.ndarray,
                  judged: np.ndarray) -> tuple[VerdictTime, ...]:
    """:func:`verdict_by_time` over columns, in step order (``steps`` None: every step
    None), grouped with a mask per verdict rather than a tuple per step (a span may hold
    a million steps). The same figures to the bit: each total is a sequential sum, as
    Python 3.11's ``sum`` adds (a cumulative sum, not numpy's pairwise ``sum``)."""
    seen: dict[str, None] = dict.fromkeys(verdict.tolist())  # first-seen order
    out = []
    for v in seen:
        at = np.flatnonzero(verdict == v)
        out.append(VerdictTime(
            v, tuple(steps[at].tolist()) if steps is not None else (None,) * at.size,
            _sequential_sum(wall[at]), _sequential_sum(judged[at])))
    return tuple(sorted(out, key=lambda x: -x.judged_us))  # stable: ties keep that order


def _sequential_sum(values: np.ndarray) -> float:
    """``float(sum(values.tolist()))`` without the list: ``sum`` starts at the int 0, so a
    -0.0 total reads 0.0 there (the ``+ 0.0``)."""
    if not values.size:
        return 0.0
    return float(np.cumsum(values, dtype=np.float64)[-1]) + 0.0


@computed
def span_verdict(analysis: SpanAnalysis) -> SpanVerdict:
    """The verdict of the span's warm time judged (every window's when none is warm)."""
    windows = analysis.windows
    if not windows:
        return SpanVerdict(None, (), 0.0, 0.0)
    # The warm steps (every one but the profiler's trailing stub where none is warm).
    warm = step_walls(analysis).judged
    # From the window columns (a span may hold a million steps): judged_us for each.
    c = windows.columns
    wall = c.wall_us
    left = c.idle["profiler"] + c.idle["compile"] + c.idle["module_load"]  # UNJUDGED
    judged = wall - left
    judged = np.where(judged < 0.0, 0.0, judged)  # max(judged, 0.0), NaN kept
    keep = np.flatnonzero(warm)
    # The steps as an object array of the windows' shared ints (steps_at): each verdict's
    # tuple holds those, not ints of its own (a span may hold a million steps).
    steps = np.asarray(c.steps_at(keep), dtype=object) if c.has_steps else None
    split = verdict_split(steps, c.verdict[keep], wall[keep], judged[keep])
    return SpanVerdict(split[0].verdict, split, float(sum(x.wall_us for x in split)),
                       float(sum(x.judged_us for x in split)))
