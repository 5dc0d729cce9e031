"""Per step: the host's own work inside the launch cause (``analysis.views.host_work``).

Two keys, added beside the step's ``idle`` (whose ``launch_us`` keeps the whole cause):
``idle_host_work_us``, the part of ``idle.launch_us`` in which a thread that feeds the
device ran code that starts no op and no runtime call for at least
``HOST_WORK_MIN_US``; and ``host_work``, the step's longest such stretch (its idle µs,
bounds, thread, and the innermost Python frame or ``record_function`` label covering it),
or None where the step has none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.host_work import host_work
from tb_diagnostics.lazy_rows import dict_column
from tb_diagnostics.report.rounding import rounded_array
from tb_diagnostics.report.step_columns import Layer, set_columns, strings_column, where


def host_work_columns(analysis: SpanAnalysis, n: int) -> Layer:
    """``idle_host_work_us`` and ``host_work`` of every step of ``n`` (one per window), as
    columns: the stretch's dicts a column of dicts where a step has one, None elsewhere."""
    hw = host_work(analysis)
    m = analysis.model
    if hw.idle_us.shape[0] != n:
        raise ValueError(f"host work of {hw.idle_us.shape[0]} windows for {n} steps")
    has = hw.longest_us > 0
    frame = hw.longest_frame[has].astype(np.int64)
    names = np.where(frame >= 0, m.name[np.maximum(frame, 0)], -1)
    lane = hw.longest_lane[has].astype(np.int64) % max(len(m.lanes), 1)  # a list's index
    longest = dict_column(
        ("us", "start_us", "end_us", "thread", "frame"),
        [rounded_array(hw.longest_us[has], 3), rounded_array(hw.longest_start[has], 3),
         rounded_array(hw.longest_end[has], 3),
         strings_column(lane, [ln.label for ln in m.lanes]), strings_column(names, m.strings)],
        int(has.sum()))
    return (("idle_host_work_us", "host_work"),
            [rounded_array(hw.idle_us, 3), where(has, longest)])


def add_host_work(steps: list[dict[str, Any]], analysis: SpanAnalysis) -> None:
    """Set ``idle_host_work_us`` and ``host_work`` on every step document."""
    set_columns(steps, host_work_columns(analysis, len(steps)))
