"""From a marker's occurrences to contiguous iteration windows on the host."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.iterations.lane import Lane, parent_calls
from tb_diagnostics.analysis.iterations.slices import set_groups
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.model import TraceModel

#: An edge window reaches at least this many median iterations past its anchor (and as
#: many calls as the median window holds, however long they take).
EDGE_PERIODS = 1.5
#: An edge window with fewer calls than this share of the median window's is a fragment
#: (the fetch that ended the loop, the tail of an iteration the profiler started in): dropped.
MIN_EDGE_SHARE = 0.5
#: Chunks between occurrences that repeat with period p in this share of places make one
#: iteration of p occurrences.
PERIOD_AGREEMENT = 0.8
#: A shorter period is taken over the best-agreeing one when it agrees within this much:
#: chunks that mostly look alike inside an iteration (seven compiled graphs of one forward)
#: must not read as seven iterations when every seventh chunk matches exactly.
PERIOD_SLACK = 0.1
#: The most occurrences one iteration may hold (a label used once per layer of the deepest
#: models, about a hundred): bounds the search, which is linear in it, not in the trace.
MAX_PERIOD = 128


@dataclass(frozen=True)
class Iterations:
    """Inferred iteration windows on the host, in time order, contiguous."""

    rows: np.ndarray  # int64: a host row of the main thread starting each window
    host_start: np.ndarray  # float64 µs
    host_end: np.ndarray
    source: str  # what they were inferred from, in words (for the span's note)

    def __len__(self) -> int:
        return int(self.rows.shape[0])


def widen(m: TraceModel, lane: Lane, pos: np.ndarray, lo: np.ndarray | None = None,
          hi: np.ndarray | None = None) -> np.ndarray:
    """Each occurrence widened to the outermost call containing it and no other one (or
    nothing outside ``[lo[k], hi[k]]`` when the bounds are given)."""
    rows = lane.rows[pos]
    if lo is None or hi is None:
        lo = np.concatenate(([-np.inf], m.end[rows[:-1]]))
        hi = np.concatenate((m.start[rows[1:]], [np.inf]))
    out = rows.astype(np.int64)
    # Every occurrence climbs at once, a level a pass, while its enclosing call stays
    # inside its bounds (a loop per occurrence was a Python step per iteration).
    k = np.arange(rows.shape[0])
    p = parent_calls(m, out)
    while k.size:
        ok = p >= 0
        at = np.maximum(p, 0)
        ok &= (m.start[at] >= lo[k]) & (m.end[at] <= hi[k])
        k, p = k[ok], p[ok]
        out[k] = p
        p = parent_calls(m, p)
    return np.searchsorted(lane.rows, out)


def period(m: TraceModel, lane: Lane, cuts: np.ndarray) -> int:
    """How many occurrences make one iteration: the smallest p for which the chunk between
    occurrence k and k+1 is like the one between k+p and k+p+1, agreeing in at least
    ``PERIOD_AGREEMENT`` of places and within ``PERIOD_SLACK`` of the best p (1 when
    none agrees)."""
    n = cuts.shape[0]
    if n < 4:
        return 1
    at = np.searchsorted(lane.start, cuts)
    names = m.name[lane.rows]
    # One integer per chunk (its set of names), so comparing chunks is array work; the
    # chunks grouped by columns (slices.set_groups), a frozenset each only where that
    # cannot tell.
    sig = set_groups(names, at, len(m.strings))
    if sig is None:
        ids: dict[frozenset[int], int] = {}
        sig = np.asarray([ids.setdefault(frozenset(names[a:b].tolist()), len(ids))
                          for a, b in itertools.pairwise(at)], dtype=np.int64)
    ps = np.arange(1, min(sig.shape[0] // 2, MAX_PERIOD) + 1)
    agree = np.asarray([float(np.mean(sig[p:] == sig[:-p])) for p in ps.tolist()])
    ok = agree >= max(PERIOD_AGREEMENT, float(agree.max()) - PERIOD_SLACK)
    return int(ps[ok][0]) if ok.any() else 1


def _next_row(lane: Lane, t: float) -> int:
    """Position of the first lane row starting at or after ``t`` (-1 when none)."""
    k = int(np.searchsorted(lane.start, t, side="left"))
    return k if k < lane.rows.shape[0] else -1


def _calls(lane: Lane, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    return (np.searchsorted(lane.start, ends, side="left")
            - np.searchsorted(lane.start, starts, side="left"))


def _whole(lane: Lane, starts: np.ndarray, ends: np.ndarray, k: int) -> bool:
    """Whether edge window ``k`` holds about as many calls as the windows usually do."""
    calls = _calls(lane, starts, ends)
    others = np.delete(calls, k)
    return bool(calls[k] >= MIN_EDGE_SHARE * np.median(others))


def _last_end(lane: Lane, first: int, gap: float, calls: int, by_time: bool) -> float:
    """Where the last window (its first call at lane position ``first``) ends: past as
    many calls as a median window holds (a slow last iteration keeps all its calls), or,
    ``by_time``, past the calls that start within ``EDGE_PERIODS`` median iterations of
    it if that reaches further (a trailing synchronize stays in it)."""
    after = first + max(calls, 1)
    # By count, the window ends where the call after its calls starts (a call of it that
    # encloses later ones would otherwise stretch it), or with the thread's last call.
    n = lane.rows.shape[0]
    end = float(lane.start[after]) if after < n else float(lane.end[first:].max())
    if by_time:
        t0 = float(lane.start[first])
        near = np.flatnonzero((lane.start >= t0) & (lane.start < t0 + EDGE_PERIODS * gap))
        end = max(end, min(float(lane.end[near].max()), t0 + EDGE_PERIODS * gap))
    return end


def _first_start(lane: Lane, cut: float, gap: float, calls: int) -> int:
    """Lane position where the first window of ``ends`` windows starts (its iteration ends
    at ``cut``): the earlier of ``EDGE_PERIODS`` median iterations and as many calls as a
    median window holds before it (a cold first iteration keeps all its calls)."""
    by_time = _next_row(lane, max(float(lane.start.min()), cut - EDGE_PERIODS * gap))
    last = int(np.searchsorted(lane.start, cut, side="left"))
    by_count = max(last - max(calls, 1), 0)
    return min(by_time, by_count) if by_time >= 0 else by_count


def windows(m: TraceModel, lane: Lane, pos: np.ndarray, source: str, *,
            ends: bool = False, widen_each: bool = True) -> Iterations | None:
    """Windows cut at each occurrence's start (or, ``ends``, right after its end)."""
    pos = np.sort(pos)
    widened = np.zeros(pos.shape[0], dtype=bool)
    if widen_each:
        wide = widen(m, lane, pos)
        widened = wide != pos
        pos = wide
    p = period(m, lane, lane.start[pos])
    if p > 1:
        # The occurrence that ends (or starts) an iteration: phase from the first one.
        first, last = pos[::p], pos[p - 1::p]
        if ends:
            pos, widened = last, widened[p - 1::p]
        else:
            # An iteration starts at the outermost call holding its first occurrence and
            # none of the other iterations' (a forward holding seven compiled graphs).
            lo = np.concatenate(([-np.inf], lane.end[last[:first.shape[0] - 1]]))
            hi = np.concatenate((lane.start[first[1:]], [np.inf]))
            wide = widen(m, lane, first, lo, hi) if widen_each else first
            group_end = np.full(first.shape[0], -np.inf)
            group_end[:last.shape[0]] = lane.end[last]
            widened = (wide != first) & (lane.end[wide] >= group_end)
            pos = wide
    if pos.size < 2:
        return None
    if ends:
        cuts = lane.end[pos]
        gap = float(np.median(np.diff(cuts)))
        if gap <= 0:
            return None  # steps that all end at one instant mark no iterations
        # Iteration k runs from the first call after iteration k-1 ended to its step's end.
        # _next_row of every cut but the last, as one search.
        nexts = np.searchsorted(lane.start, cuts[:-1], side="left")
        if (nexts >= lane.rows.shape[0]).any():
            return None
        inner = np.diff(np.searchsorted(lane.start, cuts, side="left"))
        starts_at = np.concatenate((
            [_first_start(lane, float(cuts[0]), gap, int(np.median(inner)))], nexts))
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
        last_at = int(pos[-1])
        # An enclosing call holding this occurrence alone wraps the whole iteration.
        wrapper = bool(widened[-1])
        # Its iteration's calls from it on; past the wrapper's end if the iteration goes
        # on after it (a forward wrapping the graphs, then the optimizer).
        end = _last_end(lane, last_at, gap, int(np.median(np.diff(pos))), by_time=not wrapper)
        if wrapper:
            end = max(end, float(lane.end[last_at]))
        host_end = np.append(starts[1:], end)
        keep = np.ones(starts.shape[0], dtype=bool)
        # A wrapper is a whole iteration however short; after a marker, maybe a fragment.
        keep[-1] = wrapper or _whole(lane, starts, host_end, -1)
    rows = lane.rows[np.asarray(starts_at)][keep]
    host_start, host_end = starts[keep], host_end[keep]
    if rows.shape[0] < 2 or unique(host_start).shape[0] != host_start.shape[0]:
        return None
    if p > 1:
        source += f", {p} per iteration"
    return Iterations(rows=rows.astype(np.int64), host_start=host_start.astype(np.float64),
                      host_end=host_end.astype(np.float64), source=source)
