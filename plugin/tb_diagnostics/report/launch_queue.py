"""The span document's launch-queue keys: what ``views.backlog``, ``views.launch`` and
``views.activity_coverage`` decided, as JSON (added keys; see the README)."""

from __future__ import annotations

from typing import Any

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.activity_coverage import activity_coverage
from tb_diagnostics.analysis.views.backlog import launch_backlog
from tb_diagnostics.analysis.views.launch import module_loads


def add_launch_queue(doc: dict[str, Any], analysis: SpanAnalysis) -> None:
    """Per step: the launch queue at both ends, launch → start, host period and device
    work, and a ``module-load`` flag; per span: ``activity_complete`` and its notes."""
    backlog = launch_backlog(analysis)
    loads = module_loads(analysis)
    acts = analysis.model.device_activity_rows
    if len(loads) and len(analysis.host_steps):
        load_windows = set(analysis.activity_step[acts.searchsorted(loads.acts)].tolist())
    else:
        load_windows = {0} if len(loads) else set()
    for k, step in enumerate(doc["steps"]):
        step.update(backlog.step_fields(k))
        if k in load_windows:
            step["flags"].append("module-load")
    coverage = activity_coverage(analysis)
    doc["activity_complete"] = coverage.complete
    doc["notes"].extend(coverage.notes())
