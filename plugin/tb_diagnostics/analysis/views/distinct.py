"""Distinct values and pairs of id columns in linear time where their range allows.

The views group 10⁵–10⁶ rows by ids (name, input dims, call stack, configuration) many
times per span; ``np.unique`` sorts every time, and ``np.unique(axis=1)`` on pairs sorts
rows as bytes (seconds on 10⁵ rows). Ids are small non-negative integers (string ids,
codes), so a presence table finds the distinct ones in one pass, with a sort only where
the values' range is too wide for a table.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics import sorted_sets

#: Up to this many possible values a presence table finds the distinct ones in linear time.
DENSE_LIMIT = 1 << 24
#: ... when there are no more than this many possible values per value: a table far wider
#: than the values (a product of two id ranges) costs more to clear and sum than a sort.
DENSE_PER_VALUE = 16


def distinct(values: np.ndarray, inverse_dtype: type = np.int64,
             ) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for int64 values ≥ -1 (ids, codes): a
    presence table when their range is small beside their number, a sort otherwise. The
    inverse comes as ``inverse_dtype`` (int32: half the memory for millions of values)."""
    if not values.size:
        return values[:0], np.zeros(0, dtype=inverse_dtype)
    hi = int(values.max())
    if (int(values.min()) < -1 or hi >= DENSE_LIMIT
            or hi + 2 > DENSE_PER_VALUE * values.shape[0] + 4096):
        u, inv = np.unique(values, return_inverse=True)
        return u, inv.reshape(-1).astype(inverse_dtype, copy=False)
    shifted = values + 1
    present = np.zeros(hi + 2, dtype=bool)
    present[shifted] = True
    code = np.cumsum(present, dtype=np.int32)  # < 2**24: int32 halves the table
    inverse = code[shifted].astype(inverse_dtype, copy=False)
    inverse -= 1
    return np.flatnonzero(present) - 1, inverse


def unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)``, by a sort (:mod:`tb_diagnostics.sorted_sets`): numpy 2.4's
    default hash table took 1.9 s on 10⁶ distinct ints that a sort takes 0.015 s for."""
    return sorted_sets.unique(values)


def pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (a, b) pairs (as two arrays, ordered by a then b) and each element's
    pair index, for int64 id columns (≥ -1): each column's distinct values first, then
    the pairs of their codes, whose range is the product of the two counts."""
    ua, ia = distinct(a)
    ub, ib = distinct(b)
    width = max(int(ub.shape[0]), 1)
    keys, inverse = distinct(ia * width + ib)
    return ua[keys // width], ub[keys % width], inverse
