"""Communication per step: collective time, how much of it compute hides, and the
collectives themselves, in absolute time so ranks can be lined up.

On a GPU, communication is the NCCL/RCCL kernels: they stay device activity
(``device_busy`` is unchanged), but here they are told apart from compute, and
*exposed* communication is comm kernel time not overlapped by any non-comm
kernel, copy or memset on the same device (HTA's definition). On a CPU-only
trace the collective runs on the host (gloo): communication is the host time in
collectives on any thread, and exposed is the part not overlapped by the heavy
op self time that counts as compute there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, covered
from tb_diagnostics.analysis.span import SpanAnalysis, computed

#: Collectives listed per step in the span document (the first ones, in time order).
MAX_COLLECTIVES = 5
#: Host events named as "what this rank was doing before its first collective".
MAX_BEFORE = 5

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class StepComm:
    """Per window (aligned with ``analysis.windows``): µs of communication."""

    comm_us: np.ndarray
    exposed_us: np.ndarray
    first_comm: np.ndarray  # µs since origin of the first collective in the window, NaN if none

    def overlap(self, k: int) -> float | None:
        """The share of the window's communication that compute hid (None without comm)."""
        c = float(self.comm_us[k])
        return None if c <= 0 else max(0.0, min(1.0, 1.0 - float(self.exposed_us[k]) / c))


def comm_kernel_rows(analysis: SpanAnalysis) -> np.ndarray:
    """Device activity rows that are NCCL/RCCL kernels (the span's view, shared with the
    step windows, which keep them out of compute)."""
    return analysis.comm_kernel_rows


@computed
def collective_rows(analysis: SpanAnalysis) -> np.ndarray:
    """The rows that stand for collectives: the comm kernels on a GPU trace, else the
    outermost host comm events (nested ones, ``record_param_comms`` under
    ``c10d::allreduce_``, are the same collective)."""
    if not analysis.cpu_only:
        kernels = comm_kernel_rows(analysis)
        if kernels.size:
            return kernels
    m = analysis.model
    rows = analysis.comm_rows
    inner = np.isin(m.parent[rows], rows)
    return rows[~inner]


def _device_intervals(analysis: SpanAnalysis) -> tuple[Intervals, Intervals]:
    """(comm, compute) intervals: comm kernels vs every other device activity (the same
    intervals the step windows judge compute by, so the two never disagree)."""
    return analysis.comm_kernel_intervals, analysis.compute_intervals


@computed
def step_comm(analysis: SpanAnalysis) -> StepComm:
    lo, hi = analysis.bounds
    if analysis.cpu_only or not comm_kernel_rows(analysis).size:
        comm_iv = analysis.comm_intervals
        # A GPU trace without comm kernels: host collectives, nothing hides them.
        compute_iv = analysis.busy_intervals if analysis.cpu_only else Intervals.empty()
    else:
        comm_iv, compute_iv = _device_intervals(analysis)
    comm = covered(comm_iv, lo, hi)
    # |comm \ compute| = |comm ∪ compute| - |compute|
    exposed = covered(comm_iv | compute_iv, lo, hi) - covered(compute_iv, lo, hi)
    m = analysis.model
    rows = collective_rows(analysis)
    starts = m.start[rows]
    first = np.full(lo.shape[0], np.nan)
    if rows.size:
        k = np.searchsorted(starts, lo, side="left")  # rows are in start order
        ok = k < rows.size
        cand = np.where(ok, starts[np.minimum(k, rows.size - 1)], np.nan)
        first = np.where(ok & (cand < hi), cand, np.nan)
    return StepComm(comm_us=comm, exposed_us=np.maximum(exposed, 0.0), first_comm=first)


def rank_of(analysis: SpanAnalysis, file_name: str) -> tuple[int | None, int | None, str | None]:
    """(rank, world size, backend) from ``distributedInfo``, else the rank from the file
    name (``rank3``, ``rank-3``, ``sampled_rank-1``)."""
    info = analysis.model.meta.distributed_info or {}
    rank = info.get("rank")
    world = info.get("world_size")
    backend = info.get("backend")
    if not isinstance(rank, int):
        match = _RANK_IN_NAME.search(file_name)
        rank = int(match.group(1)) if match else None
    return (rank, world if isinstance(world, int) else None,
            backend if isinstance(backend, str) else None)


def _event(analysis: SpanAnalysis, row: int, lo: float | None = None,
           hi: float | None = None) -> dict[str, Any]:
    m = analysis.model
    s, e = float(m.start[row]), float(m.end[row])
    if lo is not None and hi is not None:
        s, e = max(s, lo), min(e, hi)
    return {"name": m.name_of(row), "start_abs_us": round(analysis.model.origin_us + s, 3),
            "dur_us": round(e - s, 3)}


def _before_comm(analysis: SpanAnalysis, lo: float, first: float,
                 is_comm: np.ndarray) -> list[dict[str, Any]]:
    """The longest host events (clipped) between the step's start and its first
    collective: what this rank was busy with while the others may have been waiting.
    ``is_comm``: a mask over rows of ``analysis.comm_rows`` (made once, not per step)."""
    from tb_diagnostics.analysis.views.gaps import host_rows_during

    if not first > lo:
        return []
    rows = host_rows_during(analysis, lo, first, limit=MAX_BEFORE * 3)
    rows = [r for r in rows if not is_comm[r]][:MAX_BEFORE]
    return [_event(analysis, r, lo, first) for r in rows]


def distributed_section(analysis: SpanAnalysis, file_name: str) -> dict[str, Any] | None:
    """The span document's compact ``distributed`` section, or None for a trace that is
    neither distributed nor communicating: all the run-level analysis needs."""
    rank, world, backend = rank_of(analysis, file_name)
    sc = step_comm(analysis)
    has_comm = bool(collective_rows(analysis).size)
    if rank is None and not has_comm:
        return None
    m = analysis.model
    rows = collective_rows(analysis)
    starts = m.start[rows]
    is_comm = np.zeros(len(m), dtype=bool)
    is_comm[analysis.comm_rows] = True
    # Every window's figures read from the columns in one pass each (no view per window,
    # no search per window); the per-step entries stay Python (a list of dicts).
    c = analysis.windows.columns
    i0s = np.searchsorted(starts, c.start, side="left").tolist()
    i1s = np.searchsorted(starts, c.end, side="left").tolist()
    steps = []
    for step, w_start, wall, host_lo, first, comm_us, exposed_us, i0, i1 in zip(
            c.step_list(), c.start.tolist(), c.wall_us.tolist(), c.host_start.tolist(),
            sc.first_comm.tolist(), sc.comm_us.tolist(), sc.exposed_us.tolist(), i0s, i1s,
            strict=True):
        steps.append({
            "step": step,
            "start_abs_us": round(m.origin_us + w_start, 3),
            "wall_us": round(wall, 3),
            "comm_us": round(comm_us, 3),
            "exposed_comm_us": round(exposed_us, 3),
            # Time from the step's host start to its first collective: clock-free, so it
            # compares across machines whose clocks disagree.
            "pre_comm_us": None if np.isnan(first) else round(max(first - host_lo, 0.0), 3),
            "first_comm_abs_us": None if np.isnan(first) else round(m.origin_us + first, 3),
            "collectives": [_event(analysis, int(r))
                            for r in rows[i0:min(i1, i0 + MAX_COLLECTIVES)]],
            "before_comm": [] if np.isnan(first) else _before_comm(analysis, host_lo, first,
                                                                   is_comm),
        })
    return {"rank": rank, "world_size": world, "backend": backend, "steps": steps}
