"""Host nesting: the parent of every host row, vectorised.

The profiler writes complete events; which one encloses which is implied by time
on each thread. The rule is a stack walk: rows in order (start, longer first); a
row that starts at or after an open row's end closes it; a row's parent is the
open row on top. A row that starts inside an open row is its child even if it
overruns that row's end by rounding.

That walk is a Python loop over every row. Its result has a closed form that
numpy can compute: the top of the stack when row *i* starts is the *latest*
earlier row on the thread whose end lies after *i*'s start (every row pushed
after it has been closed by then, and every row closed before has ended by
then), so

    parent(i) = max { j < i on the same thread : end[j] > start[i] }

— a "previous greater element" query with a per-row threshold. It is answered
in two levels: a short backward scan inside the row's own block of
:data:`BLOCK` rows (most parents are a few rows back), then, for the rest, a
binary-lifting search over the blocks' maxima for the latest block that holds
a qualifying row, and a scan inside that block. All of it is whole-array numpy
work in chunks of ``ROW_CHUNK`` rows, so the temporaries stay small.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import NO_ID, ROW_CHUNK, row_indices

#: Rows per block: the backward scan inside a block takes at most this many passes.
#: ROW_CHUNK, the rows per pass of the whole-array steps, is a multiple of it.
BLOCK = 32


def nest(kind: np.ndarray, lane: np.ndarray, start: np.ndarray, end: np.ndarray,
         is_dev: np.ndarray) -> np.ndarray:
    """Parent row of every host row (NO_ID for top-level rows and device rows).

    Rows are ordered by (start, longer first), as the model keeps them.
    """
    parent = np.full(kind.shape[0], NO_ID, dtype=np.int32)
    host = row_indices(~is_dev & (kind != Kind.TRACE))
    if not host.size:
        return parent
    # Thread by thread, each in row order: positions in this order are what the
    # search below works on.
    rows = host[np.argsort(lane[host], kind="stable")]
    del host
    found = previous_greater(end[rows], start[rows])
    # The latest row anywhere before with a later end: when it lies on an earlier
    # thread, no row of this thread qualifies.
    lane_of = lane[rows]
    first = np.zeros(rows.shape[0], dtype=np.int32)
    starts = np.flatnonzero(lane_of[1:] != lane_of[:-1]) + 1
    first[starts] = starts
    np.maximum.accumulate(first, out=first)
    del lane_of, starts
    ok = found >= first
    parent[rows[ok]] = rows[found[ok]]
    return parent


def previous_greater(values: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """For each i, the largest j < i with ``values[j] > thresholds[i]``, else -1 (int32)."""
    m = values.shape[0]
    out = np.full(m, -1, dtype=np.int32)
    far = [_within_block(values, thresholds, out, c0, min(c0 + ROW_CHUNK, m))
           for c0 in range(0, m, ROW_CHUNK)]
    far_rows = np.concatenate(far) if far else np.zeros(0, dtype=np.int32)
    del far
    if not far_rows.size:
        return out
    levels = _block_maxima_levels(values)
    for c0 in range(0, far_rows.shape[0], ROW_CHUNK):
        _across_blocks(values, thresholds, out, far_rows[c0:c0 + ROW_CHUNK], levels)
    return out


def _within_block(values: np.ndarray, thresholds: np.ndarray, out: np.ndarray,
                  lo: int, hi: int) -> np.ndarray:
    """Answer the rows of [lo, hi) whose answer lies in their own block, scanning back;
    return the rows whose answer, if any, lies in an earlier block."""
    todo = np.arange(lo, hi, dtype=np.int32)
    limit = todo - todo % BLOCK  # the block's first row
    s = thresholds[lo:hi]
    left: list[np.ndarray] = []
    for k in range(1, BLOCK):
        spent = todo - k < limit
        if spent.any():
            left.append(todo[spent])
            keep = ~spent
            todo, limit, s = todo[keep], limit[keep], s[keep]
        if not todo.size:
            break
        cand = todo - k
        hit = values[cand] > s
        out[todo[hit]] = cand[hit]
        miss = ~hit
        todo, limit, s = todo[miss], limit[miss], s[miss]
    left.append(todo)
    return np.concatenate(left)


def _block_maxima_levels(values: np.ndarray) -> list[np.ndarray]:
    """``levels[k][q]``: the largest value in blocks ``q .. q + 2**k - 1``."""
    levels = [np.maximum.reduceat(values, np.arange(0, values.shape[0], BLOCK))]
    step = 1
    while step * 2 <= levels[0].shape[0]:
        prev = levels[-1]
        levels.append(np.maximum(prev[:-step], prev[step:]))
        step *= 2
    return levels


def _across_blocks(values: np.ndarray, thresholds: np.ndarray, out: np.ndarray,
                   rows: np.ndarray, levels: list[np.ndarray]) -> None:
    s = thresholds[rows]
    # Binary lifting: skip back over runs of whole blocks whose maximum is not above
    # the threshold; what is left is the latest block that holds an answer.
    pos = rows // BLOCK
    for k in range(len(levels) - 1, -1, -1):
        step = 1 << k
        back = pos - step
        can = back >= 0
        skip = can & (levels[k][np.maximum(back, 0)] <= s)
        pos = np.where(skip, back, pos)
    block = pos - 1
    has = block >= 0
    rows, s, block = rows[has], s[has], block[has]
    # Inside that block, the latest row above the threshold (there is one).
    cand = np.minimum((block + 1) * BLOCK, values.shape[0]) - 1
    while rows.size:
        hit = values[cand] > s
        out[rows[hit]] = cand[hit]
        miss = ~hit
        rows, s, cand = rows[miss], s[miss], cand[miss] - 1
