"""Iterations of a trace recorded without ``ProfilerStep#`` (no profiler schedule).

``torch.profiler.profile()`` without a schedule, or the legacy autograd profiler, writes
no step markers, yet a training loop repeats itself. Iterations are inferred from what
repeats on the main thread, in this order of trust:

1. the optimizer's annotations: ``Optimizer.step#…`` ends an iteration, else
   ``Optimizer.zero_grad#…`` starts one;
2. the DataLoader's fetches (``enumerate(DataLoader)#…``), which start one;
3. a ``record_function`` label that repeats (the shallowest such label; among labels at
   that depth, the repeat count most labels share, the earliest label with it);
4. a repeating forward signature: the outermost ``nn.Module: …`` forward (``with_stack`` /
   ``with_modules`` traces), else a set of top-level ops that occur the same number of
   times, once per window.

Each occurrence is widened to the outermost call that contains it alone (a
``record_function`` wrapping one iteration, an annotation one level up), so a label deep
inside a per-iteration wrapper still cuts at the wrapper. When the chunks between
occurrences repeat with a period of several occurrences (a label used several times per
iteration, two optimizers of one class), one iteration is that many occurrences. The
windows are contiguous on the host, like ``ProfilerStep#`` windows; a fragment at the edges
(with less than half the calls of the median window) is dropped. Fewer than two iterations
is no inference: the span stays one window.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.trace.categories import STEP_NAME, Kind
from tb_diagnostics.trace.model import TraceModel

OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
OPTIMIZER_ZERO_GRAD = re.compile(r"^Optimizer\.zero_grad#")
DATALOADER = re.compile(r"^enumerate\(DataLoader\)#")
MODULE_FORWARD = re.compile(r"^nn\.Module: ")

#: An edge window reaches at most this many median iterations past its anchor.
EDGE_PERIODS = 1.5
#: An edge window with fewer calls than this share of the median window's is a fragment
#: (the fetch that ended the loop, the tail of an iteration the profiler started in): dropped.
MIN_EDGE_SHARE = 0.5
#: Chunks between occurrences that repeat with period p in this share of places make one
#: iteration of p occurrences.
PERIOD_AGREEMENT = 0.8
#: A forward signature needs at least this many op names repeating alike.
MIN_SIGNATURE_NAMES = 3

_LABEL_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)


@dataclass(frozen=True)
class Iterations:
    """Inferred iteration windows on the host, in time order, contiguous."""

    rows: np.ndarray  # int64: a host row of the main thread starting each window
    host_start: np.ndarray  # float64 µs
    host_end: np.ndarray
    source: str  # what they were inferred from, in words (for the span's note)

    def __len__(self) -> int:
        return int(self.rows.shape[0])


@dataclass
class _Lane:
    """The main thread's host rows (not Python frames) and their nesting."""

    rows: np.ndarray  # int64, in model order (start order)
    depth: np.ndarray  # how many non-Python host calls enclose each row
    start: np.ndarray
    end: np.ndarray


def infer_iterations(model: TraceModel) -> Iterations | None:
    """Iteration windows of a trace without steps, or None when nothing repeats."""
    m = model
    host = np.flatnonzero(m.is_host & (m.kind != Kind.PYTHON))
    if not host.size:
        return None
    lane_id = _main_lane(m, host)
    if lane_id is None:
        return None
    lane = _lane(m, host[m.lane[host] == lane_id])
    for find in (_optimizer, _dataloader, _label, _module_forward, _signature):
        found = find(m, lane, lane_id)
        if found is not None:
            return found
    return None


# ---- the main thread ---------------------------------------------------------------------
def _main_lane(m: TraceModel, host: np.ndarray) -> int | None:
    """The thread with the optimizer (else the DataLoader) annotations; else the one whose
    top-level calls span the longest time (the backward thread starts after it, ends
    before it)."""
    for pattern in (OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD, DATALOADER):
        rows = m.rows_matching(pattern)
        rows = rows[m.is_host[rows]]
        if rows.size:
            return int(np.bincount(m.lane[rows]).argmax())
    top = host[(m.parent[host] < 0) & np.isin(m.kind[host], _LABEL_KINDS)]
    if not top.size:
        return None
    best, best_key = None, None
    for ln in np.unique(m.lane[top]).tolist():
        r = top[m.lane[top] == ln]
        key = (float(m.end[r].max() - m.start[r].min()), r.size)
        if best_key is None or key > best_key:
            best, best_key = int(ln), key
    return best


def _lane(m: TraceModel, rows: np.ndarray) -> _Lane:
    rows = rows.astype(np.int64)
    depth = np.zeros(rows.shape[0], dtype=np.int64)
    cur = rows.copy()
    todo = np.arange(rows.shape[0])
    # Walk every row's ancestry at once, one level per pass; Python frames do not count.
    while todo.size:
        p = m.parent[cur[todo]].astype(np.int64)
        keep = p >= 0
        todo, p = todo[keep], p[keep]
        cur[todo] = p
        depth[todo] += m.kind[p] != Kind.PYTHON
    return _Lane(rows=rows, depth=depth, start=m.start[rows], end=m.end[rows])


def _outermost(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of the occurrences not nested in an earlier one (one thread, start order):
    a nested optimizer (Lookahead around SGD) or a recursive label counts once."""
    if not start.size:
        return np.zeros(0, dtype=bool)
    before = np.maximum.accumulate(end)
    keep = np.ones(start.shape[0], dtype=bool)
    keep[1:] = start[1:] >= before[:-1]
    return keep


def _parent_call(m: TraceModel, row: int) -> int:
    """The enclosing host call that is not a Python frame, or -1."""
    p = int(m.parent[row])
    while p >= 0 and m.kind[p] == Kind.PYTHON:
        p = int(m.parent[p])
    return p


# ---- the sources, in order of trust -----------------------------------------------------
def _occurrences(m: TraceModel, lane: _Lane, pattern: re.Pattern[str]) -> dict[str, np.ndarray]:
    """Occurrences (lane row positions) of each name matching ``pattern``, those nested in
    another match left out (an optimizer wrapping another one steps once)."""
    ids = [i for i, s in enumerate(m.strings) if pattern.search(s)]
    if not ids:
        return {}
    pos = np.flatnonzero(np.isin(m.name[lane.rows], np.asarray(ids)))
    pos = pos[_outermost(lane.start[pos], lane.end[pos])]
    out: dict[str, np.ndarray] = {}
    for sid in np.unique(m.name[lane.rows[pos]]).tolist():
        out[m.strings[sid]] = pos[m.name[lane.rows[pos]] == sid]
    return out


def _pick(found: dict[str, np.ndarray], lane: _Lane, latest: bool) -> tuple[str, np.ndarray]:
    """Among names repeating alike, the one starting an iteration (earliest first
    occurrence) or ending it (``latest``: the last optimizer to step)."""
    top = max(p.size for p in found.values())
    names = [n for n, p in found.items() if p.size == top]
    first = {n: float(lane.start[found[n][0]]) for n in names}
    name = (max if latest else min)(names, key=lambda n: (first[n], n))
    return name, found[name]


def _optimizer(m: TraceModel, lane: _Lane, lane_id: int) -> Iterations | None:
    steps = _occurrences(m, lane, OPTIMIZER_STEP)
    if steps and max(p.size for p in steps.values()) >= 2:
        name, pos = _pick(steps, lane, latest=True)
        # Where each iteration starts is clearer from a call it starts with (the whole
        # first iteration, however long its cold start, is then one window), when there
        # is one such call per step (one more: the fetch that ended the loop).
        for what, pattern in (("DataLoader fetch", DATALOADER),
                              ("zero_grad call", OPTIMIZER_ZERO_GRAD)):
            marks = _occurrences(m, lane, pattern)
            if not marks:
                continue
            mark = np.sort(np.concatenate(list(marks.values())))
            if mark.size in (pos.size, pos.size + 1) and _one_between(lane, mark, pos):
                return _windows(m, lane, mark, f"the optimizer steps ({name}), each "
                                               f"iteration starting at its {what}")
        return _windows(m, lane, pos, f"the optimizer steps ({name})", ends=True)
    zero = _occurrences(m, lane, OPTIMIZER_ZERO_GRAD)
    if zero and max(p.size for p in zero.values()) >= 2:
        name, pos = _pick(zero, lane, latest=False)
        return _windows(m, lane, pos, f"the optimizer's zero_grad calls ({name})")
    return None


def _one_between(lane: _Lane, marks: np.ndarray, steps: np.ndarray) -> bool:
    """Exactly one step between consecutive marks (and none before the first)."""
    k = np.searchsorted(lane.start[marks], lane.start[steps], side="right") - 1
    return bool(k.min() >= 0 and np.array_equal(np.bincount(k, minlength=marks.size)[:steps.size],
                                                np.ones(steps.size, dtype=np.int64)))


def _dataloader(m: TraceModel, lane: _Lane, lane_id: int) -> Iterations | None:
    found = _occurrences(m, lane, DATALOADER)
    if not found:
        return None
    # Both iterator classes count (a loader re-created per epoch): one fetch per iteration.
    pos = np.sort(np.concatenate(list(found.values())))
    pos = pos[_outermost(lane.start[pos], lane.end[pos])]
    if pos.size < 2:
        return None
    name = min(found, key=lambda n: lane.start[found[n][0]])
    return _windows(m, lane, pos, f"the DataLoader fetches ({name})")


def _label(m: TraceModel, lane: _Lane, lane_id: int) -> Iterations | None:
    ann = np.flatnonzero(m.kind[lane.rows] == Kind.USER_ANNOTATION)
    if not ann.size:
        return None
    skip = (OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD, DATALOADER, STEP_NAME)
    found: dict[str, np.ndarray] = {}
    for sid in np.unique(m.name[lane.rows[ann]]).tolist():
        s = m.strings[sid]
        if any(p.search(s) for p in skip):
            continue
        p = ann[m.name[lane.rows[ann]] == sid]
        p = p[_outermost(lane.start[p], lane.end[p])]
        if p.size >= 2:
            found[s] = p
    if not found:
        return None
    # The shallowest labels; a label repeating inside an iteration is deeper, or repeats
    # more often than most labels at its depth.
    depth = {n: int(lane.depth[p].min()) for n, p in found.items()}
    shallow = min(depth.values())
    found = {n: p for n, p in found.items() if depth[n] == shallow}
    counts = np.bincount([p.size for p in found.values()])
    n_common = int(np.flatnonzero(counts == counts.max())[0])
    found = {n: p for n, p in found.items() if p.size == n_common}
    name, pos = _pick(found, lane, latest=False)
    return _windows(m, lane, pos, f"the repeating record_function label {name!r}")


def _module_forward(m: TraceModel, lane_rows: _Lane, lane_id: int) -> Iterations | None:
    """The outermost ``nn.Module`` forward frames (Python rows) of the main thread."""
    rows = m.rows_matching(MODULE_FORWARD)
    rows = rows[(m.kind[rows] == Kind.PYTHON) & (m.lane[rows] == lane_id)].astype(np.int64)
    if rows.size < 2:
        return None
    rows = rows[_outermost(m.start[rows], m.end[rows])]
    names, inverse = np.unique(m.name[rows], return_inverse=True)
    counts = np.bincount(inverse)
    if counts.max() < 2:
        return None
    # The model's forward: the outermost module called most, the earliest on ties.
    best = int(np.flatnonzero(counts == counts.max())[0])
    picked = rows[inverse == best]
    lane = _lane(m, np.union1d(lane_rows.rows, picked))
    pos = np.searchsorted(lane.rows, picked)
    return _windows(m, lane, pos, "the repeating forward of "
                                  f"{m.strings[int(names[best])].removeprefix('nn.Module: ')}",
                    widen=False)


def _signature(m: TraceModel, lane: _Lane, lane_id: int) -> Iterations | None:
    """Top-level ops that repeat alike: the smallest repeat count at least
    ``MIN_SIGNATURE_NAMES`` names share (ops repeating inside an iteration, a model's
    identical layers, repeat more often), validated to fall once into each window."""
    level = np.flatnonzero((lane.depth == 0) & np.isin(m.kind[lane.rows], _LABEL_KINDS))
    # A single wrapper around everything: the level below it is the loop's.
    while level.size == 1:
        inner = np.flatnonzero((lane.depth == lane.depth[level[0]] + 1)
                               & (lane.start >= lane.start[level[0]])
                               & (lane.end <= lane.end[level[0]])
                               & np.isin(m.kind[lane.rows], _LABEL_KINDS))
        if not inner.size:
            return None
        level = inner
    if level.size < 2 * MIN_SIGNATURE_NAMES:
        return None
    names, inverse = np.unique(m.name[lane.rows[level]], return_inverse=True)
    counts = np.bincount(inverse)
    shared = np.bincount(counts)
    candidates = [n for n in range(2, shared.shape[0]) if shared[n] >= MIN_SIGNATURE_NAMES]
    if not candidates:
        return None
    n_iter = candidates[0]
    alike = np.flatnonzero(counts == n_iter)
    firsts = [int(level[np.flatnonzero(inverse == k)[0]]) for k in alike.tolist()]
    anchor = alike[int(np.argmin(lane.start[firsts]))]
    pos = level[inverse == anchor]
    cuts = lane.start[pos]
    # Each name of the signature once per window, for most of the names.
    once = 0
    for k in alike.tolist():
        w = np.searchsorted(cuts, lane.start[level[inverse == k]], side="right") - 1
        once += bool(np.array_equal(np.sort(w), np.arange(n_iter)))
    if once < max(MIN_SIGNATURE_NAMES, 2 * alike.size / 3):
        return None
    return _windows(m, lane, pos, "a repeating sequence of top-level ops starting with "
                                  f"{m.strings[int(names[anchor])]}", widen=False)


# ---- from occurrences to windows ---------------------------------------------------------
def _widen(m: TraceModel, lane: _Lane, pos: np.ndarray) -> np.ndarray:
    """Each occurrence widened to the outermost call containing it and no other one."""
    rows = lane.rows[pos]
    out = rows.copy()
    for k in range(rows.shape[0]):
        lo = float(m.end[rows[k - 1]]) if k else -np.inf
        hi = float(m.start[rows[k + 1]]) if k + 1 < rows.shape[0] else np.inf
        r = int(rows[k])
        p = _parent_call(m, r)
        while p >= 0 and m.start[p] >= lo and m.end[p] <= hi:
            r = p
            p = _parent_call(m, r)
        out[k] = r
    return np.searchsorted(lane.rows, out)


def _period(m: TraceModel, lane: _Lane, cuts: np.ndarray) -> int:
    """How many occurrences make one iteration: the smallest p for which the chunk between
    occurrence k and k+1 is like the one between k+p and k+p+1 (1 when none is)."""
    n = cuts.shape[0]
    if n < 4:
        return 1
    at = np.searchsorted(lane.start, cuts)
    sigs = [frozenset(m.name[lane.rows[a:b]].tolist()) for a, b in itertools.pairwise(at)]
    for p in range(1, len(sigs) // 2 + 1):
        same = sum(sigs[i] == sigs[i + p] for i in range(len(sigs) - p))
        if same >= PERIOD_AGREEMENT * (len(sigs) - p):
            return p
    return 1


def _next_row(lane: _Lane, t: float) -> int:
    """Position of the first lane row starting at or after ``t`` (-1 when none)."""
    k = int(np.searchsorted(lane.start, t, side="left"))
    return k if k < lane.rows.shape[0] else -1


def _whole(lane: _Lane, starts: np.ndarray, ends: np.ndarray, k: int) -> bool:
    """Whether edge window ``k`` holds about as many calls as the windows usually do."""
    calls = (np.searchsorted(lane.start, ends, side="left")
             - np.searchsorted(lane.start, starts, side="left"))
    others = np.delete(calls, k)
    return bool(calls[k] >= MIN_EDGE_SHARE * np.median(others))


def _windows(m: TraceModel, lane: _Lane, pos: np.ndarray, source: str, *,
             ends: bool = False, widen: bool = True) -> Iterations | None:
    """Windows cut at each occurrence's start (or, ``ends``, right after its end)."""
    pos = np.sort(pos)
    widened = np.zeros(pos.shape[0], dtype=bool)
    if widen:
        wide = _widen(m, lane, pos)
        widened = wide != pos
        pos = wide
    period = _period(m, lane, lane.start[pos])
    if period > 1:
        # The occurrence that ends (or starts) an iteration: phase from the first one.
        pick = slice(period - 1, None, period) if ends else slice(None, None, period)
        pos, widened = pos[pick], widened[pick]
    if pos.size < 2:
        return None
    if ends:
        cuts = lane.end[pos]
        gap = float(np.median(np.diff(cuts)))
        if gap <= 0:
            return None  # steps that all end at one instant mark no iterations
        # Iteration k runs from the first call after iteration k-1 ended to its step's end.
        first_from = max(float(lane.start.min()), float(cuts[0]) - EDGE_PERIODS * gap)
        starts_at = [_next_row(lane, first_from)]
        starts_at += [_next_row(lane, float(c)) for c in cuts[:-1]]
        if min(starts_at) < 0:
            return None
        starts = lane.start[starts_at]
        host_end = np.append(starts[1:], cuts[-1])
        keep = np.ones(starts.shape[0], dtype=bool)
        keep[0] = _whole(lane, starts, host_end, 0)
    else:
        starts_at = pos.tolist()
        starts = lane.start[pos]
        gap = float(np.median(np.diff(starts)))
        if gap <= 0:
            return None  # markers at one instant mark no iterations
        last = int(pos[-1])
        # An enclosing call holding this occurrence alone wraps the whole iteration.
        wrapper = bool(widened[-1])
        if wrapper:
            end = float(lane.end[last])
        else:
            # A marker (a fetch, zero_grad, a label): the calls from it on, up to a bound.
            bound = float(starts[-1]) + EDGE_PERIODS * gap
            after = (lane.start >= starts[-1]) & (lane.start < bound)
            end = min(float(lane.end[after].max()), bound)
        host_end = np.append(starts[1:], end)
        keep = np.ones(starts.shape[0], dtype=bool)
        # A wrapper is a whole iteration however short; after a marker, maybe a fragment.
        keep[-1] = wrapper or _whole(lane, starts, host_end, -1)
    rows = lane.rows[np.asarray(starts_at)][keep]
    host_start, host_end = starts[keep], host_end[keep]
    if rows.shape[0] < 2 or np.unique(host_start).shape[0] != host_start.shape[0]:
        return None
    if period > 1:
        source += f", {period} per iteration"
    return Iterations(rows=rows.astype(np.int64), host_start=host_start.astype(np.float64),
                      host_end=host_end.astype(np.float64), source=source)
