"""Interval algebra on numpy arrays: unions and "how much of it lies in each window".

Every figure of the step spec is a length of a union clipped to a window, or a
difference of two such lengths, so two primitives are enough:
:func:`union` (merge to sorted, disjoint intervals) and :func:`covered`
(the length of a union inside each of many windows, vectorised).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Intervals:
    """Sorted, disjoint, half-open intervals ``[start[i], end[i])``."""

    start: np.ndarray
    end: np.ndarray

    @staticmethod
    def empty() -> Intervals:
        z = np.zeros(0, dtype=np.float64)
        return Intervals(z, z)

    @property
    def total(self) -> float:
        return float((self.end - self.start).sum())

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @cached_property
    def _lengths_before(self) -> tuple[np.ndarray, np.ndarray]:
        """Each interval's length, and the total length before each one (and after the
        last): computed once, as the replay asks the same union for many sets of times.
        (A cached_property writes the instance's ``__dict__``, which a frozen dataclass
        allows; the arrays are never changed in place.)"""
        lengths = self.end - self.start
        before = np.empty(lengths.size + 1, dtype=np.float64)
        before[0] = 0.0
        np.cumsum(lengths, out=before[1:])
        return lengths, before

    def __or__(self, other: Intervals) -> Intervals:
        return union(np.concatenate([self.start, other.start]),
                     np.concatenate([self.end, other.end]))


def union(start: np.ndarray, end: np.ndarray) -> Intervals:
    """Merge possibly overlapping intervals into sorted disjoint ones (empty ones dropped)."""
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    order = np.argsort(start, kind="stable")
    return _merge_sorted(start[order], end[order])


def as_union(iv: Intervals) -> Intervals:
    """:func:`union` of ``iv``'s intervals: ``iv`` itself where it is one already (float64,
    each non-empty and starting after the one before ends: what the union gives back, no
    sort and no copy of a million intervals made)."""
    s, e = iv.start, iv.end
    if (isinstance(s, np.ndarray) and isinstance(e, np.ndarray) and s.dtype == np.float64
            and e.dtype == np.float64 and s.ndim == 1 and s.shape == e.shape
            and bool((e > s).all()) and bool((s[1:] > e[:-1]).all())):
        return iv
    return union(s, e)


def union_sorted(start: np.ndarray, end: np.ndarray) -> Intervals:
    """:func:`union` of intervals whose starts are already sorted (no sort is made)."""
    return _merge_sorted(np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64))


def union_of_rows(start: np.ndarray, end: np.ndarray, rows: np.ndarray,
                  chunk: int = 1 << 15) -> Intervals:
    """The union of ``[start[r], end[r])`` over ``rows``, which are ascending, so their
    starts are sorted (a model's rows are ordered by start): merged a chunk at a time,
    without a sort and without full-length copies of the rows' times."""
    starts, ends = [], []
    for a in range(0, rows.shape[0], chunk):
        part = rows[a:a + chunk]
        iv = _merge_sorted(start[part], end[part])
        starts.append(iv.start)
        ends.append(iv.end)
    if not starts:
        return Intervals.empty()
    # Each chunk's intervals start no earlier than the previous chunk's: still sorted.
    return _merge_sorted(np.concatenate(starts), np.concatenate(ends))


def _merge_sorted(start: np.ndarray, end: np.ndarray) -> Intervals:
    """:func:`union` of intervals already ordered by start."""
    keep = end > start
    if not keep.all():
        start, end = start[keep], end[keep]
    if not start.size:
        return Intervals.empty()
    reach = np.maximum.accumulate(end)
    # A new group begins where an interval starts after everything before it has ended.
    begins = np.ones(start.size, dtype=bool)
    begins[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(begins)
    last = np.append(first[1:] - 1, start.size - 1)
    return Intervals(start[first], reach[last])


def covered(iv: Intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of ``iv`` inside each window ``[lo[k], hi[k])``."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if not len(iv):
        return np.zeros(lo.shape, dtype=np.float64)
    at_hi = _cumulative(iv, hi)
    chained = chained_starts(lo, hi)
    if chained is None:
        return np.maximum(at_hi - _cumulative(iv, lo), 0.0)
    rest = np.flatnonzero(~chained)
    at_lo = from_previous_ends(at_hi, chained, rest, _cumulative(iv, lo[rest]))
    return np.maximum(at_hi - at_lo, 0.0)


def chained_starts(lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """Per window ``[lo[k], hi[k])``: whether it starts at the previous one's end, bit for
    bit (never the first); None where no window does (or the windows are not a 1-d
    column). A figure of a time alone (the length of a union before it, a queue's length
    at it) is then the end's, not computed again: a partition's windows, a path's
    segments (:func:`from_previous_ends`)."""
    if lo.ndim != 1 or lo.shape != hi.shape or lo.shape[0] < 2 or lo.dtype != hi.dtype:
        return None
    width = f"u{lo.dtype.itemsize}"
    chained = np.zeros(lo.shape[0], dtype=bool)
    np.equal(np.ascontiguousarray(lo[1:]).view(width),
             np.ascontiguousarray(hi[:-1]).view(width), out=chained[1:])
    return chained if chained.any() else None


def from_previous_ends(at_hi: np.ndarray, chained: np.ndarray, rest: np.ndarray,
                       at_rest: np.ndarray) -> np.ndarray:
    """A figure of the windows' starts: the previous window's ``at_hi`` where ``chained``
    (:func:`chained_starts`), ``at_rest`` at the others (``rest``, the flatnonzero of
    ``~chained``, in order)."""
    out = np.empty(at_hi.shape[0], dtype=at_hi.dtype)
    if rest.shape[0] == 1:  # the first window alone (a partition): no gather
        out[1:] = at_hi[:-1]
    else:
        on = np.flatnonzero(chained)
        out[on] = at_hi[on - 1]
    out[rest] = at_rest
    return out


def length_before(iv: Intervals, t: np.ndarray) -> np.ndarray:
    """Length of ``iv`` before each time ``t``."""
    t = np.asarray(t, dtype=np.float64)
    if not len(iv):
        return np.zeros(t.shape, dtype=np.float64)
    return _cumulative(iv, t)


#: Times taken at once by :func:`_cumulative`: its four temporaries per time stay a few MB
#: where a replay asks for millions of timepoints (10⁶ steps: 3 M, its peak).
CUMULATIVE_CHUNK = 1 << 18


def _cumulative(iv: Intervals, t: np.ndarray) -> np.ndarray:
    """Length of ``iv`` before time ``t`` (vectorised over ``t``, in chunks of a long one:
    each time's length is its own, so the chunks give the same floats)."""
    if t.ndim == 1 and t.shape[0] > CUMULATIVE_CHUNK:
        out = np.empty(t.shape[0])
        for lo in range(0, t.shape[0], CUMULATIVE_CHUNK):
            out[lo:lo + CUMULATIVE_CHUNK] = _cumulative_of(iv, t[lo:lo + CUMULATIVE_CHUNK])
        return out
    return _cumulative_of(iv, t)


def _cumulative_of(iv: Intervals, t: np.ndarray) -> np.ndarray:
    lengths, before = iv._lengths_before
    k = np.searchsorted(iv.start, t, side="right")  # intervals starting at or before t
    idx = np.maximum(k - 1, 0)
    partial = np.clip(t - iv.start[idx], 0.0, lengths[idx]) + before[idx]
    return np.where(k > 0, partial, 0.0)


def clip(iv: Intervals, lo: float, hi: float) -> Intervals:
    """The part of ``iv`` inside ``[lo, hi)``."""
    s = np.maximum(iv.start, lo)
    e = np.minimum(iv.end, hi)
    keep = e > s
    return Intervals(s[keep], e[keep])


def complement(iv: Intervals, lo: float, hi: float) -> Intervals:
    """``[lo, hi)`` minus ``iv``: the gaps, e.g. device-idle periods of a step."""
    c = clip(iv, lo, hi)
    s = np.concatenate([[lo], c.end])
    e = np.concatenate([c.start, [hi]])
    keep = e > s
    return Intervals(s[keep], e[keep])


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """The time both ``a`` and ``b`` cover."""
    if not len(a) or not len(b):
        return Intervals.empty()
    # Sweep the boundaries; at one time, ends before starts (half-open intervals).
    t = np.concatenate([a.start, a.end, b.start, b.end])
    d_a = np.concatenate([np.ones(a.start.size), -np.ones(a.end.size),
                          np.zeros(2 * b.start.size)])
    d_b = np.concatenate([np.zeros(2 * a.start.size), np.ones(b.start.size),
                          -np.ones(b.end.size)])
    order = np.lexsort((d_a + d_b, t))
    t, in_a, in_b = t[order], np.cumsum(d_a[order]), np.cumsum(d_b[order])
    both = (in_a[:-1] > 0) & (in_b[:-1] > 0)
    lo, hi = t[:-1][both], t[1:][both]
    ok = hi > lo
    return union_sorted(lo[ok], hi[ok]) if ok.any() else Intervals.empty()


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The time ``a`` covers and ``b`` does not."""
    if not len(a) or not len(b):
        return a
    return intersect(a, complement(b, float(min(a.start[0], b.start[0])),
                                   float(max(a.end[-1], b.end[-1]))))


def holds(iv: Intervals, t: np.ndarray) -> np.ndarray:
    """Per time ``t``: whether one of ``iv``'s intervals holds it."""
    t = np.asarray(t, dtype=np.float64)
    if not len(iv):
        return np.zeros(t.shape, dtype=bool)
    k = np.searchsorted(iv.start, t, side="right") - 1
    return (k >= 0) & (t < iv.end[np.maximum(k, 0)])
