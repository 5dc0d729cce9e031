"""The host thread of each segment of a step's critical path, for the tab's dispatch chain.

The tree groups a step's calls per thread (a training step's autograd thread has its own
``aten::add`` and ``aten::mul``), so matching the path's segments to its nodes by name needs
each segment's thread: the thread of the op it belongs to (for a device activity, the op
that launched it), else the segment's own thread when it is host time (the step's or the
DataLoader's range), else none (an activity without a recorded launch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.critpath.names import op_above


def add_threads(analysis: SpanAnalysis, cp: dict[str, Any]) -> None:
    """Add ``thread`` (a lane label, as the tree's thread nodes name it, or None) to each of
    ``cp["segments"]`` (a :func:`~tb_diagnostics.report.critical_path.critical_path_document`)."""
    segs = cp.get("segments") or []
    if not segs:
        return
    m = analysis.model
    rows = np.asarray([g["row"] for g in segs], dtype=np.int64)
    ops = op_above(analysis, rows)
    ok = rows >= 0
    host = np.zeros(rows.size, dtype=bool)
    host[ok] = m.is_host[rows[ok]]
    who = np.where(ops >= 0, ops, np.where(host, rows, -1))
    labels = [ln.label for ln in m.lanes]
    for g, w in zip(segs, who.tolist(), strict=True):
        g["thread"] = labels[int(m.lane[w])] if w >= 0 else None
