"""Launch delays: how long each device activity waited after its launch call returned.

HTA's definition (``get_cuda_kernel_launch_stats``): ``launch_delay = kernel.ts −
(runtime.ts + runtime.dur)``, clipped at 0. A long delay on an idle device is
latency (the first-launch offset of the profiler is the extreme case); a long
delay on a busy device is queueing — the host runs ahead, which is what a
compute-bound step looks like.

A **module load** is a launch call that blocks the host for hundreds of ms: with
lazy loading (``CUDA_MODULE_LOADING=LAZY``, the default since CUDA 12.2) the
driver loads a kernel's module at its first launch, and cuDNN/cuBLAS load theirs
the same way. It is a one-time cost: flagged, and kept out of every launch figure
(the delays here, the launch idle of the verdict through :func:`module_loads`).
A launch that blocks because its stream's queue is full (HTA: 1024 pending
operations) is the device being the limit, not a module load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, union
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.activity_coverage import KERNEL_LAUNCH
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.categories import GRAPH_LAUNCH, Kind

#: A kernel's first launch call lasting this long (µs) is a one-time module load (a
#: launch costs 5-20 µs; lazy module loading takes hundreds of ms).
MODULE_LOAD_MIN_US = 100_000.0
#: Pending operations on a stream at which a launch waits for a free slot (HTA's
#: ``get_time_spent_blocked_on_full_queue``, CUDA's launch queue of 1024 entries).
QUEUE_FULL = 1024


@dataclass(frozen=True)
class LaunchDelays:
    """One entry per device activity whose launch call is in the trace."""

    acts: np.ndarray  # device activity rows
    launcher: np.ndarray  # their runtime/driver call rows
    delay: np.ndarray  # µs from the call's end to the activity's start (≥ 0)
    window: np.ndarray  # step window index of the activity, -1 outside steps
    queued: np.ndarray  # bool: earlier work on its stream was unfinished when the call returned
    device_busy: np.ndarray  # bool: some stream of the device was busy when the call returned
    artefact: np.ndarray  # bool: the profiler's first-launch offset
    graph: np.ndarray  # bool: replayed from a CUDA graph (cudaGraphLaunch): no launch of its own
    module_load: np.ndarray  # bool: launched by a one-time module load (see module_loads)

    def __len__(self) -> int:
        return int(self.acts.shape[0])


@computed
def launch_delays(analysis: SpanAnalysis) -> LaunchDelays:
    m = analysis.model
    acts = m.device_activity_rows
    launcher = m.launcher[acts]
    ok = launcher >= 0
    window = analysis.activity_step if len(analysis.host_steps) else np.zeros(
        acts.shape[0], dtype=np.int64)
    acts, launcher, window = acts[ok], launcher[ok].astype(np.int64), window[ok]
    t = m.end[launcher]
    delay = np.maximum(m.start[acts] - t, 0.0)
    queued = _stream_busy_until(analysis)[ok] > t
    busy = analysis.busy_intervals
    if len(busy):
        k = np.searchsorted(busy.start, t, side="right") - 1
        device_busy = (k >= 0) & (busy.end[np.maximum(k, 0)] > t)
    else:
        device_busy = np.zeros(acts.shape[0], dtype=bool)
    art = profiler_artefacts(analysis)
    artefact = acts == art.first_launch
    graph_ids = [i for i in unique(m.name[launcher]).tolist()
                 if GRAPH_LAUNCH.match(m.strings[i])]
    graph = np.isin(m.name[launcher], np.asarray(graph_ids, dtype=np.int64))
    module_load = np.isin(launcher, module_loads(analysis).rows)
    return LaunchDelays(acts=acts, launcher=launcher, delay=delay, window=window,
                        queued=queued, device_busy=device_busy, artefact=artefact, graph=graph,
                        module_load=module_load)


@dataclass(frozen=True)
class ModuleLoads:
    """Kernel launch calls that loaded a module: the first launch of a kernel lasting at
    least :data:`MODULE_LOAD_MIN_US`, its stream not full."""

    rows: np.ndarray  # the launch call rows, in time order
    acts: np.ndarray  # the kernel each one launched
    intervals: Intervals  # host time the calls took: one-time, not launch overhead

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def total_us(self) -> float:
        return self.intervals.total


@computed
def module_loads(analysis: SpanAnalysis) -> ModuleLoads:
    m = analysis.model
    acts = m.device_activity_rows
    launcher = m.launcher[acts]
    cand = np.flatnonzero((launcher >= 0) & (m.kind[acts] == Kind.KERNEL))
    cand = cand[m.dur[launcher[cand]] >= MODULE_LOAD_MIN_US]
    keep = []
    for i in cand.tolist():
        call, act = int(launcher[i]), int(acts[i])
        if not KERNEL_LAUNCH.match(m.name_of(call)):
            continue
        same = acts[m.name[acts] == m.name[act]]
        if m.start[same].min() < m.start[act]:
            continue  # not the kernel's first launch: its module was already loaded
        if _pending_on_stream(analysis, act, float(m.start[call])) >= QUEUE_FULL:
            continue  # the launch waited for a slot in a full queue
        keep.append(i)
    sel = np.asarray(keep, dtype=np.int64)
    rows, hit = launcher[sel].astype(np.int64), acts[sel]
    return ModuleLoads(rows=rows, acts=hit, intervals=union(m.start[rows], m.end[rows]))


def _pending_on_stream(analysis: SpanAnalysis, act: int, t: float) -> int:
    """Activities of ``act``'s stream launched before ``t`` and not started by then."""
    m = analysis.model
    acts = m.device_activity_rows
    same = (m.device[acts] == m.device[act]) & (m.stream[acts] == m.stream[act])
    launcher = m.launcher[acts]
    ok = same & (launcher >= 0)
    return int(((m.start[np.maximum(launcher[ok], 0)] < t) & (m.start[acts[ok]] >= t)).sum())


def _stream_busy_until(analysis: SpanAnalysis) -> np.ndarray:
    """For every device activity (``model.device_activity_rows``' order), the latest end
    of the activities before it on its stream (a column per activity: one per model row
    was 32 MB at 10⁶ steps, read at the activities only).

    A launch whose stream is still busy when the call returns has to queue: its
    delay is the stream's backlog, not latency.
    """
    m = analysis.model
    acts = m.device_activity_rows
    out = np.full(acts.shape[0], -np.inf)
    if not acts.size:
        return out
    # int64 first: the columns may be as narrow as int8 (trace.model).
    key = m.device[acts].astype(np.int64) * (1 << 32) + m.stream[acts]
    order = np.lexsort((m.start[acts], key))
    key, ends = key[order], m.end[acts][order]
    bounds = np.append(np.flatnonzero(np.r_[True, key[1:] != key[:-1]]), order.size)
    prev = np.full(order.size, -np.inf)
    # One vectorised running max per stream (there are a handful of streams).
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        prev[a + 1:b] = np.maximum.accumulate(ends[a:b])[:-1]
    out[order] = prev
    return out
