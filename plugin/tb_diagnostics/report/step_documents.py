"""The step documents (``steps[]`` of a span's report document), built from the window
columns in one pass: no StepWindow, no numpy call and no ``round`` per step (issue 28: a
span of a million steps).

Every figure is rounded as Python's ``round`` does (:func:`.rounding.rounded`): the
documents are the same, to the last digit, as the per-window builder's they replace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.verdict import CAUSE_CODES, VERDICT_BY_CODES, VERDICTS
from tb_diagnostics.analysis.views.comm import StepComm
from tb_diagnostics.analysis.window_columns import WindowColumns
from tb_diagnostics.lazy_rows import (
    LazyRows,
    codes_column,
    derived_column,
    dict_column,
    list_column,
)
from tb_diagnostics.report.headline import compile_reason
from tb_diagnostics.report.rounding import rounded_array
from tb_diagnostics.report.step_columns import (
    Layer,
    flat_offsets,
    labels_column,
    set_columns,
    where,
)


def _ratio(part: np.ndarray, wall: np.ndarray) -> np.ndarray:
    """``part / wall`` where the wall is positive, else 0 (``StepWindow.device_busy``)."""
    return np.divide(part, wall, out=np.zeros(wall.shape[0]), where=wall > 0)


# The step documents' figures from the window columns, each elementwise (a chunk of rows
# gives those rows' values): lazy_rows.derived_column computes them as they are read.
def _itself(x: np.ndarray) -> np.ndarray:
    return x


def _wall_us(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    return rounded_array(end - start, 3)


def _share_of_wall(part: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    return rounded_array(_ratio(part, end - start), 6)


def _us(x: np.ndarray) -> Any:
    """A µs column, rounded to the ns as it is read."""
    return derived_column(rounded_array, [x], 3)


#: The flags a window's own columns give, in the order :func:`_flags` lists them.
FLAGS = ("inferred", "compiling", "artefact")


def _flags(c: WindowColumns) -> Any:
    """Every window's ``flags`` (:meth:`WindowColumns.flags_of`: inferred, compiling,
    artefact, in that order) as a list column: offsets and codes, no list per window."""
    n = len(c)
    has = np.zeros((n, len(FLAGS)), dtype=bool)
    has[:, 0] = c.inferred
    has[:, 1] = c.compiling
    if 0 <= c.stub < n:
        has[c.stub, 2] = True
    _, code = np.nonzero(has)  # row-major: each window's flags in FLAGS' order
    return list_column(flat_offsets(has.sum(axis=1)), labels_column(code, FLAGS))



def step_documents(analysis: SpanAnalysis) -> LazyRows:
    """Every window's step document (the keys ``report.document.step_document`` gave),
    from the columns of ``analysis.windows``: packed columns, a dict made per step only
    when read (a span may hold a million steps)."""
    c: WindowColumns = analysis.windows.columns
    n = len(c)
    # The figures are derived from the window columns as they are read (a chunk of rows
    # at a time, lazy_rows.derived_column), not held again rounded: the analysis holds
    # the columns anyway, and 10⁶ steps' rounded copies were ~50 MB.
    step = derived_column(_itself, [c.step]) if c.has_steps else [None] * n
    idle_keys = [f"{k}_us" for k in c.idle]
    idle_cols = [_us(v) for v in c.idle.values()]
    idle = dict_column(idle_keys, idle_cols, n)
    compiling = c.by_code == VERDICT_BY_CODES.index("compilation")
    reason = where(compiling, [compile_reason(float(c.idle["compile"][k]),
                                              float(c.end[k] - c.start[k]))
                               for k in np.flatnonzero(compiling).tolist()])
    self_dev = [None] * n if c.self_device_us is None else _us(c.self_device_us)
    cols = (step, _us(c.start), _us(c.host_start), _us(c.host_end),
            derived_column(_wall_us, [c.start, c.end]), _us(c.device_busy_us),
            derived_column(_share_of_wall, [c.device_busy_us, c.start, c.end]),
            _us(c.compute_busy_us),
            derived_column(_share_of_wall, [c.compute_busy_us, c.start, c.end]),
            _us(c.exposed_collective_us), idle,
            codes_column(c.verdict_code, VERDICTS), reason,
            codes_column(c.cause_code, CAUSE_CODES), _us(c.self_cpu_us), self_dev,
            derived_column(_itself, [c.ops]), derived_column(_itself, [c.kernels]), _flags(c))
    keys = ("step", "start_us", "host_start_us", "host_end_us", "wall_us", "device_busy_us",
            "device_busy", "compute_busy_us", "compute_busy", "exposed_collective_us", "idle",
            "verdict", "verdict_reason", "main_idle_cause", "self_cpu_us", "self_device_us",
            "ops", "kernels", "flags")
    return LazyRows.from_columns(keys, cols, n)


def comm_columns(sc: StepComm, n: int) -> Layer:
    """Per step: communication time, the part compute does not hide, the overlap ratio
    (``StepComm.overlap``, rounded to 6 digits; None without communication)."""
    comm = np.asarray(sc.comm_us[:n], dtype=np.float64)
    exposed = np.asarray(sc.exposed_us[:n], dtype=np.float64)
    has = comm > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ov = 1.0 - exposed / np.where(has, comm, 1.0)
    # max(0, min(1, ov)) as Python evaluates it (a NaN share reads 1).
    ov = np.where(ov < 1.0, ov, 1.0)
    ov = np.where(ov > 0.0, ov, 0.0)
    return (("comm_us", "exposed_comm_us", "overlap"),
            [rounded_array(comm, 3), rounded_array(exposed, 3), where(has, rounded_array(ov, 6))])


def add_comm(steps: Sequence[Any], sc: StepComm) -> None:
    """Set :func:`comm_columns`' keys on every step document of a list."""
    set_columns(steps, comm_columns(sc, len(steps)))
