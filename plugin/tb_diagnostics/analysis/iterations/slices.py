"""Which slices of an id column are alike, for every slice at once.

The iteration search compares the calls of one iteration with another's: as sets of
names (:func:`.windows.period`) and as sequences of calls (``repeats``). A tuple or a
frozenset per iteration was a Python object per step (10⁶ of them on 10⁶ iterations);
here each slice gets a 64-bit fingerprint from column passes, slices are grouped by it,
and every slice is then compared element by element with its group's first slice, so
the grouping is exact: where two unequal slices share a fingerprint (never seen; the
check is what makes it exact), the caller is told (None) and takes its own Python path.
"""

from __future__ import annotations

import numpy as np

#: The fingerprint's odd multipliers, one per place in a slice, from a fixed seed: the
#: same grouping on every run.
_SEED = 0x5EED_C0DE


def _places(n: int) -> np.ndarray:
    """``n`` odd 64-bit multipliers, one per place in a slice."""
    return np.random.default_rng(_SEED).integers(1, 1 << 63, size=n,
                                                 dtype=np.uint64) | np.uint64(1)


def slice_groups(values: np.ndarray, at: np.ndarray) -> np.ndarray | None:
    """For the slices ``values[at[k]:at[k + 1]]`` (``at`` non-decreasing), a group id
    (int64) per slice: equal ids exactly for equal slices (as sequences), numbered in
    the order of each group's first slice. None where fingerprints collided."""
    at = np.asarray(at, dtype=np.int64)
    n = max(at.shape[0] - 1, 0)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lens = np.diff(at)
    base = int(at[0])
    elems = np.asarray(values[base:int(at[-1])])
    offset = at[:-1] - base
    pos = np.arange(elems.shape[0], dtype=np.int64) - np.repeat(offset, lens)
    place = _places(int(lens.max()) + 1)
    with np.errstate(over="ignore"):  # the fingerprint wraps around 2⁶⁴ on purpose
        mixed = (elems.astype(np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
                 + np.uint64(0x632BE59BD9B4E019)) * place[pos]
        h = np.zeros(n, dtype=np.uint64)
        full = lens > 0
        if full.any():
            h[full] = np.add.reduceat(mixed, offset[full])
        h ^= lens.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
    _, first, group = np.unique(h, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    rep = first[group]  # each slice's group's first slice
    if not np.array_equal(lens[rep], lens):
        return None
    if not np.array_equal(elems[np.repeat(offset[rep], lens) + pos], elems):
        return None
    # Groups numbered by their first slice, as a dict filled in slice order numbers them.
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[group]


def set_groups(values: np.ndarray, at: np.ndarray, width: int) -> np.ndarray | None:
    """:func:`slice_groups` of the slices as sets (``frozenset``): each slice's distinct
    values, sorted, then grouped as sequences. ``values`` are ids in ``[-1, width)``."""
    at = np.asarray(at, dtype=np.int64)
    n = max(at.shape[0] - 1, 0)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lens = np.diff(at)
    chunk = np.repeat(np.arange(n, dtype=np.int64), lens)
    elems = np.asarray(values[int(at[0]):int(at[-1])]).astype(np.int64) + 1  # -1 is 0
    width += 1
    # Distinct (slice, value) pairs in (slice, value) order (the sort path of unique).
    key = np.unique(chunk * width + elems, return_counts=True)[0]
    cut = np.searchsorted(key // width, np.arange(n + 1, dtype=np.int64), side="left")
    return slice_groups(key % width, cut)
