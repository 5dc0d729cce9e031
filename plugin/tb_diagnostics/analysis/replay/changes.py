"""The changes a replay can apply, each the fix some rules propose.

Each says what it assumes (``ASSUMES``); the README lists them.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, union_of_rows
from tb_diagnostics.analysis.replay.engine import Change
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts

ASSUMES = {
    "input": "the DataLoader's wait on the training thread goes to zero (a prefetching loader "
             "with enough workers); the host runs as fast as before",
    "syncs": "the named syncs no longer wait for the device; the device work stays",
    "profiler": "the profiler's own host time (buffer requests, overhead, its flush sync) "
                "is gone",
}


def _per_lane(analysis: SpanAnalysis, rows: np.ndarray) -> dict[int, Intervals]:
    m = analysis.model
    out = {}
    lanes = m.lane[rows]
    for lane in np.unique(lanes).tolist():
        out[int(lane)] = union_of_rows(m.start, m.end, rows[lanes == lane])
    return out


def input_change(analysis: SpanAnalysis) -> Change | None:
    """No more waiting for the DataLoader on the thread that iterates it."""
    rows = analysis.input_rows
    if not rows.size:
        return None
    return Change(removed_host=_per_lane(analysis, rows))


def sync_change(analysis: SpanAnalysis, rows: np.ndarray) -> Change | None:
    """These sync calls no longer wait (``.item()`` moved out of the loop, no
    ``torch.cuda.synchronize()``, pinned memory for the copies)."""
    if not rows.size:
        return None
    return Change(no_wait=frozenset(int(r) for r in rows.tolist()))


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
    """Every change at once: host time removed by any, syncs freed by any, device factors
    multiplied."""
    removed: dict[int, list[Intervals]] = {}
    for c in changes:
        for lane, iv in c.removed_host.items():
            removed.setdefault(lane, []).append(iv)
    merged = {}
    for lane, ivs in removed.items():
        s = np.concatenate([iv.start for iv in ivs])
        e = np.concatenate([iv.end for iv in ivs])
        order = np.argsort(s, kind="stable")
        merged[lane] = union_of_rows(s, e, order)
    scales = [c.device_scale for c in changes if c.device_scale is not None]
    scale = np.prod(np.stack(scales), axis=0) if scales else None
    return Change(removed_host=merged,
                  no_wait=frozenset().union(*(c.no_wait for c in changes)),
                  device_scale=scale)
