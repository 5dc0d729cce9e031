"""Profiler artefacts: time the profiler spent on itself, which no rule may blame on the user.

Three artefacts show up in Kineto traces (the Hugging Face profiling guide's cheat
sheet; kineto #1020):

- **Activity Buffer Request** — CUPTI allocating a new activity buffer (a CUPTI
  ``overhead`` activity). It inflates the launch that triggered it "by orders of
  magnitude" and opens a gap on the device lane. Other ``overhead`` events
  (``Buffer Flush``…) are the profiler's too.
- **The flush sync** — the ``cudaDeviceSynchronize`` the profiler issues when the
  active window ends, to collect the device's events. With Python stacks it is
  the one called from ``torch/profiler`` / ``torch/autograd/profiler.py``;
  without them, the device sync that starts after the last step has ended (or, in
  a trace without steps, after the last op).
- **The first-launch offset** — the first kernel of the window starting long
  after its launch although the device had nothing queued: the profiler
  initialising its buffers (the guide's ~2.5 ms CPU↔GPU lane offset).

Nsight Systems treats its own flush/stop overhead the same way: as busy, so its
gap rules never report it ("exclude GPU gaps that cannot be addressed by the
user", ``gpustats.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import Intervals, complement, union
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.hierarchy import innermost_op
from tb_diagnostics.analysis.views.pystack import called_by_profiler
from tb_diagnostics.trace.categories import Kind

BUFFER_REQUEST = re.compile(r"^Activity Buffer Request")
#: Device-wide syncs the profiler issues to flush (CUDA runtime, HIP, driver API).
FLUSH_SYNC_NAMES = frozenset({"cudaDeviceSynchronize", "hipDeviceSynchronize",
                              "cuCtxSynchronize"})
#: A first launch whose kernel starts this long after the call returned, on an idle
#: device, is the profiler's offset (HTA's launch-delay outlier cut-off is 100 µs;
#: a normal launch latency is 5-20 µs).
FIRST_LAUNCH_MIN_US = 100.0
#: ...and it must be this many times the median launch delay of the rest.
FIRST_LAUNCH_RATIO = 10.0


@dataclass(frozen=True)
class Artefacts:
    """Every profiler artefact of a span, as rows and as time."""

    buffer_requests: np.ndarray  # rows named "Activity Buffer Request"
    overhead: np.ndarray  # other profiler overhead rows (Buffer Flush…)
    flush_syncs: np.ndarray  # the profiler's flush cudaDeviceSynchronize rows
    first_launch: int  # the device activity delayed by the first-launch offset, or -1
    first_launch_delay_us: float  # its launch delay (0 when none)
    buffer_gaps: Intervals  # device idle periods opened by a buffer request
    host: Intervals  # host time that is the profiler's (requests, overhead, flush syncs)
    device_gaps: Intervals  # device idle time that is the profiler's
    rows: np.ndarray  # all artefact rows, sorted

    def contains(self, rows: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``rows`` are artefacts."""
        return np.isin(rows, self.rows)

    @property
    def any(self) -> bool:
        return bool(self.rows.size) or self.first_launch >= 0


@computed
def profiler_artefacts(analysis: SpanAnalysis) -> Artefacts:
    m = analysis.model
    requests = m.rows_matching(BUFFER_REQUEST)
    overhead = sorted_sets.setdiff1d(m.rows_of({Kind.OVERHEAD}), requests)
    flush = _flush_syncs(analysis)
    first, first_delay = _first_launch(analysis, requests)

    # Device idle periods that a buffer request overlaps (the request sits on the
    # host inside the launch it inflated, or on the device lane itself).
    gaps = _device_idle(analysis)
    hit = np.zeros(len(gaps), dtype=bool)
    for r in requests.tolist():
        hit |= (gaps.start < m.end[r]) & (gaps.end > m.start[r])
    buffer_gaps = Intervals(gaps.start[hit], gaps.end[hit])

    host_rows = np.concatenate([requests, overhead, flush])
    host = union(m.start[host_rows], m.end[host_rows])
    dev_s = [buffer_gaps.start]
    dev_e = [buffer_gaps.end]
    if first >= 0:
        launcher = int(m.launcher[first])
        dev_s.append(np.asarray([m.end[launcher]]))
        dev_e.append(np.asarray([m.start[first]]))
    device = union(np.concatenate(dev_s), np.concatenate(dev_e))
    rows = unique(host_rows)
    return Artefacts(buffer_requests=requests, overhead=overhead, flush_syncs=flush,
                     first_launch=first, first_launch_delay_us=first_delay,
                     buffer_gaps=buffer_gaps, host=host, device_gaps=device, rows=rows)


def _device_idle(analysis: SpanAnalysis) -> Intervals:
    """Idle periods of the device between its first and last activity."""
    busy = analysis.busy_intervals
    if analysis.cpu_only or not len(busy):
        return Intervals.empty()
    return complement(busy, float(busy.start[0]), float(busy.end[-1]))


def _flush_syncs(analysis: SpanAnalysis) -> np.ndarray:
    m = analysis.model
    cands = m.rows_named(FLUSH_SYNC_NAMES)
    cands = cands[np.isin(m.kind[cands], (Kind.RUNTIME, Kind.DRIVER))]
    if not cands.size:
        return cands
    hs = analysis.host_steps
    if len(hs):
        after = float(hs.host_end[-1])
    else:
        ops = analysis.op_rows
        after = float(m.start[ops].max()) if ops.size else -np.inf
    inner = innermost_op(analysis)
    out, stackless = [], []
    for r in cands.tolist():
        by_profiler = called_by_profiler(analysis, r)
        if by_profiler is not None:
            if by_profiler:
                out.append(r)
        elif m.start[r] >= after and inner[r] < 0:
            stackless.append(r)
    # Without stacks, the profiler's flush is the last device sync after the window
    # (a user's own synchronize() after the loop would come before it).
    out.extend(stackless[-1:])
    return np.asarray(sorted(out), dtype=np.int64)


def _first_launch(analysis: SpanAnalysis, requests: np.ndarray) -> tuple[int, float]:
    m = analysis.model
    acts = m.device_activity_rows
    launcher = m.launcher[acts]
    ok = launcher >= 0
    if ok.sum() < 2:
        return -1, 0.0
    acts, launcher = acts[ok], launcher[ok]
    delay = np.maximum(m.start[acts] - m.end[launcher], 0.0)
    first = int(np.argmin(m.start[launcher]))
    d0 = float(delay[first])
    rest = np.delete(delay, first)
    t_launch = float(m.end[launcher[first]])
    # The device must have had nothing queued: otherwise the delay is queueing.
    busy = analysis.busy_intervals
    k = np.searchsorted(busy.start, t_launch, side="right") - 1
    device_busy = k >= 0 and busy.end[k] > t_launch
    has_request = bool(requests.size) and bool(np.any(
        (m.start[requests] < m.start[acts[first]]) & (m.end[requests] > m.start[launcher[first]])))
    if device_busy and not has_request:
        return -1, 0.0
    if d0 >= FIRST_LAUNCH_MIN_US and (has_request or d0 >= FIRST_LAUNCH_RATIO *
                                      float(np.median(rest))):
        return int(acts[first]), d0
    return -1, 0.0
