"""Activity coverage: launches without recorded device activity, activity without a launch.

CUPTI records each launch call on the host and, separately, each activity on
the device; the two meet through the correlation id (``model.launcher``). When
one side is missing, the span's figures describe only part of the work:

- **Launches with no device activity.** A kernel launch or copy whose activity
  is not in the trace ran unseen: CUPTI dropped it (a full activity buffer), or
  the trace is one device of a model split over several GPUs while the host
  thread launched on all of them. Device utilisation is then a lower bound.
  Memsets are apart: CUDA records no activity for a memset that sets nothing
  (cuBLAS/cuDNN workspace clears of zero bytes, sub-µs calls), so they are
  counted, but neither noted nor making the activity incomplete.
- **Activity with no launch.** CUPTI numbers API calls in the order the process
  makes them, so an activity whose correlation id is below that of the first
  launch call in the trace was launched *before* the record window (in the
  profiler's warm-up, or before it started) and only executed inside it: that is
  **backlog**, the device catching up on earlier work, not a step's kernels (HTA
  keeps only kernels with a launch in the trace for its queue length, since those
  kernels made its counts negative: ``negative_queue_length_values_check``).
  Other activity without a launch (no correlation, or a launch thread the trace
  did not record) is counted as missing its launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import TraceModel

#: Host API calls that launch a kernel (runtime, driver, HIP, CUDA graphs).
KERNEL_LAUNCH = re.compile(r"^(?:cuda|hip|cu)\w*Launch\w*Kernel|^(?:cuda|hip|cu)GraphLaunch")
#: ... that enqueue a copy, and a memset.
COPY_LAUNCH = re.compile(r"^(?:cuda|hip|cu)Memcpy")
MEMSET_LAUNCH = re.compile(r"^(?:cuda|hip|cu)Memset")
#: Kernel launches and copies with no activity, at least this many...
MIN_MISSING = 10
#: ...and this share of all of them, make the span's device activity incomplete (a few
#: launches at the very end of the window may lose their activity to the profiler's stop).
MIN_MISSING_SHARE = 0.02


def pre_window_activities(model: TraceModel) -> np.ndarray:
    """Bool per ``model.device_activity_rows``: launched before the record window.

    No launch call in the trace, and a correlation id below every launch call's:
    CUPTI gives ids in call order, so its launch came before the first one recorded.
    Reads the model only (the span's step assignment asks for it).
    """
    acts = model.device_activity_rows
    out = np.zeros(acts.shape[0], dtype=bool)
    unlinked = model.launcher[acts] < 0
    if not unlinked.any():
        return out
    calls = model.launcher_rows
    corr = model.correlation[calls]
    corr = corr[corr >= 0]
    if not corr.size:
        return out
    c = model.correlation[acts]
    out[:] = unlinked & (c >= 0) & (c < corr.min())
    return out


@dataclass(frozen=True)
class ActivityCoverage:
    """How much of the launched work the trace recorded, and what ran unlaunched."""

    kernel_launches: int  # kernel launch calls (graph launches included)
    copy_launches: int  # copy calls
    memset_launches: int  # memset calls
    kernel_launches_missing: int  # ...with no device activity in the trace
    copy_launches_missing: int
    memset_launches_missing: int
    kernels: int  # kernel activities recorded
    activities: int  # device activities recorded (kernels, copies, memsets)
    pre_window: np.ndarray  # bool per device activity: backlog launched before the window
    no_launch: np.ndarray  # bool per device activity: no launch, and not backlog
    missing_launch_rows: np.ndarray  # launch calls (kernels, copies) with no activity

    @property
    def pre_window_count(self) -> int:
        return int(self.pre_window.sum())

    @property
    def no_launch_count(self) -> int:
        return int(self.no_launch.sum())

    @property
    def launches_missing(self) -> int:
        """Kernel launches and copies whose activity is not in the trace."""
        return self.kernel_launches_missing + self.copy_launches_missing

    @property
    def complete(self) -> bool:
        """Whether the device activity stands for what the host launched (see module doc)."""
        launched = self.kernel_launches + self.copy_launches
        missing = self.launches_missing
        unlaunched = self.no_launch_count
        return not ((missing >= MIN_MISSING and missing >= MIN_MISSING_SHARE * launched)
                    or (unlaunched >= MIN_MISSING
                        and unlaunched >= MIN_MISSING_SHARE * max(self.activities, 1)))

    def notes(self) -> list[str]:
        """The span's notes, in words (empty when everything launched was recorded)."""
        out = []
        missing = self.launches_missing
        if missing:
            launched = self.kernel_launches + self.copy_launches
            what = (f"{launched:,} kernel launches and copies, {launched - missing:,} with "
                    f"device activity: {missing:,} have none in the trace")
            if self.complete:
                out.append(what + " (too few to change the figures)")
            else:
                out.append(what + " (work ran unseen: CUPTI dropped activities when its "
                           "buffers filled, the trace records one device of a model split "
                           "over several GPUs, or the profiler recorded counters instead of "
                           "activities); device utilisation is a lower bound")
        if self.no_launch_count:
            out.append(f"{self.no_launch_count:,} device activities have no launch call in the "
                       "trace (a launching thread not recorded?)"
                       + ("; device utilisation is not complete" if not self.complete else ""))
        if self.pre_window_count:
            out.append(f"{self.pre_window_count:,} device activities were launched before the "
                       "record window and ran inside it: backlog, not any step's kernels")
        return out


def _calls_matching(model: TraceModel, calls: np.ndarray, pattern: re.Pattern) -> np.ndarray:
    ids = unique(model.name[calls])
    keep = [i for i in ids.tolist() if pattern.match(model.strings[i])]
    return calls[np.isin(model.name[calls], np.asarray(keep, dtype=np.int64))]


@computed
def activity_coverage(analysis: SpanAnalysis) -> ActivityCoverage:
    m = analysis.model
    acts = m.device_activity_rows
    calls = m.launcher_rows
    linked = np.zeros(len(m), dtype=bool)
    launcher = m.launcher[acts]
    linked[launcher[launcher >= 0]] = True
    groups = {key: _calls_matching(m, calls, pat) for key, pat in
              (("kernel", KERNEL_LAUNCH), ("copy", COPY_LAUNCH), ("memset", MEMSET_LAUNCH))}
    missing = {key: rows[~linked[rows]] for key, rows in groups.items()}
    pre = pre_window_activities(m)
    return ActivityCoverage(
        kernel_launches=int(groups["kernel"].size), copy_launches=int(groups["copy"].size),
        memset_launches=int(groups["memset"].size),
        kernel_launches_missing=int(missing["kernel"].size),
        copy_launches_missing=int(missing["copy"].size),
        memset_launches_missing=int(missing["memset"].size),
        kernels=int((m.kind[acts] == Kind.KERNEL).sum()), activities=int(acts.size),
        pre_window=pre, no_launch=(launcher < 0) & ~pre,
        missing_launch_rows=np.sort(np.concatenate([missing["kernel"], missing["copy"]])))
