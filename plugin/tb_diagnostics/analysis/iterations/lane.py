"""The main thread's calls, their nesting, and the occurrences of a marker among them."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.hierarchy import count_above
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import TraceModel

OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
OPTIMIZER_ZERO_GRAD = re.compile(r"^Optimizer\.zero_grad#")
DATALOADER = re.compile(r"^enumerate\(DataLoader\)#")
#: A Dynamo frame entered (``Torch-Compiled Region: 0/0``), or the AOTAutograd function
#: older traces show instead (not its backward, which runs on the autograd thread).
COMPILED_REGION = re.compile(r"^(Torch-Compiled Region\b|CompiledFunction$)")
CACHE_LOOKUP = re.compile(r"^TorchDynamo Cache Lookup$")
MODULE_FORWARD = re.compile(r"^nn\.Module: ")

#: Kinds that make up a thread's structure (ops and labels, not runtime calls).
LABEL_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)


@dataclass
class Lane:
    """The main thread's host rows (not Python frames) and their nesting."""

    rows: np.ndarray  # int64, in model order (start order)
    depth: np.ndarray  # how many non-Python host calls enclose each row
    start: np.ndarray
    end: np.ndarray
    lane_id: int


def main_lane(m: TraceModel, host: np.ndarray) -> int | None:
    """The thread with the optimizer (else the DataLoader, else the compiled-region)
    annotations; else the one whose top-level calls span the longest time (the backward
    thread starts after it, ends before it)."""
    for pattern in (OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD, DATALOADER, CACHE_LOOKUP,
                    COMPILED_REGION):
        rows = m.rows_matching(pattern)
        rows = rows[m.is_host[rows] & (m.kind[rows] != Kind.PYTHON)]
        if rows.size:
            return int(np.bincount(m.lane[rows]).argmax())
    # Top-level: no enclosing call but Python frames (a module's forward, the script).
    top = host[(make_lane(m, host, -1).depth == 0) & np.isin(m.kind[host], LABEL_KINDS)]
    if not top.size:
        return None
    best, best_key = None, None
    for ln in unique(m.lane[top]).tolist():
        r = top[m.lane[top] == ln]
        key = (float(m.end[r].max() - m.start[r].min()), r.size)
        if best_key is None or key > best_key:
            best, best_key = int(ln), key
    return best


def make_lane(m: TraceModel, rows: np.ndarray, lane_id: int) -> Lane:
    rows = rows.astype(np.int64)
    # Each row's ancestors that are not Python frames, by pointer jumping (log depth
    # passes), not one level per pass: with_stack nests frames hundreds deep.
    depth = count_above(m.parent, m.kind != Kind.PYTHON)[rows].astype(np.int64)
    return Lane(rows=rows, depth=depth, start=m.start[rows], end=m.end[rows], lane_id=lane_id)


def outermost(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of the occurrences not nested in an earlier one (one thread, start order):
    a nested optimizer (Lookahead around SGD) or a recursive label counts once."""
    if not start.size:
        return np.zeros(0, dtype=bool)
    before = np.maximum.accumulate(end)
    keep = np.ones(start.shape[0], dtype=bool)
    keep[1:] = start[1:] >= before[:-1]
    return keep


def parent_calls(m: TraceModel, rows: np.ndarray) -> np.ndarray:
    """For every row of ``rows``, the enclosing host call that is not a Python frame, or
    -1 (int64): every row climbs at once, a level a pass."""
    p = m.parent[rows].astype(np.int64)
    todo = np.flatnonzero(p >= 0)
    todo = todo[m.kind[p[todo]] == Kind.PYTHON]
    while todo.size:
        p[todo] = m.parent[p[todo]]
        todo = todo[p[todo] >= 0]
        todo = todo[m.kind[p[todo]] == Kind.PYTHON]
    return p


def occurrences(m: TraceModel, lane: Lane, pattern: re.Pattern[str]) -> dict[str, np.ndarray]:
    """Occurrences (lane row positions) of each name matching ``pattern``, those nested in
    another match left out (an optimizer wrapping another one steps once)."""
    ids = m.name_ids_matching(pattern)  # the model's one search over its names
    if not ids.size:
        return {}
    pos = np.flatnonzero(np.isin(m.name[lane.rows], ids))
    pos = pos[outermost(lane.start[pos], lane.end[pos])]
    out: dict[str, np.ndarray] = {}
    for sid in unique(m.name[lane.rows[pos]]).tolist():
        out[m.strings[sid]] = pos[m.name[lane.rows[pos]] == sid]
    return out


def all_occurrences(found: dict[str, np.ndarray], lane: Lane) -> np.ndarray:
    """The occurrences of every name together, in time order, nested ones left out."""
    if not found:
        return np.zeros(0, dtype=np.int64)
    pos = np.sort(np.concatenate(list(found.values())))
    return pos[outermost(lane.start[pos], lane.end[pos])]


def pick(found: dict[str, np.ndarray], lane: Lane, latest: bool) -> tuple[str, np.ndarray]:
    """Among names repeating alike, the one starting an iteration (earliest first
    occurrence) or ending it (``latest``: the last optimizer to step)."""
    top = max(p.size for p in found.values())
    names = [n for n, p in found.items() if p.size == top]
    first = {n: float(lane.start[found[n][0]]) for n in names}
    name = (max if latest else min)(names, key=lambda n: (first[n], n))
    return name, found[name]


def module_frames(m: TraceModel, lane_id: int) -> np.ndarray:
    """The ``nn.Module`` forward frames (Python rows) of the main thread, in start order."""
    rows = m.rows_matching(MODULE_FORWARD)
    return rows[(m.kind[rows] == Kind.PYTHON) & (m.lane[rows] == lane_id)].astype(np.int64)
