"""Step windows: the unit every verdict and finding is about.

A step is a host-side ``ProfilerStep#N`` event; in a trace without any, an iteration
inferred from what repeats on the main thread (:mod:`.iterations`), numbered from 0.
Steps partition time *on the device side*: step N spans ``[b_N, b_N+1)`` with
``b_N = max(host start of N, end of the last device activity of step N-1)``,
so device work that a step launched but that ran after the host moved on is
charged to the step that launched it. A device activity belongs to the step
whose host window contains the runtime/driver call that launched it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.step_names import step_numbers
from tb_diagnostics.analysis.verdict import CAUSE_CODES, VERDICT_BY_CODES, VERDICTS
from tb_diagnostics.trace.categories import STEP_NAME, Kind
from tb_diagnostics.trace.model import ROW_CHUNK, TraceModel, row_indices


class StepWindow:
    """One step (or, in a trace without steps, the whole span) and its figures: a view of
    row ``index`` of the span's window columns (:class:`.window_columns.WindowColumns`),
    made on demand. The figures live in the columns, one array per figure: a span of a
    million steps holds no Python object per step (issue 28).

    Fields, each a plain Python value read from its column:

    - ``index``: position in the span, 0-based; ``step``: N of ProfilerStep#N, None for
      a span without steps; ``row``: model row of the ProfilerStep#N event, -1 without
    - ``host_start``, ``host_end``: µs since the model origin; ``start``, ``end``: the
      device-side partition ``[start, end)``
    - ``device_busy_us``: any device activity, collectives included
    - ``compute_busy_us``: device activity that is not a collective kernel, what the
      verdict reads (on a CPU-only trace the heavy op self time)
    - ``exposed_collective_us``: collective kernels that no compute overlaps
    - ``idle``: device idle µs by cause (input / sync / comm / launch / other / profiler /
      compile / module_load), a new dict per read
    - ``verdict``, ``main_idle_cause``; ``self_cpu_us``; ``self_device_us`` (None on
      CPU-only traces); ``ops``; ``kernels``; ``flags`` (a new list per read)
    - ``verdict_by``: what decided the verdict where compute_busy and the main cause did
      not: None, "launch-backlog" (a warm step draining work queued earlier for a host
      that issues less than the device runs: views.backlog) or "compilation" (the device
      idle while the host compiles for most of the step: verdict.compile_bound)
    """

    __slots__ = ("_c", "index")

    def __init__(self, columns: WindowColumnsLike, index: int) -> None:
        self._c = columns
        self.index = index

    def __repr__(self) -> str:
        return (f"StepWindow(index={self.index}, step={self.step}, start={self.start}, "
                f"end={self.end}, verdict={self.verdict!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepWindow):
            return NotImplemented
        return self.fields() == other.fields()

    __hash__ = None  # type: ignore[assignment]  # equal by value, like the dataclass was

    def fields(self) -> dict[str, object]:
        """Every field by name, as plain Python values."""
        return {name: getattr(self, name) for name in STEP_WINDOW_FIELDS}

    @property
    def step(self) -> int | None:
        c = self._c
        return int(c.step[self.index]) if c.has_steps else None

    @property
    def row(self) -> int:
        return int(self._c.row[self.index])

    @property
    def host_start(self) -> float:
        return float(self._c.host_start[self.index])

    @property
    def host_end(self) -> float:
        return float(self._c.host_end[self.index])

    @property
    def start(self) -> float:
        return float(self._c.start[self.index])

    @property
    def end(self) -> float:
        return float(self._c.end[self.index])

    @property
    def device_busy_us(self) -> float:
        return float(self._c.device_busy_us[self.index])

    @property
    def compute_busy_us(self) -> float:
        return float(self._c.compute_busy_us[self.index])

    @property
    def exposed_collective_us(self) -> float:
        return float(self._c.exposed_collective_us[self.index])

    @property
    def idle(self) -> dict[str, float]:
        k = self.index
        return {cause: float(col[k]) for cause, col in self._c.idle.items()}

    @property
    def verdict(self) -> str:
        return VERDICTS[int(self._c.verdict_code[self.index])]

    @property
    def main_idle_cause(self) -> str | None:
        return CAUSE_CODES[int(self._c.cause_code[self.index])]

    @property
    def verdict_by(self) -> str | None:
        return VERDICT_BY_CODES[int(self._c.by_code[self.index])]

    @property
    def self_cpu_us(self) -> float:
        return float(self._c.self_cpu_us[self.index])

    @property
    def self_device_us(self) -> float | None:
        col = self._c.self_device_us
        return None if col is None else float(col[self.index])

    @property
    def ops(self) -> int:
        return int(self._c.ops[self.index])

    @property
    def kernels(self) -> int:
        return int(self._c.kernels[self.index])

    @property
    def flags(self) -> list[str]:
        return self._c.flags_of(self.index)

    @property
    def wall_us(self) -> float:
        return self.end - self.start

    @property
    def device_busy(self) -> float:
        return self.device_busy_us / self.wall_us if self.wall_us > 0 else 0.0

    @property
    def compute_busy(self) -> float:
        return self.compute_busy_us / self.wall_us if self.wall_us > 0 else 0.0


#: A step window's fields, in the order the dataclass it replaced declared them.
STEP_WINDOW_FIELDS = ("index", "step", "row", "host_start", "host_end", "start", "end",
                      "device_busy_us", "compute_busy_us", "exposed_collective_us", "idle",
                      "verdict", "main_idle_cause", "self_cpu_us", "self_device_us", "ops",
                      "kernels", "flags", "verdict_by")


class WindowColumnsLike(Protocol):
    """What a :class:`StepWindow` reads (:class:`.window_columns.WindowColumns`)."""

    has_steps: bool
    step: np.ndarray
    row: np.ndarray
    host_start: np.ndarray
    host_end: np.ndarray
    start: np.ndarray
    end: np.ndarray
    device_busy_us: np.ndarray
    compute_busy_us: np.ndarray
    exposed_collective_us: np.ndarray
    idle: dict[str, np.ndarray]
    verdict_code: np.ndarray  # codes into verdict.VERDICTS, CAUSE_CODES, VERDICT_BY_CODES
    cause_code: np.ndarray
    by_code: np.ndarray
    self_cpu_us: np.ndarray
    self_device_us: np.ndarray | None
    ops: np.ndarray
    kernels: np.ndarray

    def flags_of(self, index: int) -> list[str]: ...


@dataclass(frozen=True)
class HostSteps:
    """The ProfilerStep#N events of a trace that are steps, in time order (see
    :func:`_distinct_steps`; a number may repeat).

    Inferred steps (``inferred_from`` set) have no step event: ``rows`` are the main
    thread's first call of each iteration, and the host windows are the iterations'.
    """

    rows: np.ndarray
    numbers: np.ndarray
    host_start: np.ndarray
    host_end: np.ndarray
    inferred_from: str | None = None  # what the iterations were inferred from, in words
    notes: tuple[str, ...] = ()  # step events left out or kept apart, in words

    @property
    def inferred(self) -> bool:
        return self.inferred_from is not None

    @property
    def note(self) -> str | None:
        """The span's note on inferred steps (None for ProfilerStep# steps)."""
        if self.inferred_from is None:
            return None
        return (f"no ProfilerStep# events: {len(self)} iterations inferred from "
                f"{self.inferred_from}; their steps are numbered from 0 and flagged 'inferred'")

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def locate(self, t: np.ndarray) -> np.ndarray:
        """Index of the step whose host window contains each time, or -1."""
        return window_index(self.host_start, self.host_end, t)


def window_index(lo: np.ndarray, hi: np.ndarray, t: np.ndarray,
                 rows: np.ndarray | None = None) -> np.ndarray:
    """For each time (``t[rows]`` when ``rows`` is given), the index k of the window
    ``[lo[k], hi[k])`` containing it, or -1; ``lo`` is sorted and windows do not overlap.

    int32, computed in chunks: callers cache it per op row.
    """
    n = t.shape[0] if rows is None else rows.shape[0]
    out = np.full(n, -1, dtype=np.int32)
    if not lo.shape[0]:
        return out
    for a in range(0, n, ROW_CHUNK):
        tc = t[a:a + ROW_CHUNK] if rows is None else t[rows[a:a + ROW_CHUNK]]
        k = np.searchsorted(lo, tc, side="right") - 1
        ok = (k >= 0) & (tc < hi[np.maximum(k, 0)])
        out[a:a + ROW_CHUNK][ok] = k[ok]
    return out


def per_window_sum(lo: np.ndarray, hi: np.ndarray, start: np.ndarray, rows: np.ndarray,
                   values: np.ndarray | None = None) -> np.ndarray:
    """Per window ``[lo[k], hi[k])``: the sum of ``values[r]`` (or the count) over the rows
    ``r`` that start in it; in chunks, so no full-length temporary is made."""
    n = lo.shape[0]
    out = np.zeros(n)
    for a in range(0, rows.shape[0], ROW_CHUNK):
        chunk = rows[a:a + ROW_CHUNK]
        w = window_index(lo, hi, start, chunk)
        ok = w >= 0
        weights = None if values is None else values[chunk[ok]]
        w = w[ok]
        if not w.size:
            continue
        # Only the windows the chunk's rows fall in (rows by start: a few of a million
        # windows): the others would add a zero, which leaves a sum that starts at +0.0
        # as it is (no -0.0 sum), and a count per window per chunk was a pass over all.
        first, last = int(w.min()), int(w.max())
        out[first:last + 1] += np.bincount(w - first, weights=weights,
                                           minlength=last - first + 1)
    return out


def find_host_steps(model: TraceModel, infer: bool = True) -> HostSteps:
    """ProfilerStep#N on the host (not their ``gpu_user_annotation`` twins); without any,
    the iterations :func:`~.iterations.infer_iterations` finds (unless ``infer`` is off)."""
    ids, parsed = step_numbers(model.strings, model.name_ids_matching(STEP_NAME))
    # A table over the names, looked up per row: linear, where isin sorts 10⁶ step ids.
    is_step_name = np.zeros(len(model.strings), dtype=bool)
    is_step_name[ids] = True
    rows = row_indices(is_step_name[model.name] & model.is_host)
    del is_step_name
    rows = rows[model.kind[rows] != Kind.PYTHON]
    # Each name's number parsed once, looked up per row (not a regex per step event).
    number_of = np.zeros(len(model.strings), dtype=np.int64)
    number_of[ids] = parsed
    numbers = number_of[model.name[rows]]
    rows, numbers, notes = _distinct_steps(model, rows, numbers)
    if not rows.size and infer:
        from tb_diagnostics.analysis.iterations import search_iterations

        it, why = search_iterations(model)
        if it is not None:
            return HostSteps(rows=it.rows, numbers=np.arange(len(it), dtype=np.int64),
                             host_start=it.host_start, host_end=it.host_end,
                             inferred_from=it.source)
        notes.append(f"{NO_ITERATIONS}{why}")  # why the span is one window
    return HostSteps(rows=rows, numbers=numbers, host_start=model.start[rows],
                     host_end=model.end[rows], notes=tuple(notes))


#: How the note on a span without steps, where no iterations were inferred, begins.
NO_ITERATIONS = "no iterations inferred: "
#: Repeated step numbers named one by one in the note; the rest are counted.
_NAMED_REPEATS = 3


def _distinct_steps(model: TraceModel, rows: np.ndarray, numbers: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The step events that are steps, in time order, and the notes on the others.

    The profiler closes ``ProfilerStep#N`` where it opens N+1, so the steps of a trace
    follow one another. A step event that starts inside an earlier one is therefore not a
    step of its own: with the same number it is that step recorded twice (on a second
    thread, say) and counts once; with another number it is nested in it, and is left out
    rather than cutting the enclosing step short. Events that merely share a number and
    follow one another are steps each, in time order (two profiles in one file).
    """
    notes: list[str] = []
    n = rows.shape[0]
    if n > 1:  # rows are in time order, and on equal starts the longer first
        start, end = model.start[rows], model.end[rows]
        reach = np.maximum.accumulate(end)  # the latest end of the steps up to each one
        holder = np.maximum.accumulate(np.where(end >= reach, np.arange(n), 0))
        inside = np.zeros(n, dtype=bool)
        inside[1:] = start[1:] < reach[:-1]
        enclosing = np.zeros(n, dtype=np.int64)
        enclosing[1:] = holder[:-1]
        same = numbers == numbers[enclosing]
        twice = inside & same
        nested = inside & ~same & (end <= np.concatenate(([np.inf], reach[:-1])))
        if twice.any():
            notes.append(f"{int(twice.sum())} ProfilerStep# event(s) recorded twice (the "
                         "same number, overlapping in time, e.g. on two threads): counted once")
        if nested.any():
            notes.append(f"{int(nested.sum())} ProfilerStep# event(s) inside another step: "
                         "not steps, and the enclosing step keeps its length")
        keep = ~(twice | nested)
        rows, numbers = rows[keep], numbers[keep]
    if rows.shape[0] > 1:
        values, counts = sorted_sets.unique_counts(numbers)
        repeated = counts > 1
        if repeated.any():
            notes.append(_repeats_note(values[repeated].tolist(), counts[repeated].tolist()))
    return rows, numbers, notes


def _repeats_note(values: list[int], counts: list[int]) -> str:
    if len(values) == 1:
        return (f"{counts[0]} ProfilerStep#{values[0]} events: kept apart by time, each "
                "its own step")
    named = ", ".join(f"#{v} ×{c}" for v, c in zip(values[:_NAMED_REPEATS],
                                                   counts[:_NAMED_REPEATS], strict=True))
    more = len(values) - _NAMED_REPEATS
    rest = f" and {more} more number(s)" if more > 0 else ""
    return (f"{sum(counts)} ProfilerStep# events share {len(values)} numbers ({named}{rest}): "
            "kept apart by time, each its own step")


def device_partition(host_start: np.ndarray, host_end: np.ndarray,
                     last_device_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device-side boundaries ``[b_N, b_N+1)`` of every step.

    ``last_device_end[N]`` is the end of step N's last device activity (NaN
    when it launched none). Boundaries are made non-decreasing, so windows
    never overlap even when several streams finish out of order.
    """
    n = host_start.shape[0]
    b = host_start.astype(np.float64).copy()
    if n > 1:
        lag = np.where(np.isnan(last_device_end[:-1]), -np.inf, last_device_end[:-1])
        b[1:] = np.maximum(b[1:], lag)
    b = np.maximum.accumulate(b) if n else b
    end = np.empty(n, dtype=np.float64)
    if n:
        end[:-1] = b[1:]
        last = last_device_end[-1]
        end[-1] = max(host_end[-1], last) if not np.isnan(last) else host_end[-1]
        end[-1] = max(end[-1], b[-1])
    return b, end
