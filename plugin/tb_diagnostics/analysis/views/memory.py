"""Allocator memory per step and device, from ``[memory]`` events (``profile_memory=True``).

Each ``[memory]`` instant event is one allocation (+bytes) or free (−bytes) and,
since 2022, carries the allocator's running ``Total Allocated`` and ``Total
Reserved``. 2021 traces only have the bytes, so the allocated curve is rebuilt
as a running sum: exact in its steps, but relative to whatever was allocated
before profiling started (``relative=True``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed

#: Kineto's c10::DeviceType values.
DEVICE_TYPES = {0: "CPU", 1: "CUDA"}


@dataclass(frozen=True)
class DeviceMemory:
    """One device's allocator figures, per step window (NaN where no event)."""

    device_type: int
    device_id: int
    relative: bool  # True when the curve is a running sum (no totals in the trace)
    start_alloc: np.ndarray  # allocated just before the window's first event
    end_alloc: np.ndarray  # allocated after the window's last event
    peak_alloc: np.ndarray
    peak_reserved: np.ndarray  # NaN when the trace has no reserved totals
    net_bytes: np.ndarray  # allocations minus frees inside the window
    events: np.ndarray  # number of events inside the window
    peak_alloc_span: float
    peak_reserved_span: float
    total_mem: float | None  # deviceProperties totalGlobalMem, where known

    @property
    def label(self) -> str:
        kind = DEVICE_TYPES.get(self.device_type, f"device type {self.device_type}")
        return kind if self.device_id < 0 else f"{kind} {self.device_id}"


@computed
def memory_series(analysis: SpanAnalysis) -> list[DeviceMemory]:
    m = analysis.model
    mem = m.memory
    if not len(mem):
        return []
    hs = analysis.host_steps
    n_win = len(analysis.windows)
    if len(hs):
        lo, hi = hs.host_start, hs.host_end
    else:
        w = analysis.windows[0]
        lo, hi = np.asarray([w.host_start]), np.asarray([w.host_end + 1e-6])
    out = []
    keys = sorted(set(zip(mem.device_type.tolist(), mem.device_id.tolist(), strict=True)))
    for dtype, did in keys:
        sel = np.flatnonzero((mem.device_type == dtype) & (mem.device_id == did))
        ts = mem.ts[sel]
        nbytes = mem.nbytes[sel]
        alloc = mem.total_allocated[sel]
        relative = bool(np.isnan(alloc).all())
        if relative:
            alloc = np.cumsum(nbytes)
        reserved = mem.total_reserved[sel]
        before = np.where(np.isnan(alloc - nbytes), np.nan, alloc - nbytes)
        start_alloc = np.full(n_win, np.nan)
        end_alloc = np.full(n_win, np.nan)
        peak_alloc = np.full(n_win, np.nan)
        peak_res = np.full(n_win, np.nan)
        net = np.zeros(n_win)
        count = np.zeros(n_win, dtype=np.int64)
        a = np.searchsorted(ts, lo, side="left")
        b = np.searchsorted(ts, hi, side="left")
        for k in range(min(n_win, lo.shape[0])):
            if b[k] <= a[k]:
                continue
            seg = slice(a[k], b[k])
            start_alloc[k] = before[a[k]]
            end_alloc[k] = alloc[b[k] - 1]
            peak_alloc[k] = np.nanmax(alloc[seg])
            r = reserved[seg]
            peak_res[k] = np.nanmax(r) if not np.isnan(r).all() else np.nan
            net[k] = float(nbytes[seg].sum())
            count[k] = b[k] - a[k]
        out.append(DeviceMemory(
            device_type=int(dtype), device_id=int(did), relative=relative,
            start_alloc=start_alloc, end_alloc=end_alloc, peak_alloc=peak_alloc,
            peak_reserved=peak_res, net_bytes=net, events=count,
            peak_alloc_span=float(np.nanmax(alloc)) if alloc.size else float("nan"),
            peak_reserved_span=(float(np.nanmax(reserved)) if not np.isnan(reserved).all()
                                else float("nan")),
            total_mem=_total_mem(analysis, int(dtype), int(did))))
    return out


def _total_mem(analysis: SpanAnalysis, dtype: int, did: int) -> float | None:
    if dtype != 1:
        return None
    for p in analysis.model.meta.device_properties:
        if p.get("id") == did and isinstance(p.get("totalGlobalMem"), int | float):
            return float(p["totalGlobalMem"])
    return None
