"""Which segments of the steps' critical paths a what-if change shortens.

A change (:class:`~tb_diagnostics.analysis.replay.engine.Change`) says what it takes
away; each segment of a step's path (:mod:`tb_diagnostics.analysis.critpath`) loses what
of it the change takes away:

- a host segment (kind ``host``, ``input`` or ``comm``, its event a host call) loses its
  overlap with the host time the change removes on its thread (``removed_host``);
- a kernel, copy or memset (``device``) the change makes faster (``device_scale`` below 1)
  loses that part of its time; collectives keep theirs, as the replay has it;
- a wait after the stream's previous activity (``latency`` named after the activity) that
  the change sets a smaller gap for (``stream_gap``) loses what is above that gap.

A sync the change frees (``no_wait``), or a blocking call it shortens (a copy from pageable
memory made from pinned), shortens no segment: while the host waited in it, the path ran
through the device work and latency the host waited for, and that work still runs. The
host no longer waits through it (``freed``): the path can leave it, if nothing else the
step's end waits on holds it there.

What the segments lose is not the saving: the replay (``views.whatif``) says what the
step saves, once the path moves to the next-longest chain of events, and a step's window
moves with the steps around it (the device-side partition, ``steps.device_partition``):
a step can save time that is not on its own path: when the steps before it shorten, its
host work can run while their device work still does, and the partition gives it an
emptier window. ``saving_off_path_us`` says how much of a card's saving is such time, so
the reports say where the saving comes from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.critpath import KIND_NAMES, critical_paths
from tb_diagnostics.analysis.critpath.edges import COMM, DEVICE, HOST, INPUT, LATENCY
from tb_diagnostics.analysis.intervals import Intervals, as_union, covered, union
from tb_diagnostics.analysis.path_clause import Charged, charge, segment_indices
from tb_diagnostics.analysis.replay.engine import Change
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.columns import gather

#: Names a card says it shortens, the most first.
TOP_NAMES = 3


@dataclass(frozen=True)
class PathCut:
    """What a change takes off the paths of some windows."""

    windows: np.ndarray  # int64 window indices (an array: a million warm windows)
    path_us: float  # the windows' paths, in all
    cut_us: float  # what the change takes off their segments, in all
    by_kind: dict[str, float]  # cut_us by segment kind
    segments: int  # segments it shortens
    top: tuple[Charged, ...]  # where, most first
    #: The path's device work and latency the host no longer waits through (freed syncs).
    freed_us: float
    freed_top: tuple[Charged, ...]
    window_cut_us: np.ndarray  # per window of ``windows``: cut and freed time of its path

    def off_path_us(self, savings_us: np.ndarray) -> float:
        """Of the windows' replayed savings (``savings_us``, per window of ``windows``),
        what is more than each one's path loses or frees, in all: a window saves that much
        only as its bounds move against its own work (the steps before it end sooner, or
        later), not because anything its end waited on got shorter."""
        return float(np.maximum(np.asarray(savings_us) - self.window_cut_us, 0.0).sum())

    def to_dict(self, savings_us: np.ndarray | None = None) -> dict[str, Any]:
        """Per window (a card's figures are per step), as the card's ``path_segments``;
        with the windows' savings, ``saving_off_path_us`` (:meth:`off_path_us`)."""
        n = max(len(self.windows), 1)
        off = None if savings_us is None else round(self.off_path_us(savings_us) / n, 3)

        def named(top: tuple[Charged, ...]) -> list[dict[str, Any]]:
            return [dict(c.to_dict(), us=round(c.us / n, 3)) for c in top]

        return {"shortened_us": round(self.cut_us / n, 3),
                "path_us": round(self.path_us / n, 3),
                "share": round(self.cut_us / self.path_us, 6) if self.path_us > 0 else 0.0,
                "by_kind": {k: round(v / n, 3) for k, v in self.by_kind.items()},
                "segments": self.segments,
                "top": named(self.top),
                "freed_us": round(self.freed_us / n, 3),
                "freed_top": named(self.freed_top),
                "saving_off_path_us": off}


def _covers(iv: Intervals, t: np.ndarray) -> np.ndarray:
    """Whether each time lies inside one of the intervals."""
    k = np.searchsorted(iv.start, t, side="right") - 1
    return t < gather(iv.end, k, -np.inf)


def _freed_waits(analysis: SpanAnalysis, change: Change) -> tuple[np.ndarray, np.ndarray]:
    """When the host no longer waits for the device with the change: the syncs it frees,
    and the part it removes of calls that block for the device (syncs, copies from
    pageable memory: ``SpanAnalysis.sync_rows``, ``whatif.pageable_htod_calls``)."""
    from tb_diagnostics.analysis.views.whatif import pageable_htod_calls

    m = analysis.model
    freed = np.fromiter(change.no_wait, dtype=np.int64) if change.no_wait else \
        np.zeros(0, dtype=np.int64)
    starts, ends = [m.start[freed]], [m.end[freed]]
    if change.removed_host:
        blocking = sorted_sets.union1d(analysis.sync_rows, pageable_htod_calls(analysis))
        for lane, iv in change.removed_host.items():
            calls = blocking[m.lane[blocking] == lane]
            if not calls.size or not len(iv):
                continue
            b = union(m.start[calls], m.end[calls])
            # Removed and blocking both: between consecutive ends of either, where both cover.
            pts = sorted_sets.unique(np.concatenate([iv.start, iv.end, b.start, b.end]))
            mid = (pts[:-1] + pts[1:]) / 2
            both = _covers(iv, mid) & _covers(b, mid)
            starts.append(pts[:-1][both])
            ends.append(pts[1:][both])
    return np.concatenate(starts), np.concatenate(ends)


#: Path segments taken at once: every segment's cut is its own (the change's intervals are
#: unioned once for all), so a span's million steps cost a chunk's temporaries, not tens of
#: arrays of all their segments (10⁶ steps: ~8 M segments, 64 MB an array).
SEGMENT_CHUNK = 1 << 18


def segment_cuts(analysis: SpanAnalysis, change: Change,
                 idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per path segment ``idx``: the µs the change takes off it, and the µs of it the host
    no longer waits through (a freed sync's); neither more than its length."""
    removed = {lane: as_union(iv) for lane, iv in change.removed_host.items() if len(iv)}
    w_s, w_e = _freed_waits(analysis, change)
    waits = union(w_s, w_e) if w_s.size else None
    act_of_row = None
    if change.device_scale is not None or change.stream_gap is not None:
        act_of_row = _activity_of_row(analysis)
    cut = np.zeros(idx.shape[0])
    freed = np.zeros(idx.shape[0])
    for lo in range(0, idx.shape[0], SEGMENT_CHUNK):
        hi = min(lo + SEGMENT_CHUNK, idx.shape[0])
        cut[lo:hi], freed[lo:hi] = _chunk_cuts(analysis, change, idx[lo:hi], removed, waits,
                                               act_of_row)
    return cut, freed


def _activity_of_row(analysis: SpanAnalysis) -> np.ndarray:
    """Per model row, its index among the device activities (-1: none): one gather per
    segment, not a binary search of the activities (10⁶ steps: 8 M segments a card)."""
    m = analysis.model
    acts = m.device_activity_rows
    ix = np.int32 if len(m) < 2**31 - 1 else np.int64
    out = np.full(len(m), -1, dtype=ix)
    out[acts] = np.arange(acts.shape[0], dtype=ix)
    return out


def _chunk_cuts(analysis: SpanAnalysis, change: Change, idx: np.ndarray,
                removed: dict[int, Intervals], waits: Intervals | None,
                act_of_row: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`segment_cuts` of some segments, given the change's host time removed per lane
    and the device waits it frees (both unioned), and where the change scales or re-gaps
    activities, each row's activity index (:func:`_activity_of_row`)."""
    cp = critical_paths(analysis)
    m = analysis.model
    rows, kind = cp.row[idx], cp.kind[idx]
    s = cp.start[idx]
    e = s + cp.dur[idx]
    cut = np.zeros(idx.shape[0])
    freed = np.zeros(idx.shape[0])
    ok = rows >= 0
    is_host = np.zeros(idx.shape[0], dtype=bool)
    is_host[ok] = m.is_host[rows[ok]]
    # Host time: a host-kind segment of a host call (a launch latency is named after its
    # launch call, but it is the device's wait, not the host's time).
    host_time = is_host & ((kind == HOST) | (kind == INPUT) | (kind == COMM))
    lanes = np.where(host_time, gather(m.lane, rows, -1), -1)
    for lane, iv in removed.items():
        on = np.flatnonzero(lanes == lane)
        if on.size:
            # (covered searches a segment's start only where the one before does not end)
            cut[on] += covered(iv, s[on], e[on])
    del lanes
    # The device side of the path while the host waited in a call it no longer waits in.
    dev = np.flatnonzero(~host_time)
    if dev.size and waits is not None:
        freed[dev] = covered(waits, s[dev], e[dev])
    del dev
    if m.device_activity_rows.size and (change.device_scale is not None
                                        or change.stream_gap is not None):
        if act_of_row is None:
            act_of_row = _activity_of_row(analysis)
        at = gather(act_of_row, rows, -1)
        is_act = at >= 0
        if change.device_scale is not None:
            fixed = analysis.comm_activity_mask
            faster = np.flatnonzero(is_act & (kind == DEVICE))
            a = at[faster]
            scale = np.where(fixed[a], 1.0, change.device_scale[a])
            cut[faster] += (e[faster] - s[faster]) * np.clip(1.0 - scale, 0.0, 1.0)
        if change.stream_gap is not None:
            latency = np.flatnonzero(is_act & (kind == LATENCY))
            gap = change.stream_gap[at[latency]]
            has = ~np.isnan(gap)
            w = latency[has]
            cut[w] += np.maximum((e[w] - s[w]) - gap[has], 0.0)
    cut = np.minimum(cut, e - s)
    return cut, np.minimum(freed, e - s - cut)


def path_cut(analysis: SpanAnalysis, change: Change, windows: Sequence[int]) -> PathCut:
    """What ``change`` takes off the paths of ``windows`` (window indices)."""
    cp = critical_paths(analysis)
    at = np.asarray(windows, dtype=np.int64).reshape(-1)
    ws = at  # not a tuple of a million ints: the card reads their number
    idx = segment_indices(analysis, at)
    cut, freed = segment_cuts(analysis, change, idx)
    n_k = len(KIND_NAMES)
    by = np.bincount(cp.kind[idx], weights=cut, minlength=n_k) if idx.size else np.zeros(n_k)
    sizes = cp.offsets[at + 1].astype(np.int64) - cp.offsets[at].astype(np.int64)
    owner = np.repeat(np.arange(len(ws)), sizes)
    per_window = np.bincount(owner, weights=cut + freed, minlength=len(ws)) if idx.size \
        else np.zeros(len(ws))
    return PathCut(windows=ws, path_us=float(cp.dur[idx].sum()), cut_us=float(cut.sum()),
                   by_kind={k: float(v) for k, v in zip(KIND_NAMES, by.tolist(), strict=True)},
                   segments=int(np.count_nonzero(cut > 0)),
                   top=tuple(charge(analysis, idx, cut, limit=TOP_NAMES)),
                   freed_us=float(freed.sum()),
                   freed_top=tuple(charge(analysis, idx, freed, limit=1)),
                   window_cut_us=per_window)
