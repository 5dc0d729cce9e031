"""Op ancestry: which operator a row runs under.

The model's ``parent`` column is the host nesting per thread; these views walk it
with vectorised pointer jumping (:func:`nearest_marked`: every pass doubles how far
each unresolved row has climbed, so a stack of depth *d* takes log2 *d* passes over
the rows still climbing, never one pass per level nor a Python loop over rows) to
answer the two questions every table rule asks:

- the *innermost* op above a row: for a runtime call, the op that launched it, so
  a kernel's time is charged to ``aten::mm`` rather than to ``aten::matmul``
  (torch-tb-profiler's "self device time");
- the *outermost* op above a row: the op the user's Python called
  (``aten::linear``, not the ``aten::addmm`` it dispatches to).
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.trace.model import NO_ID, row_indices


@computed
def is_op(analysis: SpanAnalysis) -> np.ndarray:
    """Boolean mask over rows: operator calls (``SpanAnalysis.op_rows``)."""
    mask = np.zeros(len(analysis.model), dtype=bool)
    mask[analysis.op_rows] = True
    return mask


def nearest_marked(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """For every row: itself when ``marked``, else its nearest marked ancestor, else -1.

    Pointer jumping: each row holds a pointer up its chain, starting at itself (marked)
    or its parent; while the pointer is on an unmarked row, it is replaced by that row's
    pointer. A marked row and -1 point to themselves, so every pass doubles the distance
    a row has climbed, never past the first marked row, and only the rows still climbing
    take part: O(rows · log depth) gathers in all, where one level per pass would take
    O(rows · depth). Returns int32, as the model's row links are.
    """
    ptr = parent.astype(np.int32, copy=True)
    marked_rows = row_indices(marked)
    ptr[marked_rows] = marked_rows
    del marked_rows
    todo = row_indices(ptr >= 0)
    todo = todo[~marked[ptr[todo]]]
    while todo.size:
        at = ptr[ptr[todo]]
        ptr[todo] = at
        keep = at >= 0
        keep[keep] = ~marked[at[keep]]
        todo = todo[keep]
    return ptr


def count_above(parent: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """For every row, how many of its ancestors (strictly above it) ``counted`` holds on.

    Pointer jumping with a running sum: ``acc`` is the count over the rows from the
    parent up to (not including) the pointer, and each pass adds the pointer's own count
    and its ``acc`` before doubling the pointer, so a chain of depth *d* takes log2 *d*
    passes over the rows still climbing. Returns int32, as the model's row links are.
    """
    nxt = parent.astype(np.int32, copy=True)
    acc = np.zeros(parent.shape[0], dtype=np.int32)
    todo = row_indices(nxt >= 0)
    while todo.size:
        p = nxt[todo]
        # Right sides read the pass's old values (synchronous jumping).
        acc[todo] += counted[p] + acc[p]
        up = nxt[p]
        nxt[todo] = up
        todo = todo[up >= 0]
    return acc


@computed
def op_parent(analysis: SpanAnalysis) -> np.ndarray:
    """Per op call (``op_rows`` position), the position of the nearest op above it, or -1:
    the op tree, as short as the op list, whose chains are the op nesting alone (the
    Python frames and annotations in between are gone)."""
    ops = analysis.op_rows
    # Each op's position, by row: one scatter and one gather, where a search would take
    # log(ops) per op (an op above an op is an op: every look-up finds one).
    pos = np.full(len(analysis.model), NO_ID, dtype=np.int32)
    pos[ops] = np.arange(ops.shape[0], dtype=np.int32)
    up = innermost_op(analysis)[ops]
    return np.where(up >= 0, pos[np.maximum(up, 0)], NO_ID).astype(np.int32)


def climb_ops(analysis: SpanAnalysis, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """For each row of ``start`` (-1: none), the nearest row at or above it where the
    mask ``stop`` holds, or -1 (int32).

    When ``stop`` holds on op calls only, the rows met on the way are the ops above the
    first op at or above the start: the climb follows :func:`op_parent` by pointer
    jumping, O(ops · log op depth), where one parent level per pass would take one pass
    per Python frame too (``with_stack`` nests them hundreds deep). Otherwise every row's
    chain is climbed (:func:`nearest_marked`).
    """
    m = analysis.model
    start = np.asarray(start)
    some = start >= 0
    at = np.maximum(start, 0)
    out = np.full(start.shape[0], NO_ID, dtype=np.int32)
    ops = analysis.op_rows
    if np.count_nonzero(stop[ops]) != np.count_nonzero(stop):
        near = nearest_marked(m.parent, stop)
        out[some] = near[at[some]]
        return out
    first = np.where(is_op(analysis)[at], at, innermost_op(analysis)[at])
    some &= first >= 0
    if not some.any():
        return out
    near = nearest_marked(op_parent(analysis), stop[ops])  # in op positions
    found = near[np.searchsorted(ops, first[some])]
    out[some] = np.where(found >= 0, ops[np.maximum(found, 0)], NO_ID)
    return out


@computed
def innermost_op(analysis: SpanAnalysis) -> np.ndarray:
    """For every row, the nearest op strictly above it on its thread, or -1."""
    m = analysis.model
    at_or_above = nearest_marked(m.parent, is_op(analysis))
    par = m.parent
    out = at_or_above[np.maximum(par, 0)]
    out[par < 0] = NO_ID
    return out


@computed
def outermost_op(analysis: SpanAnalysis) -> np.ndarray:
    """For every row, the outermost op of the chain of ops above it (or itself), or -1.

    The chain is the run of op ancestors that are directly nested in one another;
    an annotation or a Python frame in between ends it, so an op inside a
    ``record_function`` still reports the op the user called, not the label.
    """
    m = analysis.model
    ops = is_op(analysis)
    inner = innermost_op(analysis)
    par = m.parent
    # Along op → op links only: an op whose parent is not an op heads its chain; every
    # other row is cut off (parent -1), so it resolves at once and costs nothing.
    op_parent = np.zeros(len(m), dtype=bool)
    has = par >= 0
    op_parent[has] = ops[par[has]]
    del has
    link = np.where(ops & op_parent, par, NO_ID).astype(np.int32)
    head = nearest_marked(link, ops & ~op_parent)
    del link, op_parent
    top = np.where(inner >= 0, head[np.maximum(inner, 0)], NO_ID).astype(np.int32)
    top[ops] = head[ops]
    return top


@computed
def launching_op(analysis: SpanAnalysis) -> np.ndarray:
    """For each device activity (``model.device_activity_rows`` order), the innermost op
    above its runtime/driver call, or -1 when the launch is not in the trace."""
    m = analysis.model
    launcher = m.launcher[m.device_activity_rows]
    inner = innermost_op(analysis)
    return np.where(launcher >= 0, inner[np.maximum(launcher, 0)], NO_ID)


def ancestors(analysis: SpanAnalysis, row: int) -> list[int]:
    """The host rows enclosing ``row`` on its thread, innermost first."""
    out = []
    p = int(analysis.model.parent[row])
    while p >= 0:
        out.append(p)
        p = int(analysis.model.parent[p])
    return out
