"""Capture regions: the host work a CUDA graph (``torch.cuda.graph``, ``mode="reduce-overhead"``)
would capture, and what stays outside it.

A step's host work that launches device work (forward, backward, optimizer) is captured.
The unit is the op the user called (the outermost op above a launch call, or the bare
launch call where no op encloses it). What cannot be in a graph ends a capture and stays
outside, with the op call around it:

- a host sync (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, a synchronous
  ``cudaMemcpy``), and a CPU read of a device value (``.item()``: ``aten::item`` →
  ``aten::_local_scalar_dense`` → a device-to-host copy and a sync);
- the DataLoader's wait (``enumerate(DataLoader)``);
- a copy from pageable host memory (stream capture refuses it; the input batch is copied
  into the graph's static inputs outside the graph);
- a graph that is already replayed (``cudaGraphLaunch``): it keeps its own launch.

A region never crosses a step boundary. Its host time on each thread runs from its first
unit's start to its last unit's end there (the Python frames between the ops included:
a graph replay runs none of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import Intervals, union_sorted
from tb_diagnostics.analysis.replay import grouped
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.hierarchy import outermost_op
from tb_diagnostics.trace.categories import GRAPH_LAUNCH, PAGEABLE_HTOD

#: Host cost of one ``cudaGraphLaunch`` (µs): the median of the 70 calls in
#: ``../shared/traces/hta_a100_compiled_train_rank0_of16`` (A100, graphs of 1-20 kernels,
#: 13-569 µs). The other shared trace that replays graphs, ``hta_2022_v100_rank1_of2``
#: (V100, 2022), launches graphs of 339 and 502 kernels at 956-1,596 µs (median 1,240 µs,
#: about 2.9 µs a kernel): on that older CUDA a large graph's launch grows with its size,
#: and this figure is low for it. Over both traces' 82 calls the median is 32.0 µs.
GRAPH_LAUNCH_US = 27.5
#: Gap between consecutive kernels of one graph on a stream (µs): the median of the 5,034
#: such gaps in ``hta_2022_v100_rank1_of2``'s twelve graph replays (timestamps in whole
#: µs: 0 µs at the 10th percentile, 1 µs at the median, 2 µs at the 75th). The A100
#: trace's graphs wait on other streams between their kernels (median 203 µs), so they do
#: not measure the gap. A device whose own back-to-back gap is smaller keeps its own.
GRAPH_GAP_US = 1.0


@dataclass(frozen=True)
class CaptureRegions:
    """The span's capture regions; units and activities point at their region."""

    #: Per region: its window (step) index, the host lane it starts on (where the one
    #: graph launch goes), and its host extent on that lane.
    step: np.ndarray
    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    #: The captured op calls (units), by start; ``unit_region`` their region index.
    unit_rows: np.ndarray
    unit_region: np.ndarray
    #: Per device activity (``model.device_activity_rows`` order): its region, or -1
    #: (not launched from a captured unit: a graph already, a sync's own copy, no step).
    activity_region: np.ndarray
    #: Each region's host extent on each thread it ran on (first unit's start to last
    #: unit's end there): its lane, region index, start, end; by lane, then start.
    ext_lane: np.ndarray
    ext_region: np.ndarray
    ext_start: np.ndarray
    ext_end: np.ndarray

    @property
    def host(self) -> dict[int, Intervals]:
        """Per host lane, the regions' host time on it."""
        return per_lane_union(self.ext_lane, self.ext_start, self.ext_end)

    def __len__(self) -> int:
        return int(self.step.shape[0])

    @property
    def captured(self) -> np.ndarray:
        """Bool per device activity: launched from inside a capture region."""
        return self.activity_region >= 0


def _breakers(analysis: SpanAnalysis, launcher: np.ndarray) -> np.ndarray:
    """Host rows no graph can hold: syncs (``.item()`` included), DataLoader waits, the
    launches of pageable host-to-device copies, and graph launches."""
    m = analysis.model
    acts = m.device_activity_rows
    graph_calls = launcher[np.isin(m.name[launcher], m.name_ids_matching(GRAPH_LAUNCH))]
    pageable = acts[np.isin(m.name[acts], m.name_ids_matching(PAGEABLE_HTOD))]
    pageable_calls = m.launcher[pageable]
    pageable_calls = pageable_calls[pageable_calls >= 0]
    rows = np.concatenate([analysis.sync_rows, analysis.input_rows, graph_calls,
                           pageable_calls]).astype(np.int64)
    return sorted_sets.unique(rows)


@computed
def capture_regions(analysis: SpanAnalysis) -> CaptureRegions:
    m = analysis.model
    acts = m.device_activity_rows
    a_launcher = m.launcher[acts].astype(np.int64)
    launcher = sorted_sets.unique(a_launcher[a_launcher >= 0])
    top = outermost_op(analysis)

    def unit_of(rows: np.ndarray) -> np.ndarray:
        u = top[rows].astype(np.int64)
        return np.where(u >= 0, u, rows)

    breakers = _breakers(analysis, launcher)
    b_units = unit_of(breakers) if breakers.size else np.zeros(0, np.int64)
    units = sorted_sets.setdiff1d(unit_of(launcher), b_units) if launcher.size else launcher
    # A launch under a breaker's op (the copy of ``.item()``) is not captured either; nor
    # is a unit that a breaker encloses (an op inside the DataLoader's wait).
    if b_units.size and units.size:
        inside = np.zeros(units.size, dtype=bool)
        for lane in sorted_sets.unique(m.lane[b_units]).tolist():
            bl = b_units[m.lane[b_units] == lane]
            bl = bl[np.argsort(m.start[bl], kind="stable")]
            on = np.flatnonzero(m.lane[units] == lane)
            k = np.searchsorted(m.start[bl], m.start[units[on]], side="right") - 1
            ok = k >= 0
            reach = np.maximum.accumulate(m.end[bl])  # nested breakers: the outer one's end
            inside[on[ok]] = reach[k[ok]] > m.start[units[on[ok]]]
        units = units[~inside]
    units = units[np.argsort(m.start[units], kind="stable")]
    u_start, u_end, u_lane = m.start[units], m.end[units], m.lane[units].astype(np.int64)

    hs = analysis.host_steps
    step = hs.locate(u_start).astype(np.int64) if len(hs) else np.zeros(units.size, np.int64)
    keep = step >= 0
    units, u_start, u_end, u_lane, step = (units[keep], u_start[keep], u_end[keep],
                                           u_lane[keep], step[keep])
    # Regions: a new one at each step and after each breaker (every thread's).
    cut_times = np.sort(m.start[b_units]) if b_units.size else np.zeros(0)
    cuts = np.searchsorted(cut_times, u_start, side="right")
    new = np.ones(units.size, dtype=bool)
    new[1:] = (step[1:] != step[:-1]) | (cuts[1:] != cuts[:-1])
    del cuts, cut_times
    unit_region = np.cumsum(new) - 1
    n = int(unit_region[-1]) + 1 if units.size else 0
    first = np.flatnonzero(new)
    del new
    r_lane = u_lane[first]
    r_step = step[first]
    r_start = u_start[first]
    del first, step
    r_end = np.full(n, -np.inf)
    on_lane = u_lane == r_lane[unit_region]
    grouped.at(np.fmax, r_end, unit_region[on_lane], u_end[on_lane])
    del on_lane

    # Per lane and region: first unit's start to last unit's end.
    ext = [[], [], [], []]
    for lane in sorted_sets.unique(u_lane).tolist():
        on = np.flatnonzero(u_lane == lane)
        reg = unit_region[on]
        s = np.full(n, np.inf)
        e = np.full(n, -np.inf)
        grouped.at(np.fmin, s, reg, u_start[on])
        grouped.at(np.fmax, e, reg, u_end[on])
        got = np.flatnonzero(np.isfinite(s))
        got = got[np.argsort(s[got], kind="stable")]
        for col, v in zip(ext, (np.full(got.size, lane), got, s[got], e[got]), strict=True):
            col.append(v)
    ext_lane, ext_region, ext_start, ext_end = (
        np.concatenate(c) if c else np.zeros(0) for c in ext)
    del ext, u_start, u_end, u_lane

    a_region = np.full(acts.shape[0], -1, dtype=np.int64)
    has = np.flatnonzero(a_launcher >= 0)
    if has.size and units.size:
        by_row = np.argsort(units)
        sorted_units = units[by_row]
        au = unit_of(a_launcher[has])
        pos = np.minimum(np.searchsorted(sorted_units, au), units.size - 1)
        hit = sorted_units[pos] == au
        a_region[has[hit]] = unit_region[by_row][pos[hit]]
    return CaptureRegions(step=r_step, lane=r_lane, start=r_start, end=r_end,
                          unit_rows=units, unit_region=unit_region,
                          activity_region=a_region, ext_lane=ext_lane.astype(np.int64),
                          ext_region=ext_region.astype(np.int64), ext_start=ext_start,
                          ext_end=ext_end)


def per_lane_union(lane: np.ndarray, start: np.ndarray,
                   end: np.ndarray) -> dict[int, Intervals]:
    """Per lane, the union of the ``[start, end)`` intervals on it."""
    out = {}
    for x in sorted_sets.unique(lane).tolist():
        on = np.flatnonzero(lane == x)
        s = start[on]
        if s.shape[0] > 1 and not bool(np.all(s[1:] >= s[:-1])):
            on = on[np.argsort(s, kind="stable")]  # else the identity: no sort
            s = start[on]
        iv = union_sorted(s, end[on])
        if len(iv):
            out[int(x)] = iv
    return out
