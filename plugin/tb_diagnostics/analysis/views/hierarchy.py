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
