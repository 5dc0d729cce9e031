"""Op ancestry: which operator a row runs under.

The model's ``parent`` column is the host nesting per thread; these views walk it
with vectorised pointer jumping (one numpy pass per nesting level, never a Python
loop over rows) to answer the two questions every table rule asks:

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


@computed
def innermost_op(analysis: SpanAnalysis) -> np.ndarray:
    """For every row, the nearest op strictly above it on its thread, or -1."""
    m = analysis.model
    ops = is_op(analysis)
    anc = m.parent.copy()  # int32, as the model's row links are
    todo = row_indices(anc >= 0)
    todo = todo[~ops[anc[todo]]]
    # Climb only the rows whose current ancestor is not an op yet.
    while todo.size:
        anc[todo] = m.parent[anc[todo]]
        todo = todo[anc[todo] >= 0]
        todo = todo[~ops[anc[todo]]]
    return anc


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
    top = np.where(ops, np.arange(len(m), dtype=np.int32), inner)
    todo = row_indices(top >= 0)
    while todo.size:
        par = m.parent[top[todo]]
        up = (par >= 0) & ops[np.maximum(par, 0)]
        todo = todo[up]
        top[todo] = par[up]
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
