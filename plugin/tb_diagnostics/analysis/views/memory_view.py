"""The Memory view: each device's allocator curve, its peak, and what is alive there.

Built on the ``[memory]`` events (``profile_memory=True``) that
:mod:`~tb_diagnostics.analysis.views.memory` reads per step. An allocation (+Bytes) and
its free (−Bytes) share the block's ``Addr`` on one device: the next event at an
address after an allocation is its free (or, if the free was not recorded, the block's
reuse, which means it was gone by then). An allocation is alive at an event when it was
made at or before it and freed after it. Each allocation is attributed to the op that
made it: the instant event lies inside host events of its thread, and the outermost
operator among them is the call the program made (``aten::linear``,
``autograd::engine::evaluate_function: AddmmBackward0``), the innermost one is where the
allocator was called (``aten::empty_strided``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.hierarchy import innermost_op, is_op, nearest_marked
from tb_diagnostics.analysis.views.memory import DeviceMemory, memory_series
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import NO_ID

#: Points of a downsampled curve (about; each bucket keeps up to 5).
MAX_CURVE_POINTS = 2400
#: Names in an allocation's call path (outermost first); deeper paths keep the innermost.
MAX_STACK_DEPTH = 24


@dataclass(frozen=True)
class Sites:
    """Per ``[memory]`` event of the model: where the allocator was called from."""

    inner: np.ndarray  # innermost enclosing host row on the event's thread, NO_ID
    op: np.ndarray  # outermost enclosing operator row (no op: the innermost host row), NO_ID
    inner_op: np.ndarray  # innermost enclosing operator row, else as ``op``


@dataclass(frozen=True)
class DeviceView:
    """One device's events (time order) with the allocation/free matching."""

    series: DeviceMemory  # the per-step figures of analysis.views.memory
    sel: np.ndarray  # the device's events as indices into model.memory
    ts: np.ndarray
    nbytes: np.ndarray
    allocated: np.ndarray  # the allocator's Total Allocated (a running sum when relative)
    reserved: np.ndarray  # NaN where the trace does not say
    #: For an allocation, the index (in this device's events) of the event that ends it;
    #: ``len(ts)`` when nothing does within the trace. -1 for frees.
    ends_at: np.ndarray
    #: Whether the events carry block addresses (2021 traces have none: nothing can be
    #: matched, so nothing is known to be alive).
    addressed: bool

    @property
    def label(self) -> str:
        return self.series.label


@dataclass(frozen=True)
class OpGroup:
    """Allocations of one op: bytes, count, and the largest one's call path."""

    op: str
    bytes: float
    count: int
    largest_bytes: float
    stack: list[str]  # the largest allocation's enclosing host events, outermost first
    call_stack: str | None  # its op's recorded Python stack ("Call stack"), where any


@computed
def allocation_sites(analysis: SpanAnalysis) -> Sites:
    """Each memory event's enclosing host events on its own thread (vectorised: per
    thread one search, a walk up past the finished siblings, then the op ancestry by
    pointer jumping)."""
    m = analysis.model
    mem = m.memory
    n = len(mem)
    inner = np.full(n, NO_ID, dtype=np.int64)
    if not len(m):  # memory samples but no complete event: nothing encloses them
        return Sites(inner=inner, op=inner, inner_op=inner)
    host = np.flatnonzero(m.is_host & (m.kind != Kind.TRACE))
    host_lane = m.lane[host]
    for lane in sorted_sets.unique(mem.lane[mem.lane >= 0]).tolist():
        ev = np.flatnonzero(mem.lane == lane)
        rows = host[host_lane == lane]  # in start order, as the model keeps rows
        if not rows.size:
            continue
        at = np.searchsorted(m.start[rows], mem.ts[ev], side="right") - 1
        inner[ev[at >= 0]] = rows[at[at >= 0]]
    # The last row to start before the event is its innermost enclosing one, or a
    # finished sibling inside one of the enclosing rows: walk up until one encloses it.
    ts = mem.ts
    todo = np.flatnonzero(inner >= 0)
    while todo.size:
        r = inner[todo]
        out = m.end[r] < ts[todo]
        todo = todo[out]
        inner[todo] = m.parent[r[out]]
        todo = todo[inner[todo] >= 0]
    # The innermost op at or above each event's row, then the outermost op of the whole
    # ancestry (annotations and Python frames between ops do not stop it): the op → op
    # above links followed to their end by pointer jumping, log(depth) passes over the ops
    # (a with_stack trace nests Python frames hundreds deep: one pass per level is seconds).
    ops = is_op(analysis)
    above = innermost_op(analysis)  # the nearest op strictly above each row
    has = np.flatnonzero(inner >= 0)
    r = inner[has]
    inner_op = np.full(n, NO_ID, dtype=np.int64)
    inner_op[has] = np.where(ops[r], r, above[r])
    top = nearest_marked(np.where(ops, above, NO_ID).astype(np.int32), ops & (above < 0))
    outer_op = np.full(n, NO_ID, dtype=np.int64)
    at = inner_op >= 0
    outer_op[at] = top[inner_op[at]]
    is_step = np.zeros(len(m), dtype=bool)
    is_step[analysis.step_rows] = True
    # Without an enclosing op (an annotation, a Python frame): the innermost host event
    # names the allocation, unless it is the step marker itself (steps enclose all else).
    named = (inner >= 0) & ~is_step[np.maximum(inner, 0)]
    op = np.where(outer_op >= 0, outer_op, np.where(named, inner, NO_ID))
    return Sites(inner=inner, op=op, inner_op=np.where(inner_op >= 0, inner_op, op))


@computed
def device_views(analysis: SpanAnalysis) -> list[DeviceView]:
    """Per device (the order of :func:`memory_series`), its events and their matching."""
    mem = analysis.model.memory
    out = []
    for dev in memory_series(analysis):
        sel = np.flatnonzero((mem.device_type == dev.device_type)
                             & (mem.device_id == dev.device_id))
        nbytes = mem.nbytes[sel]
        allocated = mem.total_allocated[sel]
        if dev.relative:
            allocated = np.cumsum(nbytes)
        out.append(DeviceView(series=dev, sel=sel, ts=mem.ts[sel], nbytes=nbytes,
                              allocated=allocated, reserved=mem.total_reserved[sel],
                              ends_at=_match(mem.addr[sel], nbytes),
                              addressed=bool((mem.addr[sel] >= 0).any())))
    return out


def _match(addr: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Per allocation, the index of the next event at its address (its free, or the
    block's reuse), ``len`` when none; -1 for frees and events without an address."""
    n = addr.shape[0]
    nxt = np.full(n, n, dtype=np.int64)
    order = np.lexsort((np.arange(n), addr))
    same = addr[order[1:]] == addr[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return np.where((nbytes > 0) & (addr >= 0), nxt, -1)


def window_bounds(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """Each window's host [start, end) as :func:`memory_series` cuts the events."""
    hs = analysis.host_steps
    if len(hs):
        return hs.host_start, hs.host_end
    w = analysis.windows[0]
    return np.asarray([w.host_start]), np.asarray([w.host_end + 1e-6])


def event_range(dv: DeviceView, lo: float | None, hi: float | None) -> tuple[int, int]:
    """The device's events in [lo, hi) (the whole trace for None) as an index range."""
    a = 0 if lo is None else int(np.searchsorted(dv.ts, lo, side="left"))
    b = dv.ts.shape[0] if hi is None else int(np.searchsorted(dv.ts, hi, side="left"))
    return a, b


def peak_index(dv: DeviceView, a: int, b: int) -> int | None:
    """The event of the largest allocated in [a, b) (the first such), None when none."""
    if b <= a:
        return None
    seg = dv.allocated[a:b]
    if np.isnan(seg).all():
        return None
    return a + int(np.nanargmax(seg))


def alive_at(dv: DeviceView, index: int) -> np.ndarray:
    """The allocations (indices in the device's events) alive just after event ``index``:
    made at or before it, ended after it."""
    made = np.flatnonzero(dv.ends_at[:index + 1] > index)
    return made


def kept_at_end(dv: DeviceView, a: int, b: int) -> np.ndarray:
    """Allocations made in [a, b) and not ended by b: what the window leaves allocated."""
    return a + np.flatnonzero(dv.ends_at[a:b] >= b)


def group_by_op(analysis: SpanAnalysis, dv: DeviceView, idx: np.ndarray, *,
                inner: bool = False) -> list[OpGroup]:
    """``idx`` (allocations of ``dv``) grouped by the op that made them (the outermost
    op; ``inner``: the innermost), largest bytes first."""
    if not idx.size:
        return []
    m = analysis.model
    sites = allocation_sites(analysis)
    rows = (sites.inner_op if inner else sites.op)[dv.sel[idx]]
    names = np.full(rows.shape[0], -1, dtype=np.int64)
    names[rows >= 0] = m.name[rows[rows >= 0]]
    keys, code = np.unique(names, return_inverse=True)
    size = dv.nbytes[idx]
    total = np.bincount(code, weights=size, minlength=keys.shape[0])
    count = np.bincount(code, minlength=keys.shape[0])
    # The largest allocation of each group: the last of each code after sorting by size.
    order = np.lexsort((size, code))
    last = order[np.r_[np.flatnonzero(code[order][1:] != code[order][:-1]), order.shape[0] - 1]]
    out = []
    for g, i in zip(range(keys.shape[0]), last.tolist(), strict=True):
        key = int(keys[g])
        ev = int(dv.sel[idx[i]])
        out.append(OpGroup(op=m.strings[key] if key >= 0 else "(no op on its thread)",
                           bytes=float(total[g]), count=int(count[g]),
                           largest_bytes=float(size[i]),
                           stack=call_path(analysis, int(sites.inner[ev])),
                           call_stack=_recorded_stack(analysis, int(sites.inner_op[ev]))))
    out.sort(key=lambda o: -o.bytes)
    return out


def call_path(analysis: SpanAnalysis, row: int) -> list[str]:
    """The host events enclosing ``row`` and it, outermost first, without step markers
    (at most :data:`MAX_STACK_DEPTH`, the innermost kept)."""
    m = analysis.model
    steps = set(analysis.step_rows.tolist()) if row >= 0 else set()
    names: list[str] = []
    while row >= 0 and len(names) < 4 * MAX_STACK_DEPTH:
        if row not in steps:
            names.append(m.name_of(row))
        row = int(m.parent[row])
    return names[:MAX_STACK_DEPTH][::-1]


def _recorded_stack(analysis: SpanAnalysis, row: int) -> str | None:
    return analysis.model.string(int(analysis.model.call_stack[row])) if row >= 0 else None


def downsample(dv: DeviceView, a: int, b: int,
               max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
    """Indices of the events in [a, b) that draw the curve: all of them when few, else
    per time bucket the first, the last, the lowest and highest allocated and the highest
    reserved, so every peak and trough survives."""
    n = b - a
    if n <= max_points:
        return np.arange(a, b)
    ts = dv.ts[a:b]
    n_buckets = max(1, max_points // 5)
    span = float(ts[-1] - ts[0]) or 1.0
    bucket = np.minimum(((ts - ts[0]) / span * n_buckets).astype(np.int64), n_buckets - 1)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], n] - 1
    alloc = np.nan_to_num(dv.allocated[a:b], nan=-np.inf)
    res = np.nan_to_num(dv.reserved[a:b], nan=-np.inf)
    picks = [starts, ends]
    counts = ends - starts + 1
    for values in (alloc, -alloc, res):
        # Per bucket, the first event at its largest value (linear: no sort).
        top = np.repeat(np.maximum.reduceat(values, starts), counts)
        at = np.flatnonzero(values == top)
        picks.append(at[np.searchsorted(at, starts)])
    return a + sorted_sets.unique(np.concatenate(picks))
