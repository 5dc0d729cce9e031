"""Host time on the path that is not the program's own: the DataLoader's and collectives'.

A ``host`` stretch of the path is split where it lies inside a DataLoader call on its
thread (``input``) or inside a collective's host call (``comm``: the thread waits for the
other ranks); the DataLoader comes first where the two nest, as in the step's idle split.
Each part is named after the outermost such call around it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.critpath.edges import COMM, HOST, INPUT
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.columns import gather


@dataclass(frozen=True)
class Labels:
    """Per host lane: sorted, disjoint ``[start, end)`` stretches with a kind and a row."""

    by_lane: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def _outermost(start: np.ndarray, end: np.ndarray, rows: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of rows sorted by start, each part named after the row that opens it."""
    order = np.lexsort((-end, start))
    s, e, r = start[order], end[order], rows[order]
    reach = np.maximum.accumulate(e)
    opens = np.ones(s.shape[0], dtype=bool)
    opens[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    last = np.concatenate([first[1:] - 1, [s.shape[0] - 1]]) if first.size else first
    return s[first], reach[last], r[first]


def _minus(s: np.ndarray, e: np.ndarray, r: np.ndarray, cut_s: np.ndarray,
           cut_e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint stretches less disjoint cuts (both sorted), names kept."""
    if not cut_s.size or not s.size:
        return s, e, r
    # Cut points: every cut boundary inside a stretch splits it; the parts inside a cut go.
    pts = np.concatenate([s, e, cut_s, cut_e])
    pts = sorted_sets.unique(pts)
    a, b = pts[:-1], pts[1:]
    mid = (a + b) / 2
    k = np.searchsorted(s, mid, side="right") - 1
    inside = mid < gather(e, k, -np.inf)
    c = np.searchsorted(cut_s, mid, side="right") - 1
    cut = mid < gather(cut_e, c, -np.inf)
    keep = inside & ~cut
    return a[keep], b[keep], r[k[keep]]


def host_labels(analysis: SpanAnalysis) -> Labels:
    m = analysis.model
    out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    inputs, comms = analysis.input_rows, analysis.comm_rows
    lanes = sorted_sets.union1d(m.lane[inputs], m.lane[comms]).astype(np.int64)
    for lane in lanes.tolist():
        ir = inputs[m.lane[inputs] == lane]
        cr = comms[m.lane[comms] == lane]
        i_s, i_e, i_r = _outermost(m.start[ir], m.end[ir], ir)
        c_s, c_e, c_r = _outermost(m.start[cr], m.end[cr], cr)
        c_s, c_e, c_r = _minus(c_s, c_e, c_r, i_s, i_e)
        s = np.concatenate([i_s, c_s])
        order = np.argsort(s, kind="stable")
        kind = np.concatenate([np.full(i_s.size, INPUT), np.full(c_s.size, COMM)])
        out[lane] = (s[order], np.concatenate([i_e, c_e])[order],
                     kind[order].astype(np.int8), np.concatenate([i_r, c_r])[order])
    return Labels(out)


def other_threads_comm(analysis: SpanAnalysis, lanes: np.ndarray) -> Labels:
    """Per lane of ``lanes``: when other threads run a collective (gloo runs it on its own
    threads while the training thread waits) and the lane records nothing of its own
    inside its step: the lane is waiting for the collective then."""
    m = analysis.model
    hs = analysis.host_steps
    comms = analysis.comm_rows
    out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for lane in sorted_sets.unique(lanes).tolist():
        cr = comms[m.lane[comms] != lane]
        if not cr.size:
            continue
        c_s, c_e, c_r = _outermost(m.start[cr], m.end[cr], cr)
        # The lane's own work: its events inside a step, the steps themselves left out.
        own = np.flatnonzero(m.is_host & (m.lane == lane))
        k = hs.locate(m.start[own]) if len(hs) else np.full(own.size, -1)
        inside = (k >= 0) & (m.end[own] <= hs.host_end[np.maximum(k, 0)]) if len(hs) \
            else np.zeros(own.size, dtype=bool)
        own = own[inside & ~np.isin(own, hs.rows)]
        o_s, o_e, _ = _outermost(m.start[own], m.end[own], own)
        c_s, c_e, c_r = _minus(c_s, c_e, c_r, o_s, o_e)
        out[lane] = (c_s, c_e, np.full(c_s.size, COMM, np.int8), c_r)
    return Labels(out)


def split_host(start: np.ndarray, end: np.ndarray, lane: np.ndarray, row: np.ndarray,
               labels: Labels) -> tuple[np.ndarray, ...]:
    """Split host stretches by the labels of their lane.

    Returns ``(piece, start, end, kind, row)`` of the parts: ``piece`` indexes the
    stretch each part comes from; unlabelled parts keep kind ``host`` and the stretch's
    row. Every stretch's parts tile it exactly.
    """
    n = start.shape[0]
    parts = [(np.arange(n), start, end, np.full(n, HOST, np.int8), row)]
    todo = np.zeros(n, dtype=bool)
    for ln, (ls, le, lk, lr) in labels.by_lane.items():
        on = np.flatnonzero(lane == ln)
        if not on.size:
            continue
        s, e = start[on], end[on]
        i0 = np.searchsorted(le, s, side="right")
        i1 = np.searchsorted(ls, e, side="left")
        cnt = np.maximum(i1 - i0, 0)
        hit = cnt > 0
        if not hit.any():
            continue
        on, s, e, i0, cnt = on[hit], s[hit], e[hit], i0[hit], cnt[hit]
        todo[on] = True
        # The labelled parts: one per (stretch, label) overlap, in time order per stretch.
        which = np.repeat(np.arange(on.size), cnt)
        j = i0[which] + (np.arange(which.size) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        cs, ce = np.maximum(s[which], ls[j]), np.minimum(e[which], le[j])
        # The host parts between them: before the first, between, after the last.
        first = np.ones(which.size, dtype=bool)
        first[1:] = which[1:] != which[:-1]
        last = np.ones(which.size, dtype=bool)
        last[:-1] = which[1:] != which[:-1]
        gap_s = np.where(first, s[which], np.concatenate([[0.0], ce[:-1]]))
        gap_e = cs
        tail_s, tail_e, tail_w = ce[last], e[which[last]], which[last]
        hs = np.concatenate([gap_s, tail_s])
        he = np.concatenate([gap_e, tail_e])
        hw = np.concatenate([which, tail_w])
        parts.append((on[which], cs, ce, lk[j], lr[j]))
        parts.append((on[hw], hs, he, np.full(hw.size, HOST, np.int8), row[on[hw]]))
    if len(parts) == 1:  # no stretch labelled (no input or comm on its lane): as they are
        piece, s, e, k, r = parts[0]
    else:
        whole = parts[0]
        keep = ~todo
        parts[0] = tuple(x[keep] for x in whole)
        piece, s, e, k, r = (np.concatenate(x) for x in zip(*parts, strict=True))
    ok = e > s
    return piece[ok], s[ok], e[ok], k[ok], r[ok]
