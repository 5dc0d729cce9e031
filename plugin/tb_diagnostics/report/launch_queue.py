"""The span document's launch-queue keys: what ``views.backlog``, ``views.launch`` and
``views.activity_coverage`` decided, as JSON (added keys; see the README)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.activity_coverage import ActivityCoverage, activity_coverage
from tb_diagnostics.analysis.views.backlog import TRENDS, LaunchBacklog, launch_backlog
from tb_diagnostics.analysis.views.launch import module_loads
from tb_diagnostics.lazy_rows import ABSENT
from tb_diagnostics.report.rounding import rounded_array
from tb_diagnostics.report.step_columns import Layer, labels_column, where, with_columns
from tb_diagnostics.rules.launch_backlog_drain import backlog_reason


def backlog_columns(backlog: LaunchBacklog) -> Layer:
    """:meth:`LaunchBacklog.step_fields` of every step, as columns (computed once)."""
    queue = backlog.launch_queue_us
    trend = backlog.trend_codes()
    return (("backlog_start", "backlog_end", "backlog_start_us", "backlog_end_us",
             "backlog_trend", "launch_queue_us", "host_period_us", "device_work_us",
             "host_blocked_us", "host_limited"),
            [backlog.backlog_start.astype(np.int64), backlog.backlog_end.astype(np.int64),
             rounded_array(backlog.backlog_start_us, 3), rounded_array(backlog.backlog_end_us, 3),
             where(trend >= 0, labels_column(trend[trend >= 0], TRENDS)),
             where(~np.isnan(queue), rounded_array(queue, 3)),
             rounded_array(backlog.host_period_us, 3), rounded_array(backlog.device_work_us, 3),
             rounded_array(backlog.host_blocked_us, 3), backlog.host_limited.astype(bool)])


def launch_queue_columns(analysis: SpanAnalysis, n: int) -> Layer:
    """Per step of ``n`` (one per window): the launch queue at both ends, launch → start,
    host period and device work (:func:`backlog_columns`), a ``module-load`` flag after
    the window's own (``WindowColumns.flags_of``) where a module loaded, and the verdict's
    reason where the backlog decided it (ABSENT elsewhere: those rows keep theirs)."""
    backlog = launch_backlog(analysis)
    if len(backlog) != n:
        raise ValueError(f"a launch backlog of {len(backlog)} windows for {n} steps")
    loads = module_loads(analysis)
    acts = analysis.model.device_activity_rows
    if len(loads) and len(analysis.host_steps):
        load_windows = sorted_sets.unique(analysis.activity_step[acts.searchsorted(loads.acts)])
        load_windows = load_windows[(load_windows >= 0) & (load_windows < n)]
    else:
        load_windows = np.asarray([0] if len(loads) and n else [], dtype=np.int64)
    c = analysis.windows.columns
    loaded = np.zeros(n, dtype=bool)
    loaded[load_windows] = True
    flags = where(loaded, [[*c.flags_of(k), "module-load"] for k in load_windows.tolist()],
                  ABSENT)
    # The windows' column, not a StepWindow per step (a span may hold a million).
    by_backlog = c.verdict_by == "launch-backlog"  # the analysis decided it; here the words
    reason = where(by_backlog, [backlog_reason(backlog, k)
                                for k in np.flatnonzero(by_backlog).tolist()], ABSENT)
    keys, cols = backlog_columns(backlog)
    return (*keys, "flags", "verdict_reason"), [*cols, flags, reason]


def add_launch_queue(doc: dict[str, Any], analysis: SpanAnalysis) -> None:
    """Per step: :func:`launch_queue_columns` set on ``doc["steps"]`` (a list, or a LazyRows
    given one more layer); per span: ``activity_complete``, the coverage counts and their
    notes."""
    doc["steps"] = with_columns(doc["steps"], launch_queue_columns(analysis, len(doc["steps"])))
    add_activity_coverage(doc, analysis)


def add_activity_coverage(doc: dict[str, Any], analysis: SpanAnalysis) -> None:
    """Per span: ``activity_complete``, the coverage counts and their notes."""
    coverage = activity_coverage(analysis)
    doc["activity_complete"] = coverage.complete
    doc["activity_coverage"] = coverage_counts(coverage)
    doc["notes"].extend(coverage.notes())


def coverage_counts(c: ActivityCoverage) -> dict[str, int]:
    """The span's ``activity_coverage``: launches (kernels and copies) and how many have no
    device activity, activities with no launch, and backlog launched before the window."""
    return {"launches": c.kernel_launches + c.copy_launches,
            "launches_missing": c.launches_missing, "activities": c.activities,
            "no_launch": c.no_launch_count, "pre_window": c.pre_window_count}
