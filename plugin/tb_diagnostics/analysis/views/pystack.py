"""The Python line behind a row.

Two trace generations carry stacks:

- ``with_stack=True`` since 2022 writes ``python_function`` events (one per frame,
  ``file(line): function``) with ``Python id`` / ``Python parent id``. A row's
  caller is the innermost frame *on the same thread* whose interval contains the
  row; frames usually share the op's lane (so ``parent`` finds them), but a frame
  may sit on a lane of its own with the same pid, so the interval search is the
  fallback. From that frame the ``Python parent id`` chain gives the stack.
- 2021 traces put a ``;``-separated ``Call stack`` string (innermost first) into the
  args of each op; a runtime call inherits the stack of its op.

:func:`user_frame` skips torch, the standard library and built-ins, so a
``cudaDeviceSynchronize`` is attributed to the line that called
``torch.cuda.synchronize()``, not to ``torch/cuda/__init__.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.trace.categories import Kind

#: Frames that are not the user's code: torch itself, the standard library's
#: process/thread plumbing, installed packages' site dirs and built-ins.
LIBRARY_FRAME = re.compile(
    r"^<built-in|^<string>|^<frozen|(?:^|/)(?:torch|site-packages|dist-packages|"
    r"multiprocessing|threading|importlib|contextlib|functools|runpy|asyncio|"
    r"concurrent|selectors|queue)(?:/|\.py)"
)
#: Frames of the profiler itself (its flush, start and stop).
PROFILER_FRAME = re.compile(r"(?:^|/)torch/(?:autograd/)?profiler(?:/|\.py)")

#: Tolerance when asking whether a frame contains a row: timestamps are rounded
#: to 1 µs in older traces and to 1 ns in newer ones.
_EPS_US = 0.5


@dataclass(frozen=True)
class PythonIndex:
    """``python_function`` rows, and their ``Python id`` → row map as two sorted arrays
    (a dict over every frame of a ``with_stack`` trace would cost megabytes)."""

    rows: np.ndarray  # PYTHON rows, in model (start) order
    ids: np.ndarray  # distinct Python ids, sorted
    id_rows: np.ndarray  # the row of each id (the last one, where an id repeats)

    @property
    def present(self) -> bool:
        return bool(self.rows.size)

    def row_of(self, python_id: int) -> int:
        """The frame row with this Python id, or -1."""
        # Searched as the ids' own dtype: a Python int would cast the whole int32 array
        # to int64 on every call (0.2 ms at 10⁶ frames, for every frame of a stack).
        info = np.iinfo(self.ids.dtype)
        if not info.min <= python_id <= info.max:
            return -1
        i = int(np.searchsorted(self.ids, self.ids.dtype.type(python_id)))
        return int(self.id_rows[i]) if i < self.ids.shape[0] and self.ids[i] == python_id else -1


@computed
def python_index(analysis: SpanAnalysis) -> PythonIndex:
    m = analysis.model
    rows = m.rows_of({Kind.PYTHON})
    ids = m.python_id[rows]
    keep = ids >= 0
    ids, with_id = ids[keep], rows[keep]
    order = np.argsort(ids, kind="stable")
    ids, with_id = ids[order], with_id[order]
    last = np.ones(ids.shape[0], dtype=bool)
    last[:-1] = ids[1:] != ids[:-1]
    return PythonIndex(rows=rows, ids=ids[last], id_rows=with_id[last])


def _innermost_frame(analysis: SpanAnalysis, row: int) -> int:
    m = analysis.model
    p = int(m.parent[row])
    while p >= 0:
        if m.kind[p] == Kind.PYTHON:
            return p
        p = int(m.parent[p])
    idx = python_index(analysis)
    if not idx.present:
        return -1
    # A frame on another lane of the same process whose interval contains the row.
    pid = m.lanes[int(m.lane[row])].pid
    rows = idx.rows
    lanes = [i for i, ln in enumerate(m.lanes) if ln.pid == pid and not ln.is_device]
    rows = rows[np.isin(m.lane[rows], np.asarray(lanes, dtype=np.int32))]
    inside = (m.start[rows] <= m.start[row] + _EPS_US) & (m.end[rows] >= m.end[row] - _EPS_US)
    rows = rows[inside & (rows != row)]
    # Rows are ordered by start (longer first on ties): the last one is the innermost.
    return int(rows[-1]) if rows.size else -1


def python_stack(analysis: SpanAnalysis, row: int) -> list[tuple[int, str]]:
    """The Python stack of ``row``, innermost first, as (frame row or -1, ``file(line): fn``).

    Frames from a 2021 ``Call stack`` string have no row (-1). Empty when the
    trace was recorded without ``with_stack=True``.
    """
    m = analysis.model
    frame = _innermost_frame(analysis, row)
    if frame >= 0:
        idx = python_index(analysis)
        out: list[tuple[int, str]] = []
        seen: set[int] = set()
        while frame >= 0 and frame not in seen:
            seen.add(frame)
            out.append((frame, m.name_of(frame)))
            parent_id = int(m.python_parent[frame])
            nxt = idx.row_of(parent_id) if parent_id >= 0 else -1
            if nxt < 0:
                # No id chain (or a broken one): continue through the thread nesting.
                p = int(m.parent[frame])
                while p >= 0 and m.kind[p] != Kind.PYTHON:
                    p = int(m.parent[p])
                nxt = p
            frame = nxt
        return out
    r = row
    while r >= 0:
        sid = int(m.call_stack[r])
        text = m.string(sid) if sid >= 0 else None
        if text:
            return [(-1, f.strip()) for f in text.split(";") if f.strip()]
        r = int(m.parent[r])
    return []


def user_frame(analysis: SpanAnalysis, row: int) -> tuple[int, str] | None:
    """The innermost frame of ``row``'s stack that is the user's code, or None."""
    for frame in python_stack(analysis, row):
        if not LIBRARY_FRAME.search(frame[1]):
            return frame
    return None


def called_by_profiler(analysis: SpanAnalysis, row: int) -> bool | None:
    """Whether a profiler frame (its start/stop/flush) is on ``row``'s stack.

    None when the trace has no stacks to tell.
    """
    stack = python_stack(analysis, row)
    if not stack:
        return None
    return any(PROFILER_FRAME.search(name) for _, name in stack)
