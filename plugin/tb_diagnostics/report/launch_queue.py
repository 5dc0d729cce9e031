"""The span document's launch-queue keys: what ``views.backlog``, ``views.launch`` and
``views.activity_coverage`` decided, as JSON (added keys; see the README)."""

from __future__ import annotations

from typing import Any

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.activity_coverage import ActivityCoverage, activity_coverage
from tb_diagnostics.analysis.views.backlog import launch_backlog
from tb_diagnostics.analysis.views.launch import module_loads
from tb_diagnostics.rules.launch_backlog_drain import backlog_reason


def add_launch_queue(doc: dict[str, Any], analysis: SpanAnalysis) -> None:
    """Per step: the launch queue at both ends, launch → start, host period and device
    work, a ``module-load`` flag, and the verdict's reason where the backlog decided it;
    per span: ``activity_complete``, the coverage counts and their notes."""
    backlog = launch_backlog(analysis)
    loads = module_loads(analysis)
    acts = analysis.model.device_activity_rows
    if len(loads) and len(analysis.host_steps):
        load_windows = set(analysis.activity_step[acts.searchsorted(loads.acts)].tolist())
    else:
        load_windows = {0} if len(loads) else set()
    fields = backlog.all_step_fields()  # the columns once: per step it was a pass each
    # The windows' column, not a StepWindow per step (a span may hold a million).
    verdict_by = analysis.windows.columns.verdict_by.tolist()
    for k, (step, by) in enumerate(zip(doc["steps"], verdict_by, strict=True)):
        step.update(fields[k])
        if k in load_windows:
            step["flags"].append("module-load")
        if by == "launch-backlog":  # the analysis decided it; here only the words
            step["verdict_reason"] = backlog_reason(backlog, k)
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
