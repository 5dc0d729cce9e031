"""Which steps are flagged "artefact", and on what figures: decided here, once, for every
reader (the report's step documents carry it as ``flag_why``; the CLI's JSON, the API's
step records and the tab's badges all read that one field).

A step is a profiler artefact in two ways:

- it is the **trailing stub** the profiler's last ``step()`` opened (:mod:`.warmth`):
  nothing of the program ran in it, so it is flagged whatever its figures;
- a **profiler-artefact finding** (the flush sync, a buffer request, the first-launch
  lag: :mod:`.artefacts`) names it *and* the profiler's own time in it
  (``idle["profiler"]``, which its verdict already leaves out) is at least
  :data:`ARTEFACT_MIN_SHARE` of its wall. Below that share the step's figures are not
  distorted, and a badge on the very step the verdict is about reads as "do not trust
  this verdict" when nothing in it is the profiler's to speak of (the Qwen run's only
  step: a flush sync after it ended, 0.24 % of it the profiler's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.warmth import trailing_stub

#: The profiler's own share of a step's wall from which an artefact finding naming the
#: step flags it (1 %: the share of a step's time a person reading its figures notices).
ARTEFACT_MIN_SHARE = 0.01


class ArtefactFinding(Protocol):
    """What the decision reads of a finding (``rules.base.Finding`` has it): the
    analysis never imports the rules, which import it."""

    @property
    def artefact(self) -> bool: ...

    @property
    def steps(self) -> Sequence[int | None]: ...

    @property
    def title(self) -> str: ...


@dataclass(frozen=True)
class ArtefactFlag:
    """One window flagged a profiler artefact, and what flagged it."""

    index: int  # the window (``analysis.windows``)
    stub: bool  # the trailing stub (its figures are not the reason)
    titles: tuple[str, ...]  # the artefact findings naming it, in finding order, once each
    profiler_us: float  # the profiler's own time in it
    wall_us: float  # its wall

    @property
    def share(self) -> float:
        """The profiler's share of the step's wall (0 for a window of no wall)."""
        return self.profiler_us / self.wall_us if self.wall_us > 0 else 0.0


def artefact_flags(analysis: SpanAnalysis,
                   findings: Iterable[ArtefactFinding]) -> list[ArtefactFlag]:
    """The windows flagged a profiler artefact, in window order: the trailing stub, and
    each step an artefact finding names whose profiler share reaches
    :data:`ARTEFACT_MIN_SHARE`.

    Only the named steps are looked at one by one (a span of 10⁶ steps has a few): the
    step numbers are matched as one array."""
    windows = analysis.windows
    hs = analysis.host_steps
    named: dict[int, list[str]] = {}  # step number -> titles of the findings naming it
    for f in findings:
        if not f.artefact:
            continue
        for number in f.steps:
            if number is not None:
                titles = named.setdefault(int(number), [])
                if f.title not in titles:
                    titles.append(f.title)
    stub = trailing_stub(analysis)
    candidates: set[int] = {stub} if stub >= 0 else set()
    if named and len(hs) == len(windows):
        # Windows are the host steps one for one where the span has steps (step_windows).
        hit = np.isin(hs.numbers, np.fromiter(named, dtype=np.int64, count=len(named)))
        candidates.update(np.flatnonzero(hit).tolist())
    elif named:  # a span without steps: one window of no number, which nothing names
        candidates.update(k for k, w in enumerate(windows) if w.step in named)
    out = []
    for k in sorted(candidates):
        w = windows[k]
        titles = tuple(named.get(w.step, ())) if w.step is not None else ()
        flag = ArtefactFlag(index=k, stub=k == stub, titles=titles,
                            profiler_us=float(w.idle.get("profiler", 0.0)),
                            wall_us=float(w.wall_us))
        if flag.stub or (titles and flag.wall_us > 0
                         and flag.profiler_us >= ARTEFACT_MIN_SHARE * flag.wall_us):
            out.append(flag)
    return out
