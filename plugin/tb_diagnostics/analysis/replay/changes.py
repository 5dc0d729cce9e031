"""The changes a replay can apply, each the fix some rules propose.

Each says what it assumes (``ASSUMES``); the README lists them.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import Intervals, union_sorted
from tb_diagnostics.analysis.replay.capture import (
    GRAPH_GAP_US,
    GRAPH_LAUNCH_US,
    capture_regions,
    per_lane_union,
)
from tb_diagnostics.analysis.replay.engine import Change
from tb_diagnostics.analysis.replay.graph import replay_graph
from tb_diagnostics.analysis.replay.loader import (
    RECEIVE_US_PER_TENSOR,
    SHM_FAULT_US_PER_PAGE,
    SHM_RELEASE_US_PER_PAGE,
    loader_waits,
)
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.chains import memory_bound_chains
from tb_diagnostics.analysis.views.hierarchy import outermost_op
from tb_diagnostics.analysis.views.roofline import roofline

ASSUMES = {
    "input": "the DataLoader's batches come from worker processes with enough of them: its "
             "wait on the training thread shrinks to the batch's hand-off, "
             f"{RECEIVE_US_PER_TENSOR:g} µs per tensor the run moves after it (the "
             "receive, measured on the shared ResNet-50 num_workers=4 run, whose workers "
             "are busy in Python), and, for a loader without workers before, "
             f"{SHM_RELEASE_US_PER_PAGE:g} + {SHM_FAULT_US_PER_PAGE:g} µs per 4 KiB page "
             "of its bytes (releasing the previous batch's shared memory, first touch "
             "of the new one: the same pair); the host runs as fast as before (the "
             "workers' contention for its cores is not in the trace)",
    "syncs": "the named syncs no longer wait for the device; the device work stays",
    "profiler": "the profiler's own host time (buffer requests, overhead, its flush sync) "
                "is gone",
    "fusion": "each memory-bound chain becomes one kernel that moves its largest op's bytes "
              "at the bandwidth the chain achieved",
    "launch": "each op call that launches device work costs the host 5 µs per launch, no more "
              "(a C++ launch loop); the rest of the host's time stays; on the device each "
              "kernel keeps its launch latency and queues behind its stream's earlier work "
              "as far as the replay finds it there",
    "graphs": "each step's host work that launches device work (forward, backward, optimizer) "
              "is captured as CUDA graphs, split where a sync, an .item() read, a DataLoader "
              "wait or a copy from pageable memory ends a capture (those stay, as do graphs "
              "already replayed); a region's host time (Python, dispatch, launches) goes but "
              f"one cudaGraphLaunch of {GRAPH_LAUNCH_US:g} µs (median of the shared "
              "hta_a100_compiled_train trace's 70); its kernels follow each other "
              f"{GRAPH_GAP_US:g} µs apart (median gap inside the shared hta_2022_v100 trace's "
              "graphs), or at the device's own back-to-back gap where smaller",
    "amp": "fp32 GEMM and convolution kernels run in bf16 (fp16 without bf16): their time "
           "scales by the precisions' peak ratio, no lower than half their bytes at the "
           "memory bandwidth",
}


def _per_lane(analysis: SpanAnalysis, rows: np.ndarray, start: np.ndarray | None = None,
              end: np.ndarray | None = None) -> dict[int, Intervals]:
    """Per host lane, the union of the rows' intervals: ``[start, end)`` of each row as
    given (parts of calls), else the rows' own."""
    m = analysis.model
    start = m.start[rows] if start is None else start
    end = m.end[rows] if end is None else end
    lanes = m.lane[rows]
    out = {}
    for lane in sorted_sets.unique(lanes).tolist():
        on = lanes == lane
        order = np.argsort(start[on], kind="stable")
        out[int(lane)] = union_sorted(start[on][order], end[on][order])
    return out


def input_change(analysis: SpanAnalysis) -> Change | None:
    """The DataLoader's batches come from worker processes: each wait on the thread that
    iterates it shrinks to the batch's hand-off (:mod:`.loader`: the receive per tensor,
    and for a loader that did not use workers the shared-memory page costs of the bytes
    the run moves), kept at the wait's end, where the batch arrives."""
    waits = loader_waits(analysis)
    if not len(waits):
        return None
    cut = np.maximum(waits.end - waits.handoff_us, waits.start)
    on = cut > waits.start
    if not on.any():
        return None
    return Change(removed_host=per_lane_union(waits.lane[on], waits.start[on], cut[on]))


def sync_change(analysis: SpanAnalysis, rows: np.ndarray) -> Change | None:
    """These sync calls no longer wait (``.item()`` moved out of the loop, no
    ``torch.cuda.synchronize()``, pinned memory for the copies), nor the sync calls they
    make (``aten::item`` → ``aten::_local_scalar_dense`` → ``cudaStreamSynchronize``)."""
    if not rows.size:
        return None
    m = analysis.model
    is_sync = set(analysis.sync_rows.tolist())
    freed = set(int(r) for r in rows.tolist())
    # The syncs nested in a freed one wait for the same thing, and so do the sync frames
    # around it (``torch.cuda.synchronize`` → ``cudaDeviceSynchronize``).
    for s in list(is_sync):
        p = int(m.parent[s])
        while p >= 0:
            if p in freed:
                freed.add(int(s))
                break
            p = int(m.parent[p])
    for r in list(freed):
        p = int(m.parent[r])
        while p >= 0:
            if p in is_sync:
                freed.add(p)
            p = int(m.parent[p])
    return Change(no_wait=frozenset(freed))


def profiler_change(analysis: SpanAnalysis) -> Change | None:
    """The profiler's own host time removed, on every host thread it held up."""
    art = profiler_artefacts(analysis)
    if not len(art.host) and not art.flush_syncs.size:
        return None
    m = analysis.model
    lanes = {int(x) for x in m.lane[m.host_rows].tolist()} if len(art.host) else set()
    return Change(removed_host=dict.fromkeys(lanes, art.host),
                  no_wait=frozenset(int(r) for r in art.flush_syncs.tolist()))


def combine(changes: list[Change]) -> Change:
    """Every change at once: host time removed by any, syncs freed by any; per device
    activity the smallest of the changes' factors (two fixes of one kernel, fused by
    ``fusion`` and by ``compile``, are the same fix, not one after the other; fixes of
    different kernels never meet) and the smallest graph gap."""
    removed: dict[int, list[Intervals]] = {}
    for c in changes:
        for lane, iv in c.removed_host.items():
            removed.setdefault(lane, []).append(iv)
    merged = {}
    for lane, ivs in removed.items():
        s = np.concatenate([iv.start for iv in ivs])
        e = np.concatenate([iv.end for iv in ivs])
        order = np.argsort(s, kind="stable")
        merged[lane] = union_sorted(s[order], e[order])
    scales = [c.device_scale for c in changes if c.device_scale is not None]
    scale = np.min(np.stack(scales), axis=0) if scales else None
    gaps = [c.stream_gap for c in changes if c.stream_gap is not None]
    gap = np.fmin.reduce(np.stack(gaps), axis=0) if gaps else None
    return Change(removed_host=merged,
                  no_wait=frozenset().union(*(c.no_wait for c in changes)),
                  device_scale=scale, stream_gap=gap)


def fusion_change(analysis: SpanAnalysis) -> Change | None:
    """Every memory-bound chain fused into one kernel (``torch.compile``)."""
    chains = memory_bound_chains(analysis)
    if not chains:
        return None
    scale = np.ones(analysis.model.device_activity_rows.shape[0])
    for c in chains:
        scale[c.activities] = c.fused_factor
    return Change(device_scale=scale)


def amp_change(analysis: SpanAnalysis) -> Change | None:
    """fp32 GEMMs and convolutions in bf16 (fp16 where the device has no bf16): their
    kernels' time scales by the ratio of the two precisions' peaks, and no lower than
    their halved bytes at the memory bandwidth."""
    rf = roofline(analysis)
    peaks = rf.peaks
    if peaks is None or analysis.cpu_only or not peaks.bandwidth_gbps:
        return None
    target = "bf16" if peaks.peak("bf16") else "fp16" if peaks.peak("fp16") else None
    fp32 = peaks.peak("fp32")
    if target is None or not fp32:
        return None
    factor = np.ones(max(len(rf.figures), 1))
    for g, f in enumerate(rf.figures):
        if f.modelled and f.group.cost.tensor_op and f.precision == "fp32" and f.device_us > 0:
            compute = f.device_us * fp32 / peaks.peak(target)
            memory = f.bytes / 2 / (peaks.bandwidth_gbps * 1e3)
            factor[g] = min(max(compute, memory) / f.device_us, 1.0)
    if np.all(factor == 1.0):
        return None
    group = rf.activity_group
    scale = np.where(group >= 0, factor[np.maximum(group, 0)], 1.0)
    return Change(device_scale=scale)


#: What one launch costs the host once its overhead is cut (a C++ launch loop; the
#: ``launch`` change's stated figure).
LAUNCH_COST_US = 5.0


def _launching_ops(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """The outermost op calls that launch device work, and how many launches each makes."""
    m = analysis.model
    launchers = m.launcher[m.device_activity_rows]
    launchers = sorted_sets.unique(launchers[launchers >= 0])
    if not launchers.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    top = outermost_op(analysis)[launchers]
    top = top[top >= 0]
    rows, counts = sorted_sets.unique_counts(top)
    return rows.astype(np.int64), counts


def launch_change(analysis: SpanAnalysis, cost_us: float = LAUNCH_COST_US) -> Change | None:
    """Each op call that launches work costs the host ``cost_us`` per launch, no more."""
    rows, counts = _launching_ops(analysis)
    if not rows.size:
        return None
    m = analysis.model
    keep = m.start[rows] + counts * cost_us
    cut = keep < m.end[rows]
    if not cut.any():
        return None
    return Change(removed_host=_per_lane(analysis, rows[cut], keep[cut],
                                                   m.end[rows[cut]]))


def graphs_change(analysis: SpanAnalysis,
                  launch_us: float = GRAPH_LAUNCH_US) -> Change | None:
    """CUDA graphs (``torch.cuda.graph``): each capture region (:func:`capture_regions`:
    a step's launching op calls between syncs, ``.item()`` reads and DataLoader waits)
    replays as one graph. Its host time on every thread goes, but ``launch_us`` for its
    one ``cudaGraphLaunch`` at its start; its kernels follow each other at the graph's
    gap (:data:`GRAPH_GAP_US`, or the device's own back-to-back gap where smaller).
    What lies outside every region stays: the syncs, the DataLoader's wait, graphs
    already replayed."""
    regions = capture_regions(analysis)
    if not len(regions) or regions.unit_rows.size < 2:
        return None
    # The graph launch, on the thread its region starts on, at the region's start.
    start = regions.ext_start.copy()
    pays = regions.ext_lane == regions.lane[regions.ext_region]
    start[pays] = np.minimum(start[pays] + launch_us, regions.ext_end[pays])
    keep = regions.ext_end > start
    removed = per_lane_union(regions.ext_lane[keep], start[keep], regions.ext_end[keep])
    gap = min(GRAPH_GAP_US, replay_graph(analysis).stream_gap_us)
    stream_gap = np.where(regions.captured, gap, np.nan)
    return Change(removed_host=removed, stream_gap=stream_gap)


def host_removed_change(analysis: SpanAnalysis, rows: np.ndarray) -> Change | None:
    """These host calls' time is gone (compile work that stops recurring, a copy removed)."""
    if not rows.size:
        return None
    return Change(removed_host=_per_lane(analysis, rows))


def device_removed_change(analysis: SpanAnalysis, rows: np.ndarray) -> Change | None:
    """These device activities take no time (a copy that is no longer made)."""
    acts = analysis.model.device_activity_rows
    pos = np.searchsorted(acts, rows)
    pos = pos[(pos < acts.shape[0]) & (acts[np.minimum(pos, acts.shape[0] - 1)] == rows)]
    if not pos.size:
        return None
    scale = np.ones(acts.shape[0])
    scale[pos] = 0.0
    return Change(device_scale=scale)


def tuned_change(analysis: SpanAnalysis, attainable: float) -> Change | None:
    """Every priced op's kernels reach ``attainable`` of their roofline (no faster than
    they already are)."""
    rf = roofline(analysis)
    factor = np.ones(max(len(rf.figures), 1))
    for g, f in enumerate(rf.figures):
        if f.ideal_us is not None and f.device_us > 0:
            factor[g] = min(f.ideal_us / attainable / f.device_us, 1.0)
    if np.all(factor == 1.0):
        return None
    group = rf.activity_group
    return Change(device_scale=np.where(group >= 0, factor[np.maximum(group, 0)], 1.0))


def pinned_change(analysis: SpanAnalysis, calls: np.ndarray,
                  cost_us: float = LAUNCH_COST_US) -> Change | None:
    """Copies from pinned memory: these copy calls (``cudaMemcpyAsync`` from pageable
    memory, which blocks while the driver stages the data) return after ``cost_us``."""
    if not calls.size:
        return None
    m = analysis.model
    calls = sorted_sets.unique(calls)
    keep = m.start[calls] + cost_us
    cut = keep < m.end[calls]
    if not cut.any():
        return None
    return Change(removed_host=_per_lane(analysis, calls[cut], keep[cut],
                                                   m.end[calls[cut]]))
