"""The step windows of a span as columns: one numpy array per figure, not one object per
step (issue 28: a span of a million steps held 2.2 GB of ``StepWindow`` objects).

:class:`WindowColumns` holds the figures; :class:`StepWindows` is the sequence
``SpanAnalysis.windows`` answers: it indexes, slices, iterates and measures like the list
of windows it replaced, each item a :class:`~.steps.StepWindow` view made on demand, and
it exposes the columns for readers that take every window at once (the step documents).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import overload

import numpy as np

from tb_diagnostics.analysis.steps import StepWindow
from tb_diagnostics.analysis.verdict import CAUSE_CODES, VERDICT_BY_CODES, VERDICTS


@dataclass(frozen=True, eq=False)
class WindowColumns:
    """Per window ``k`` (row ``k`` of every array): what :class:`~.steps.StepWindow` reads.

    ``verdict``, ``main_idle_cause`` and ``verdict_by`` take a few strings (or None):
    held as int8 codes into their tables (:data:`.verdict.VERDICTS`, ``CAUSE_CODES``,
    ``VERDICT_BY_CODES``), a constant view where every window has the same, and read as
    object arrays of the strings (made per read) or per window (:class:`.steps.StepWindow`):
    an object array was a pointer per step, 8 MB each at 10⁶ steps.
    """

    has_steps: bool  # False: one window for a span without steps; ``step`` reads None
    step: np.ndarray  # int64, N of ProfilerStep#N (or the inferred iteration's number)
    row: np.ndarray  # int32 (model rows), the step event's row, -1 for inferred steps or none
    host_start: np.ndarray  # float64 µs
    host_end: np.ndarray
    start: np.ndarray  # the device-side partition [start, end), float64 µs
    end: np.ndarray
    device_busy_us: np.ndarray
    compute_busy_us: np.ndarray
    exposed_collective_us: np.ndarray
    idle: dict[str, np.ndarray]  # cause -> µs, in verdict.idle_split's order
    verdict_code: np.ndarray  # int8: a place in verdict.VERDICTS
    cause_code: np.ndarray  # int8: a place in verdict.CAUSE_CODES
    by_code: np.ndarray  # int8: a place in verdict.VERDICT_BY_CODES
    self_cpu_us: np.ndarray
    self_device_us: np.ndarray | None  # None on CPU-only traces
    ops: np.ndarray  # int64
    kernels: np.ndarray  # int64
    inferred: bool  # every window flagged "inferred"
    compiling: np.ndarray  # bool: flagged "compiling"
    stub: int  # the window flagged "artefact" (the trailing stub), or -1

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @property
    def verdict(self) -> np.ndarray:
        """Every window's verdict, an object array of str (made per read)."""
        return _VERDICT_OBJECTS[self.verdict_code]

    @property
    def main_idle_cause(self) -> np.ndarray:
        """Every window's main idle cause, an object array of str or None (per read)."""
        return _CAUSE_OBJECTS[self.cause_code]

    @property
    def verdict_by(self) -> np.ndarray:
        """Every window's ``verdict_by``, an object array of str or None (per read)."""
        return _BY_OBJECTS[self.by_code]

    @property
    def wall_us(self) -> np.ndarray:
        return self.end - self.start

    @property
    def device_busy(self) -> np.ndarray:
        """Every window's :attr:`.steps.StepWindow.device_busy` (busy share of the wall, 0
        for a window of no wall): the same floats, without a view per window."""
        return _share(self.device_busy_us, self.wall_us)

    @property
    def compute_busy(self) -> np.ndarray:
        """Every window's :attr:`.steps.StepWindow.compute_busy`, as :attr:`device_busy`."""
        return _share(self.compute_busy_us, self.wall_us)

    def step_list(self) -> list[int | None]:
        """Every window's ``step`` (None for a span without steps), as a list."""
        return list(self._step_ints) if self.has_steps else [None] * len(self)

    def steps_at(self, index: np.ndarray) -> list[int | None]:
        """The ``step`` of each window index (valid indices), as a list whose ints are
        those of every other such list: a span of 10⁶ steps lists all of them in several
        findings and cards, and an int per step per list was 32 MB a list."""
        index = np.asarray(index)
        if not self.has_steps:
            return [None] * int(index.shape[0])
        if index.shape[0] > 1 and int(index[0]) >= 0 and bool((np.diff(index) == 1).all()):
            # A run of windows (the warm ones, a group of every step): a slice of the
            # list, where a look-up per window was 15x slower.
            return self._step_ints[int(index[0]):int(index[-1]) + 1]
        return list(map(self._step_ints.__getitem__, index.tolist()))

    @cached_property
    def _step_ints(self) -> list[int]:
        # One int object per window, shared by the lists of step_list and steps_at.
        return self.step.tolist()

    def flags_of(self, index: int) -> list[str]:
        """Window ``index``'s flags, in the order the step documents list them."""
        flags = ["inferred"] if self.inferred else []
        if self.compiling[index]:
            flags.append("compiling")
        if index == self.stub:
            flags.append("artefact")
        return flags

    def flag_lists(self) -> list[list[str]]:
        """Every window's flags (:meth:`flags_of`), a new list each, in one pass."""
        n = len(self)
        base = ["inferred"] if self.inferred else []
        with gc_paused():  # 10⁶ new lists: no cycle among them for a collection to find
            out = [list(base) for _ in range(n)]
        for k in np.flatnonzero(self.compiling).tolist():
            out[k].append("compiling")
        if 0 <= self.stub < n:
            out[self.stub].append("artefact")
        return out


def _objects(table: tuple[str | None, ...]) -> np.ndarray:
    out = np.empty(len(table), dtype=object)
    out[:] = table
    return out


_VERDICT_OBJECTS = _objects(VERDICTS)
_CAUSE_OBJECTS = _objects(CAUSE_CODES)
_BY_OBJECTS = _objects(VERDICT_BY_CODES)


def _share(part: np.ndarray, wall: np.ndarray) -> np.ndarray:
    """``part / wall`` where ``wall > 0``, else 0.0 (NaN walls included), as StepWindow."""
    return np.divide(part, wall, out=np.zeros(wall.shape[0]), where=wall > 0)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic garbage collection inside: a million new containers (a list per
    window) set off collections that each walk every object the process holds, 0.3-0.6 s
    on a span of 10⁶ steps, for lists that hold only strings and so make no cycle."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class StepWindows(Sequence[StepWindow]):
    """The windows of a span: a sequence of :class:`~.steps.StepWindow` views over
    :class:`WindowColumns` (``columns``). Indexing makes one view; a slice, a list of
    them; nothing is kept per window."""

    __slots__ = ("columns",)

    def __init__(self, columns: WindowColumns) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns)

    @overload
    def __getitem__(self, index: int) -> StepWindow: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepWindow]: ...

    def __getitem__(self, index: int | slice) -> StepWindow | list[StepWindow]:
        n = len(self.columns)
        if isinstance(index, slice):
            return [StepWindow(self.columns, k) for k in range(*index.indices(n))]
        k = int(index)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("step window index out of range")
        return StepWindow(self.columns, k)

    def __iter__(self) -> Iterator[StepWindow]:
        c = self.columns
        return (StepWindow(c, k) for k in range(len(c)))

    def __repr__(self) -> str:
        return f"StepWindows({len(self)} windows)"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StepWindows | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other,
                                                                            strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
