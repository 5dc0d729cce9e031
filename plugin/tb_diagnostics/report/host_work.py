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

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.host_work import host_work


def add_host_work(steps: list[dict[str, Any]], analysis: SpanAnalysis) -> None:
    """Set ``idle_host_work_us`` and ``host_work`` on every step document."""
    hw = host_work(analysis)
    m = analysis.model
    cols = zip(hw.idle_us.tolist(), hw.longest_us.tolist(), hw.longest_start.tolist(),
               hw.longest_end.tolist(), hw.longest_lane.tolist(), hw.longest_frame.tolist(),
               strict=True)
    for s, (idle, us, a, b, lane, frame) in zip(steps, cols, strict=True):
        s["idle_host_work_us"] = round(idle, 3)
        s["host_work"] = None if us <= 0 else {
            "us": round(us, 3), "start_us": round(a, 3), "end_us": round(b, 3),
            "thread": m.lanes[lane].label, "frame": m.name_of(frame) if frame >= 0 else None}
