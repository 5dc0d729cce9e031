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
from tb_diagnostics.analysis.views.comm import StepComm
from tb_diagnostics.analysis.window_columns import WindowColumns
from tb_diagnostics.lazy_rows import LazyRows, dict_column
from tb_diagnostics.report.headline import compile_reason
from tb_diagnostics.report.rounding import rounded


def _ratio(part: np.ndarray, wall: np.ndarray) -> np.ndarray:
    """``part / wall`` where the wall is positive, else 0 (``StepWindow.device_busy``)."""
    return np.divide(part, wall, out=np.zeros(wall.shape[0]), where=wall > 0)


def step_documents(analysis: SpanAnalysis) -> LazyRows:
    """Every window's step document (the keys ``report.document.step_document`` gave),
    from the columns of ``analysis.windows``: packed columns, a dict made per step only
    when read (a span may hold a million steps)."""
    c: WindowColumns = analysis.windows.columns
    n = len(c)
    wall = c.end - c.start
    step = c.step.tolist() if c.has_steps else [None] * n
    idle_keys = [f"{k}_us" for k in c.idle]
    idle_cols = [rounded(v, 3) for v in c.idle.values()]
    idle = dict_column(idle_keys, idle_cols, n)
    reason: list[str | None] = [None] * n
    for k in np.flatnonzero(c.verdict_by == "compilation").tolist():
        reason[k] = compile_reason(float(c.idle["compile"][k]), float(wall[k]))
    self_dev = [None] * n if c.self_device_us is None else rounded(c.self_device_us, 3)
    cols = (step, rounded(c.start, 3), rounded(c.host_start, 3), rounded(c.host_end, 3),
            rounded(wall, 3), rounded(c.device_busy_us, 3),
            rounded(_ratio(c.device_busy_us, wall), 6), rounded(c.compute_busy_us, 3),
            rounded(_ratio(c.compute_busy_us, wall), 6),
            rounded(c.exposed_collective_us, 3), idle, c.verdict.tolist(), reason,
            c.main_idle_cause.tolist(), rounded(c.self_cpu_us, 3), self_dev,
            c.ops.tolist(), c.kernels.tolist(), c.flag_lists())
    keys = ("step", "start_us", "host_start_us", "host_end_us", "wall_us", "device_busy_us",
            "device_busy", "compute_busy_us", "compute_busy", "exposed_collective_us", "idle",
            "verdict", "verdict_reason", "main_idle_cause", "self_cpu_us", "self_device_us",
            "ops", "kernels", "flags")
    return LazyRows.from_columns(keys, cols, n)


def add_comm(steps: Sequence[Any], sc: StepComm) -> None:
    """Per step: communication time, the part compute does not hide, the overlap ratio
    (``StepComm.overlap``, rounded to 6 digits), for every step at once."""
    n = len(steps)
    comm = np.asarray(sc.comm_us[:n], dtype=np.float64)
    exposed = np.asarray(sc.exposed_us[:n], dtype=np.float64)
    has = comm > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ov = 1.0 - exposed / np.where(has, comm, 1.0)
    # max(0, min(1, ov)) as Python evaluates it (a NaN share reads 1).
    ov = np.where(ov < 1.0, ov, 1.0)
    ov = np.where(ov > 0.0, ov, 0.0)
    ov_l = rounded(ov, 6)
    for s, cu, eu, o, h in zip(steps, rounded(comm, 3), rounded(exposed, 3), ov_l,
                               has.tolist(), strict=True):
        s["comm_us"] = cu
        s["exposed_comm_us"] = eu
        s["overlap"] = o if h else None
