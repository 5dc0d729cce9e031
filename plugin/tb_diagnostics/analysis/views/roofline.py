"""Is the busy time well spent? Achieved FLOP/s and bytes/s against the device's roofline.

For every group of counted op calls (same name, shapes and types; see
:mod:`.op_costs`) the view puts the FLOPs and bytes of the cost model next to the
device time the calls' kernels took, and the device's peaks (:mod:`..cost.peaks`)
next to both:

- *arithmetic intensity* = FLOPs / bytes; the group is *compute-bound* when it is at or
  above the ridge point (peak FLOP/s of its precision / memory bandwidth), else
  *memory-bound*;
- *ideal time* = max(FLOPs / peak, bytes / bandwidth), the roofline's time for that
  work, and *% of roofline* = ideal / measured.

Copies between host and device (``Memcpy HtoD`` / ``DtoH``) cross the host link, not
device memory: their group is *host-link*-bound, its ideal time is the bytes copied over
the link's rate per direction (:mod:`..cost.host_link`), pageable copies flagged.
Collective kernels and ops (:mod:`..cost.collectives`) are communication: they are
counted apart, never as unmodelled compute. A group whose cost is only a memory lower
bound (:mod:`..cost.bounds`: a custom op with shapes but no formula, a KV-cache
attention) is not modelled: it gets ``bound_us`` (bytes / bandwidth, a bound on its
time), no ideal time, no bound class, and no FLOPs in the step figures.

The precision of a product (:mod:`.roofline_precision`) comes from its input types
(bf16/fp16/fp8/fp4/int8 at once; fp4/fp6 on a part without FP4/FP6 math is rated at bf16,
to which its kernels dequantise); fp32 inputs run as TF32 when the kernel is a TF32
tensor-op kernel, else on the CUDA cores. Memory-side ops run on the vector units, so
their ceiling is the fp32 (fp64) peak. Per step: FLOPs, achieved TFLOP/s over the wall
time, and FLOP utilisation (MFU in hardware FLOPs) against the peak of the step's
dominant precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tb_diagnostics.analysis.cost.host_link import HOST_COPY, PAGEABLE_COPY, HostLink, host_link
from tb_diagnostics.analysis.cost.peaks import (
    DevicePeaks,
    PeaksFileError,
    lookup,
    overrides_from_env,
)
from tb_diagnostics.analysis.intervals import Intervals, covered, union_of_rows, union_sorted
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.hierarchy import launching_op
from tb_diagnostics.analysis.views.op_costs import OpGroup, op_costs

# The precision tables and the peak key stay importable from here (kernels.py reads them).
from tb_diagnostics.analysis.views.roofline_precision import KERNEL_PRECISION as KERNEL_PRECISION
from tb_diagnostics.analysis.views.roofline_precision import (
    PRODUCT_PRECISIONS as PRODUCT_PRECISIONS,
)
from tb_diagnostics.analysis.views.roofline_precision import TF32_KERNEL as TF32_KERNEL
from tb_diagnostics.analysis.views.roofline_precision import (
    group_precisions,
    peak_precision,
)
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.trace.categories import Kind

BOUNDS = ("compute", "memory", "host-link")


@dataclass(frozen=True)
class GroupFigures:
    """One op group's totals over the span, against the roofline."""

    group: OpGroup
    precision: str | None  # the math the group's calls ran in (tf32 refined from kernels)
    peak_precision: str | None  # the peak table key its ceiling is
    calls: int
    flops: float
    bytes: float
    device_us: float  # union of the device activity its calls launched
    ideal_us: float | None
    bound: str | None  # compute / memory / host-link; None without peaks or cost
    #: Bytes its host↔device copies moved over the host link (0 for device-side work).
    link_bytes: float = 0.0
    pageable: bool = False  # some of those copies were from/to pageable host memory
    #: A lower bound on its time, bytes / bandwidth, when its cost is only a memory lower
    #: bound (``lower_bound``); it is then neither modelled nor priced (``ideal_us`` None).
    bound_us: float | None = None

    @property
    def modelled(self) -> bool:
        return self.group.cost is not None and not self.group.cost.lower_bound

    @property
    def lower_bound(self) -> bool:
        """Its cost is only the bytes it moves at the least (no FLOPs, no roofline)."""
        return self.group.cost is not None and self.group.cost.lower_bound

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.modelled and self.bytes > 0 else None

    @property
    def loss_us(self) -> float:
        """Device time above the roofline's time for the same work."""
        if self.ideal_us is None:
            return 0.0
        return max(self.device_us - self.ideal_us, 0.0)


@dataclass(frozen=True)
class Roofline:
    """The span's roofline figures, per op group and per step window."""

    peaks: DevicePeaks | None
    figures: list[GroupFigures]
    step_flops: np.ndarray  # per window
    step_precision: list[str | None]  # dominant precision (peak key) per window
    step_busy_compute_us: np.ndarray | None  # None without peaks
    step_busy_memory_us: np.ndarray | None
    shapes_recorded: bool
    activity_group: np.ndarray  # see OpCosts.activity_group
    notes: list[str] = field(default_factory=list)
    #: Device time of activities no counted op owns, by the name of the op that launched
    #: them: (name, activities, µs), largest first. The name is "" where the launch call
    #: is in the trace but inside no op, None where the launch call is not in the trace.
    unowned: list[tuple[str | None, int, float]] = field(default_factory=list)
    host_link: HostLink | None = None
    #: Collective activities (communication, outside the cost model): count and µs.
    communication: tuple[int, float] = (0, 0.0)

    def peak(self, precision: str | None) -> float | None:
        if self.peaks is None or precision is None:
            return None
        return self.peaks.peak(precision)


def span_peaks(analysis: SpanAnalysis) -> tuple[DevicePeaks | None, str | None]:
    """The device's peaks from the shipped table, updated by ``$TB_DIAGNOSTICS_PEAKS``;
    and the problem with that file, if any (the table alone is used then)."""
    name = None if analysis.cpu_only else analysis.model.device_name
    try:
        overrides = overrides_from_env()
    except PeaksFileError as exc:
        return lookup(name, analysis.model.used_device_properties), f"peak overrides ignored: {exc}"
    return lookup(name, analysis.model.used_device_properties, overrides), None


#: Up to this many groups, each group's union is merged on its own (no full-length copies of
#: the rows' times); beyond, one merge over offset copies does them all at once.
_GROUPS_ONE_BY_ONE = 512


def _group_union(group: np.ndarray, rows: np.ndarray, start: np.ndarray, end: np.ndarray,
                 n: int) -> np.ndarray:
    """Per group, the length of the union of its rows' intervals. ``rows`` ascend (so do
    their starts), and a stable sort by group keeps each group's rows ascending."""
    ok = np.flatnonzero(group >= 0)
    out = np.zeros(n)
    if not ok.size:
        return out
    order = ok[np.argsort(group[ok], kind="stable")]
    g = group[order]
    if n <= _GROUPS_ONE_BY_ONE:
        bounds = np.searchsorted(g, np.arange(n + 1))
        for k in np.flatnonzero(np.diff(bounds)).tolist():
            out[k] = union_of_rows(start, end, rows[order[bounds[k]:bounds[k + 1]]]).total
        return out
    s, e = start[rows[order]], end[rows[order]]
    width = float(max(e.max(), 0.0) - min(s.min(), 0.0)) + 1.0
    offset = g * width
    s += offset
    e += offset
    del offset
    iv = union_sorted(s, e)
    owner = np.floor(iv.start / width).astype(np.int64)
    return np.bincount(owner, weights=iv.end - iv.start, minlength=n)


def _class_intervals(figs: list[GroupFigures], activity_group: np.ndarray,
                     rows: np.ndarray, start: np.ndarray, end: np.ndarray,
                     ) -> dict[str, Intervals]:
    bound_of = np.asarray([BOUNDS.index(f.bound) if f.bound else -1 for f in figs] or [-1])
    cls = np.where(activity_group >= 0, bound_of[np.maximum(activity_group, 0)], -1)
    return {b: union_of_rows(start, end, rows[cls == i]) for i, b in enumerate(BOUNDS)}


@computed
def roofline(analysis: SpanAnalysis) -> Roofline:
    m = analysis.model
    oc = op_costs(analysis)
    peaks, peaks_problem = span_peaks(analysis)
    groups = oc.groups
    n_groups = len(groups)
    act_rows = oc.rows if analysis.cpu_only else m.device_activity_rows
    device_us = _group_union(oc.activity_group, act_rows, m.start, m.end, n_groups)
    calls = np.bincount(oc.group, minlength=n_groups)
    precisions = group_precisions(analysis, groups, oc.activity_group)
    bw = peaks.bandwidth_gbps if peaks is not None else None
    link = None if analysis.cpu_only else host_link(m.device_name, m.used_device_properties)
    link_bytes, link_share, pageable = _host_copies(analysis, oc.activity_group, n_groups,
                                                    device_us)
    figs = []
    for g, grp in enumerate(groups):
        cost = grp.cost
        flops = cost.flops * calls[g] if cost else 0.0
        nbytes = cost.bytes * calls[g] if cost else 0.0
        bound_us = None
        if cost is not None and cost.lower_bound:
            # Only the bytes it moves at the least: a bound on its time, no roofline.
            bound_us = nbytes / (bw * 1e3) if bw else None
            cost = None
        key = peak_precision(precisions[g], cost.tensor_op, peaks) if cost else None
        peak = peaks.peak(key) if peaks is not None and key else None
        ideal = bound = None
        if cost and peak and bw:
            ideal = max(flops / (peak * 1e6), nbytes / (bw * 1e3))  # µs
            ridge = peak * 1e12 / (bw * 1e9)
            bound = "compute" if nbytes > 0 and flops / nbytes >= ridge else "memory"
        if cost and link is not None and link_share[g] >= 0.5:
            # Most of its device time is copies over the host link: that is its ceiling.
            ideal, bound = link_bytes[g] / (link.gbps * 1e3), "host-link"
        figs.append(GroupFigures(group=grp, precision=precisions[g], peak_precision=key,
                                 calls=int(calls[g]), flops=flops, bytes=nbytes,
                                 device_us=float(device_us[g]), ideal_us=ideal, bound=bound,
                                 link_bytes=float(link_bytes[g]) if bound == "host-link"
                                 else 0.0, pageable=bool(pageable[g])
                                 and bound == "host-link", bound_us=bound_us))

    n_windows = len(analysis.windows)
    window = window_of_rows(analysis, oc.rows)
    ok = window >= 0
    per_row = oc.flops_per_row()
    step_flops = np.bincount(window[ok], weights=per_row[ok], minlength=n_windows)
    keys = sorted({f.peak_precision for f in figs if f.peak_precision and f.flops > 0})
    step_precision: list[str | None] = [None] * n_windows
    if keys:
        key_of = np.asarray([keys.index(f.peak_precision) if f.peak_precision in keys else -1
                             for f in figs])
        k_row = key_of[oc.group]
        use = ok & (k_row >= 0)
        cell = window[use].astype(np.int64) * len(keys) + k_row[use]
        by = np.bincount(cell, weights=per_row[use],
                         minlength=n_windows * len(keys)).reshape(n_windows, len(keys))
        # Each window's key of most FLOPs (the first of equal ones), None where it has none:
        # row-wise over the table, not a numpy call per window.
        best = np.asarray(keys, dtype=object)[np.argmax(by, axis=1)]
        best[~(by.max(axis=1) > 0)] = None
        step_precision = best.tolist()

    busy_c = busy_m = None
    if peaks is not None and any(f.bound for f in figs):
        lo, hi = analysis.bounds
        iv = _class_intervals(figs, oc.activity_group, act_rows, m.start, m.end)
        compute = covered(iv["compute"], lo, hi)
        # Host-link copies are bandwidth-bound work too: the step's memory-bound share.
        both = covered(iv["compute"] | iv["memory"] | iv["host-link"], lo, hi)
        busy = analysis.windows.columns.device_busy_us
        busy_c = np.minimum(compute, busy)
        busy_m = np.minimum(both - compute, busy - busy_c)

    notes = [peaks_problem] if peaks_problem else []
    if not oc.shapes_recorded and analysis.op_rows.size:
        notes.append("record_shapes was off: no FLOPs (profile with record_shapes=True)")
    if peaks is None and not analysis.cpu_only:
        name = m.device_name or "this device"
        notes.append(f"no peak figures for {name}: no roofline (give them with --peaks "
                     "FILE.json or $TB_DIAGNOSTICS_PEAKS)")
    return Roofline(peaks=peaks, figures=figs, step_flops=step_flops,
                    step_precision=step_precision, step_busy_compute_us=busy_c,
                    step_busy_memory_us=busy_m, shapes_recorded=oc.shapes_recorded,
                    activity_group=oc.activity_group, notes=notes,
                    unowned=_unowned(analysis, oc.activity_group), host_link=link,
                    communication=_communication(analysis, oc.activity_group))


def _host_copies(analysis: SpanAnalysis, activity_group: np.ndarray, n: int,
                 device_us: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: bytes its host↔device copies moved, the share of its device time they
    took, and whether any was pageable."""
    zeros = np.zeros(n)
    if analysis.cpu_only or n == 0:
        return zeros, zeros.copy(), np.zeros(n, dtype=bool)
    m = analysis.model
    acts = m.device_activity_rows
    copy = m.kind[acts] == Kind.MEMCPY
    # Only the copies' own names can be one (not every name of the trace: a span of 10⁶
    # steps has 10⁶ step names).
    ids = [i for i in unique(m.name[acts[copy]]).tolist() if HOST_COPY.match(m.strings[i])]
    sel = copy & np.isin(m.name[acts], np.asarray(ids, dtype=np.int32))
    sel &= activity_group >= 0
    if not sel.any():
        return zeros, zeros.copy(), np.zeros(n, dtype=bool)
    g, rows = activity_group[sel], acts[sel]
    nbytes = np.nan_to_num(m.nbytes[rows], nan=0.0)
    moved = np.bincount(g, weights=nbytes, minlength=n)
    us = np.bincount(g, weights=m.dur[rows], minlength=n)
    paged_ids = [i for i in ids if PAGEABLE_COPY.search(m.strings[i])]
    paged = np.bincount(g, weights=np.isin(m.name[rows], np.asarray(paged_ids, dtype=np.int32)),
                        minlength=n) > 0
    share = np.divide(us, device_us, out=np.zeros(n), where=device_us > 0)
    return moved, np.minimum(share, 1.0), paged


def _collective_activities(analysis: SpanAnalysis, free: np.ndarray) -> np.ndarray:
    """Which of the activities ``free`` (indices into device_activity_rows) are
    communication: the span's one definition (``comm_activity_mask``)."""
    return analysis.comm_activity_mask[free]


def _communication(analysis: SpanAnalysis, activity_group: np.ndarray) -> tuple[int, float]:
    if analysis.cpu_only:
        return 0, 0.0
    free = np.flatnonzero(activity_group < 0)
    comm = free[_collective_activities(analysis, free)]
    dur = analysis.model.dur[analysis.model.device_activity_rows[comm]]
    return int(comm.size), float(dur.sum())


def compute_busy_us(analysis: SpanAnalysis) -> np.ndarray:
    """Per window, the device's busy time without any communication (the step's
    ``compute_busy_us``): the time the roofline could have priced."""
    return np.array(analysis.windows.columns.compute_busy_us, dtype=np.float64)  # a copy


def _unowned(analysis: SpanAnalysis, activity_group: np.ndarray,
             limit: int = 20) -> list[tuple[str | None, int, float]]:
    if analysis.cpu_only:
        return []
    m = analysis.model
    free = np.flatnonzero(activity_group < 0)
    # Collectives are communication, not unpriced compute.
    free = free[~_collective_activities(analysis, free)] if free.size else free
    if not free.size:
        return []
    op = launching_op(analysis)[free]
    dur = m.dur[m.device_activity_rows[free]]
    has = op >= 0
    out = []
    if has.any():
        ids, code = m.name_groups(op[has])
        us = np.bincount(code, weights=dur[has], minlength=ids.shape[0])
        count = np.bincount(code, minlength=ids.shape[0])
        out = [(m.strings[int(ids[i])], int(count[i]), float(us[i])) for i in range(ids.shape[0])]
    # No launching op: the launch call is in the trace outside every op (""), or it is
    # not in the trace at all (None) — two different things to say.
    launched = m.launcher[m.device_activity_rows[free]] >= 0
    for name, sel in (("", ~has & launched), (None, ~has & ~launched)):
        if sel.any():
            out.append((name, int(sel.sum()), float(dur[sel].sum())))
    out.sort(key=lambda t: -t[2])
    return out[:limit]


def step_utilisation(rf: Roofline, k: int, wall_us: float) -> tuple[float, float | None]:
    """(achieved TFLOP/s over the wall time, FLOP utilisation or None) of window ``k``."""
    if wall_us <= 0:
        return 0.0, None
    achieved = rf.step_flops[k] / (wall_us * 1e6)
    peak = rf.peak(rf.step_precision[k])
    return float(achieved), (float(achieved / peak) if peak and rf.step_flops[k] > 0 else None)


@dataclass(frozen=True)
class StepGroups:
    """Per (window, group): device time and roofline time of the calls in that window."""

    device_us: np.ndarray  # (windows, groups)
    ideal_us: np.ndarray  # (windows, groups); 0 where the group has no roofline time


@computed
def step_groups(analysis: SpanAnalysis) -> StepGroups:
    m = analysis.model
    rf = roofline(analysis)
    oc = op_costs(analysis)
    n_w, n_g = len(analysis.windows), max(len(rf.figures), 1)
    ideal_per_call = np.asarray([f.ideal_us / f.calls if f.ideal_us and f.calls else 0.0
                                 for f in rf.figures] or [0.0])
    w_rows = window_of_rows(analysis, oc.rows)
    ok = w_rows >= 0
    cell = w_rows[ok].astype(np.int64) * n_g + oc.group[ok]
    ideal = np.bincount(cell, weights=ideal_per_call[oc.group[ok]],
                        minlength=n_w * n_g).reshape(n_w, n_g)
    if analysis.cpu_only:
        w_act, dur = w_rows, m.dur[oc.rows]
    else:
        w_act = (analysis.activity_step if len(analysis.host_steps)
                 else np.zeros(m.device_activity_rows.shape[0], dtype=np.int32))
        dur = m.dur[m.device_activity_rows]
    use = (w_act >= 0) & (rf.activity_group >= 0)
    cell = w_act[use].astype(np.int64) * n_g + rf.activity_group[use]
    device = np.bincount(cell, weights=dur[use], minlength=n_w * n_g).reshape(n_w, n_g)
    return StepGroups(device_us=device, ideal_us=ideal)
