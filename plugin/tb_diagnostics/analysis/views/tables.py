"""The profiler table per op name, and kernel instances per step.

The op table reproduces ``prof.key_averages().table()``'s columns from a trace:
calls, self CPU, CPU total and self device time per op name, overall and per
step window. As in torch's table, *CPU total* counts a recursive call once
(``aten::to`` inside ``aten::to`` is not added twice) and *self device* charges
each device activity to the innermost op above its launch call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.steps import window_index
from tb_diagnostics.analysis.views.hierarchy import innermost_op, launching_op
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import ROW_CHUNK


@dataclass(frozen=True)
class OpTable:
    """One entry per distinct op name (string id)."""

    name_ids: np.ndarray  # int32 string ids
    calls: np.ndarray  # int64 calls over the span
    calls_per_window: np.ndarray  # (names, windows) int64; outside windows not counted
    self_cpu: np.ndarray  # µs
    total_cpu: np.ndarray  # µs, outermost calls of the name only
    self_device: np.ndarray  # µs of device activities launched directly by the op
    op_window: np.ndarray  # for each of analysis.op_rows, its window index or -1
    op_entry: np.ndarray  # for each of analysis.op_rows, its index into name_ids
    #: (names, windows) µs: self CPU, CPU total and self device per window, so that
    #: per-step figures can leave a cold step out (rules._util.warm_steps).
    self_cpu_per_window: np.ndarray
    total_cpu_per_window: np.ndarray
    self_device_per_window: np.ndarray

    def __len__(self) -> int:
        return int(self.name_ids.shape[0])

    def index(self, analysis: SpanAnalysis, name: str) -> int:
        sid = analysis.model.name_index.get(name)
        if sid is None:
            return -1
        hit = np.flatnonzero(self.name_ids == sid)
        return int(hit[0]) if hit.size else -1

    def rows_of(self, analysis: SpanAnalysis, entry: int) -> np.ndarray:
        """The op rows of table entry ``entry``."""
        return analysis.op_rows[self.op_entry == entry]


def window_of_rows(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """Step window index of host rows by their start (0 for a span without steps)."""
    if not len(analysis.host_steps):
        return np.zeros(rows.shape[0], dtype=np.int32)
    hs = analysis.host_steps
    return window_index(hs.host_start, hs.host_end, analysis.model.start, rows)


def _per_window(cell: np.ndarray, weights: np.ndarray | None, n: int, cols: int) -> np.ndarray:
    """(names, windows) sums of ``weights`` (counts without) by cell; column 0 (no window)
    dropped."""
    return np.bincount(cell, weights=weights, minlength=n * cols).reshape(n, cols)[:, 1:]


@computed
def op_table(analysis: SpanAnalysis) -> OpTable:
    m = analysis.model
    ops = analysis.op_rows
    n_win = len(analysis.windows)
    # First, while little else is alive: it walks the op ancestry of every op (peak memory).
    nested = _recursive(analysis, ops)
    name_ids, entry = m.name_groups(ops)
    n = name_ids.shape[0]
    win = window_of_rows(analysis, ops)
    calls = np.bincount(entry, minlength=n)
    # One (name, window) cell per op; ops outside every window (-1) fall in an extra
    # column 0 that is dropped. No masked copies: this runs over every op call.
    cols = n_win + 1
    cell = entry.astype(np.int32 if n * cols < 2**31 else np.int64) * cols
    cell += win + 1
    per_win = _per_window(cell, None, n, cols)
    self_t = m.self_time(ops)
    self_cpu = np.bincount(entry, weights=self_t, minlength=n)
    self_pw = _per_window(cell, self_t, n, cols)
    del self_t
    dur = m.dur[ops]
    dur[nested] = 0.0  # already inside an op of the same name
    total_cpu = np.bincount(entry, weights=dur, minlength=n)
    total_pw = _per_window(cell, dur, n, cols)
    del dur, nested, cell

    acts = m.device_activity_rows
    op_of = launching_op(analysis)
    has = op_of >= 0
    pos = np.searchsorted(name_ids, m.name[op_of[has]])
    pos = np.minimum(pos, max(n - 1, 0))
    match = n > 0 and name_ids[pos] == m.name[op_of[has]]
    self_dev = np.zeros(n)
    dev_pw = np.zeros((n, n_win))
    if n:
        # Sums from zero in the activities' order, as np.add.at made them (8x its speed).
        a_dur = m.dur[acts[has]]
        # (float64 even with no activity: bincount of nothing is int64)
        self_dev = np.bincount(pos[match], weights=a_dur[match],
                               minlength=n).astype(np.float64, copy=False)
        act_win = (analysis.activity_step[has] if len(analysis.host_steps)
                   else np.zeros(int(has.sum()), dtype=np.int64))
        sel = match & (act_win >= 0)
        cell = pos[sel].astype(np.int64) * n_win + act_win[sel]
        dev_pw = np.bincount(cell, weights=a_dur[sel], minlength=n * n_win).astype(
            np.float64, copy=False).reshape(n, n_win)
        del a_dur, cell
    return OpTable(name_ids=name_ids, calls=calls, calls_per_window=per_win,
                   self_cpu=self_cpu, total_cpu=total_cpu, self_device=self_dev,
                   op_window=win, op_entry=entry, self_cpu_per_window=self_pw,
                   total_cpu_per_window=total_pw, self_device_per_window=dev_pw)


def _recursive(analysis: SpanAnalysis, ops: np.ndarray) -> np.ndarray:
    """Which op rows run inside an op of the same name (their time is already counted)."""
    m = analysis.model
    inner = innermost_op(analysis)
    nested = np.zeros(ops.shape[0], dtype=bool)
    # A chunk of rows at a time: the climb's temporaries stay small on huge traces.
    for a in range(0, ops.shape[0], ROW_CHUNK):
        part = ops[a:a + ROW_CHUNK]
        names = m.name[part]
        anc = inner[part]
        out = nested[a:a + ROW_CHUNK]
        live = np.flatnonzero(anc >= 0)
        while live.size:
            out[live] |= m.name[anc[live]] == names[live]
            anc[live] = inner[anc[live]]
            live = live[(anc[live] >= 0) & ~out[live]]
    return nested


@dataclass(frozen=True)
class KernelInstances:
    """Every kernel of the span with what identifies "the same kernel" across steps."""

    rows: np.ndarray  # kernel rows
    name: np.ndarray  # string id of the kernel name
    shape: np.ndarray  # string id of [grid, block], else of the launching op's Input Dims, or -1
    window: np.ndarray  # step window index, -1 outside steps
    ordinal: np.ndarray  # k-th launch of (name, shape) within its window

    def __len__(self) -> int:
        return int(self.rows.shape[0])


@computed
def kernel_instances(analysis: SpanAnalysis) -> KernelInstances:
    m = analysis.model
    acts = m.device_activity_rows
    is_k = m.kind[acts] == Kind.KERNEL
    rows = acts[is_k]
    window = (analysis.activity_step[is_k] if len(analysis.host_steps)
              else np.zeros(rows.shape[0], dtype=np.int64))
    op_of = launching_op(analysis)[is_k]
    # The kernel's own grid and block where the trace records them, else the
    # launching op's input shapes.
    by_op = np.where(op_of >= 0, m.input_dims[np.maximum(op_of, 0)], -1)
    own = m.launch_shape[rows]
    shape = np.where(own >= 0, own, by_op).astype(np.int64)
    name = m.name[rows].astype(np.int64)
    # Rank within (window, name, shape) in launch (= start) order.
    order = np.lexsort((m.start[rows], shape, name, window))
    keys = np.stack([window[order], name[order], shape[order]])
    new = np.ones(rows.shape[0], dtype=bool)
    if rows.size > 1:
        new[1:] = np.any(keys[:, 1:] != keys[:, :-1], axis=0)
    group_start = np.maximum.accumulate(np.where(new, np.arange(rows.shape[0]), 0))
    ordinal = np.empty(rows.shape[0], dtype=np.int64)
    ordinal[order] = np.arange(rows.shape[0]) - group_start
    return KernelInstances(rows=rows, name=name, shape=shape, window=window, ordinal=ordinal)
