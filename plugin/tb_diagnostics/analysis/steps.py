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

from dataclasses import dataclass, field

import numpy as np

from tb_diagnostics.trace.categories import STEP_NAME, Kind
from tb_diagnostics.trace.model import ROW_CHUNK, TraceModel, row_indices


@dataclass(frozen=True)
class StepWindow:
    """One step (or, in a trace without steps, the whole span) and its figures."""

    index: int  # position in the span, 0-based
    step: int | None  # N of ProfilerStep#N; None for a span without steps
    row: int  # model row of the ProfilerStep#N event, -1 without steps
    host_start: float  # µs since the model origin
    host_end: float
    start: float  # the device-side partition [start, end)
    end: float
    device_busy_us: float  # any device activity, collectives included
    # Device activity that is not a collective kernel: what the verdict reads. On a
    # CPU-only trace, the heavy op self time (device_busy_us: collectives are not in it).
    compute_busy_us: float
    # Collective kernels that no compute overlaps: device_busy_us - compute_busy_us.
    exposed_collective_us: float
    idle: dict[str, float]  # device idle µs: input / sync / comm / launch / other / profiler
    verdict: str
    main_idle_cause: str | None
    self_cpu_us: float
    self_device_us: float | None  # None on CPU-only traces
    ops: int
    kernels: int
    flags: list[str] = field(default_factory=list)
    # What decided the verdict where compute_busy and the main cause did not: None, or
    # "launch-backlog" (a warm step whose device drains work queued earlier for a host
    # that issues less than the device runs: the host is the limit, views.backlog), or
    # "compilation" (the device idle while the host compiles for most of the step:
    # compile-bound, main cause "compile"; verdict.compile_bound).
    verdict_by: str | None = None

    @property
    def wall_us(self) -> float:
        return self.end - self.start

    @property
    def device_busy(self) -> float:
        return self.device_busy_us / self.wall_us if self.wall_us > 0 else 0.0

    @property
    def compute_busy(self) -> float:
        return self.compute_busy_us / self.wall_us if self.wall_us > 0 else 0.0


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
        out += np.bincount(w[ok], weights=weights, minlength=n)
    return out


def find_host_steps(model: TraceModel, infer: bool = True) -> HostSteps:
    """ProfilerStep#N on the host (not their ``gpu_user_annotation`` twins); without any,
    the iterations :func:`~.iterations.infer_iterations` finds (unless ``infer`` is off)."""
    # Step numbers past what a float64 holds exactly are no step counter's: not steps.
    ids = [i for i, s in enumerate(model.strings) if (g := STEP_NAME.match(s))
           and len(g.group(1)) <= 15]
    rows = row_indices(np.isin(model.name, np.asarray(ids, dtype=np.int32)) & model.is_host)
    rows = rows[model.kind[rows] != Kind.PYTHON]
    numbers = np.asarray([int(STEP_NAME.match(model.name_of(r)).group(1)) for r in rows],
                         dtype=np.int64)
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
        values, counts = np.unique(numbers, return_counts=True)
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
