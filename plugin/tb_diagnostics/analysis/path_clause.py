"""What the verdict's steps wait on, from their critical paths: the clause the headline says.

For a set of windows (the warm steps of one verdict, ``analysis.headline``), their paths'
time is added up by kind (:mod:`.critpath`); the **main kind** is the one with most of it
(ties: the earlier of host, input, device, comm, latency). Within that kind, the path's
time is charged to the op each segment belongs to (the innermost operator at or above its
event; for device work and launch latency, the op that launched it), or to the segment's
own event where no op is above it (Python between ops, a DataLoader call, a collective,
the step itself); the **top** name has most of it (on a tie, the name the trace names
first). It is said *inside* the outermost op
or ``record_function`` label above it (the step left out) when one such name holds at
least :data:`INSIDE_SHARE` of the top name's time: ``aten::add_`` inside ``forward``.

The same charging, weighted by how much of each segment a change removes, names what a
what-if card shortens (``views.whatif_path``): :func:`charge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_diagnostics.analysis.critpath import KIND_NAMES, critical_paths
from tb_diagnostics.analysis.critpath.names import op_above
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.distinct import distinct
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.columns import gather

#: The outermost op or label above the top name is said ("inside ``forward``") where it
#: holds at least this share of the top name's time on the path: most of it.
INSIDE_SHARE = 0.5


@dataclass(frozen=True)
class Charged:
    """Path time charged to one name: an op, or an event with no op above it."""

    name: str
    #: "op" (an operator's dispatch or its kernels), "step" (the step's own time, outside
    #: any op) or "event" (another event: a Python function, a DataLoader call, a kernel).
    what: str
    kind: str
    us: float
    segments: int
    #: The outermost op or label above it that holds most of its time, or None.
    inside: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "kind": self.kind,
                "us": round(self.us, 3), "segments": self.segments, "inside": self.inside}


def segment_indices(analysis: SpanAnalysis, windows: Sequence[int]) -> np.ndarray:
    """The path segments of ``windows``, in window order."""
    cp = critical_paths(analysis)
    ws = np.asarray(windows, dtype=np.int64)
    if not ws.size:
        return np.zeros(0, dtype=np.int64)
    # A run of consecutive windows holds one range of segments (a window's end offset is
    # the next one's start): the runs' ranges (the warm steps: one or a few), concatenated
    # as one column (an arange per window was a numpy call per step): each range's start,
    # less where it lands in the output.
    first = np.ones(ws.shape[0], dtype=bool)
    np.not_equal(ws[1:], ws[:-1] + 1, out=first[1:])
    run = np.flatnonzero(first)
    lo = cp.offsets[ws[run]].astype(np.int64)
    sizes = cp.offsets[ws[np.append(run[1:] - 1, ws.shape[0] - 1)] + 1].astype(np.int64) - lo
    if sizes.shape[0] == 1:
        return np.arange(lo[0], lo[0] + sizes[0], dtype=np.int64)
    return np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))


#: Segments :func:`charge` finds the owners and regions of at a time: the temporaries of
#: a pass over a verdict's segments (millions on a 10⁶-step span) are a block's.
SEGMENT_BLOCK = 1 << 18


def _blocks(n: int) -> list[slice]:
    return [slice(b, b + SEGMENT_BLOCK) for b in range(0, n, SEGMENT_BLOCK)]


def _regions(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """Per row: the outermost op or user annotation strictly above it on its thread that is
    not a step (``ProfilerStep#N``), or -1."""
    m = analysis.model
    # Per row, whether it is a step: a lookup per level, not a sorted isin of the rows
    # still climbing against every step (a million of each, each level).
    is_step = np.zeros(len(m), dtype=bool)
    is_step[analysis.host_steps.rows.astype(np.int64, copy=False)] = True
    # In the parent column's dtype (int32 but on models past 2^31 rows): a path's segments
    # of one kind may be millions, each a few arrays here.
    out = np.full(rows.shape[0], -1, dtype=m.parent.dtype)
    for sl in _blocks(rows.shape[0]):
        block = out[sl]
        cur = m.parent[rows[sl]]
        todo = np.flatnonzero(cur >= 0)
        while todo.size:  # one level a pass over the rows still climbing: nesting is shallow
            r = cur[todo]
            k = m.kind[r]
            mark = ((k == Kind.CPU_OP) | (k == Kind.USER_ANNOTATION)) & ~is_step[r]
            block[todo[mark]] = r[mark]
            up = m.parent[r]
            cur[todo] = up
            todo = todo[up >= 0]
    return out


def _owners(analysis: SpanAnalysis, idx: np.ndarray,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per segment ``idx``: who it is charged to (the op above its event, else the event;
    -1: none), whether that is an op, and its (name, kind) key, ``name * kinds + kind``
    (any value where nobody is charged)."""
    cp = critical_paths(analysis)
    m = analysis.model
    n_k = len(KIND_NAMES)
    # Rows in the parent column's dtype (int32 but past 2^31 rows), as the model's.
    who = np.empty(idx.shape[0], dtype=np.result_type(m.parent.dtype, np.int32))
    is_op = np.empty(idx.shape[0], dtype=bool)
    key = np.empty(idx.shape[0], dtype=np.int64)
    for sl in _blocks(idx.shape[0]):
        at = idx[sl]
        rows = cp.row[at]
        ops = op_above(analysis, rows)
        w = np.where(ops >= 0, ops, rows)
        who[sl], is_op[sl] = w, ops >= 0
        key[sl] = gather(m.name, w, 0).astype(np.int64) * n_k + cp.kind[at]
    return who, is_op, key


def _sums(key: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(uniq, total, count, labels)``: the distinct keys (ids times kinds, ≥ 0),
    ascending; the weight and the number of segments per key (:func:`np.bincount`'s sums,
    in segment order); each segment's key's index in ``uniq``, as int32 (a 10⁶-step
    span's keys are millions, a step's name each)."""
    uniq, labels = distinct(key, inverse_dtype=np.int32)
    return uniq, np.bincount(labels, weights=weight), np.bincount(labels), labels


def charge(analysis: SpanAnalysis, idx: np.ndarray, weight: np.ndarray,
           limit: int | None = None) -> list[Charged]:
    """Path time ``weight`` (µs, per segment ``idx``) charged by (name, kind), most first
    (``limit`` of them; None: all), each with the outermost op or label it lies inside."""
    m = analysis.model
    # Copies only where something is dropped: the caller holds the arrays it passes
    # (a verdict's segments of one kind, millions on a 10⁶-step span).
    keep = weight > 0
    if not keep.all():
        idx, weight = idx[keep], weight[keep]
    del keep
    who, is_op, key = _owners(analysis, idx)
    del idx
    ok = who >= 0
    if not ok.all():
        weight, who, is_op, key = weight[ok], who[ok], is_op[ok], key[ok]
    del ok  # what the loop below does not read: freed before _inside
    if not who.size:
        return []
    n_k = len(KIND_NAMES)
    uniq, total, count, labels = _sums(key, weight)
    del key
    order = np.argsort(-total, kind="stable")
    if limit is not None:
        order = order[:limit]
    steps = analysis.host_steps.rows if len(analysis.host_steps) else np.zeros(0, np.int64)
    out = []
    for t in order.tolist():
        mine = labels == t  # a mask: a byte a segment, not an index's eight
        first = int(np.argmax(mine))
        rep = int(who[first])
        what = "op" if is_op[first] else "step" if np.isin(rep, steps) else "event"
        # One name on every segment (a step of one op): the arrays themselves, no copies.
        whole = int(count[t]) == who.size
        out.append(Charged(name=m.strings[int(uniq[t]) // n_k], what=what,
                           kind=KIND_NAMES[int(uniq[t]) % n_k], us=float(total[t]),
                           segments=int(count[t]),
                           inside=_inside(analysis, who if whole else who[mine],
                                          weight if whole else weight[mine])))
    return out


def _inside(analysis: SpanAnalysis, who: np.ndarray, weight: np.ndarray) -> str | None:
    """The name of the outermost op or label above ``who`` holding at least
    :data:`INSIDE_SHARE` of ``weight``, or None."""
    m = analysis.model
    reg = _regions(analysis, who)
    ok = reg >= 0
    if not ok.any():
        return None
    names, inv = distinct(m.name[reg[ok]].astype(np.int64))
    by = np.bincount(inv, weights=weight[ok])
    best = int(np.argmax(by))
    if by[best] < INSIDE_SHARE * float(weight.sum()):
        return None
    return m.strings[int(names[best])]


@dataclass(frozen=True)
class PathClause:
    """The windows' paths together: their split by kind, its main kind, and where in that
    kind most of the time goes."""

    windows: tuple[int, ...]
    total_us: float
    by_kind: dict[str, float]
    main_kind: str | None  # None: no path time
    top: Charged | None

    @property
    def main_share(self) -> float:
        if self.main_kind is None or self.total_us <= 0:
            return 0.0
        return self.by_kind[self.main_kind] / self.total_us

    def to_dict(self) -> dict[str, Any]:
        return {"total_us": round(self.total_us, 3),
                "by_kind": {k: round(v, 3) for k, v in self.by_kind.items()},
                "main_kind": self.main_kind, "main_share": round(self.main_share, 6),
                "top": None if self.top is None else self.top.to_dict()}


def path_clause(analysis: SpanAnalysis, windows: Sequence[int]) -> PathClause:
    """The paths of ``windows`` (window indices) together."""
    cp = critical_paths(analysis)
    at = np.asarray(windows, dtype=np.int64).reshape(-1)
    ws = tuple(at.tolist())
    by = cp.by_kind[at].sum(axis=0) if ws else np.zeros(len(KIND_NAMES))
    by_kind = {k: float(v) for k, v in zip(KIND_NAMES, by.tolist(), strict=True)}
    total = float(by.sum())
    if total <= 0:
        return PathClause(ws, total, by_kind, None, None)
    main = int(np.argmax(by))  # the first of equal maxima: KIND_NAMES order breaks ties
    idx = segment_indices(analysis, at)
    idx = idx[cp.kind[idx] == main]
    top = charge(analysis, idx, cp.dur[idx], limit=1)
    return PathClause(ws, total, by_kind, KIND_NAMES[main], top[0] if top else None)


def verdict_paths(analysis: SpanAnalysis) -> list[PathClause]:
    """One clause per entry of the span's verdict split (``headline.span_verdict``), in
    its order: the paths of that verdict's warm windows."""
    from tb_diagnostics.analysis.headline import span_verdict
    from tb_diagnostics.analysis.views.warmth import step_walls

    split = span_verdict(analysis).split
    if not split:
        return []
    warm = step_walls(analysis).judged  # the windows span_verdict judged
    verdict = analysis.windows.columns.verdict  # a column: no window object per step
    return [path_clause(analysis, np.flatnonzero(warm & (verdict == x.verdict)))
            for x in split]
