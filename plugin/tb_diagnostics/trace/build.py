"""Decoded events → :class:`TraceModel`.

One pass sorts events by phase into column lists, then numpy does the rest:
ordering, lane assignment, the host nesting and the launch join.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np

from tb_diagnostics.trace.categories import (
    CATEGORY_KIND,
    DEVICE_ACTIVITY_KINDS,
    DEVICE_KINDS,
    LAUNCH_FLOW_CATEGORIES,
    LAUNCHER_KINDS,
    Kind,
)
from tb_diagnostics.trace.model import NO_ID, Lane, MemoryEvents, TraceMeta, TraceModel

_DEVICE_KIND_VALUES = frozenset(int(k) for k in DEVICE_KINDS)
_PROFILER_FLAGS = ("record_shapes", "profile_memory", "with_stack", "cuda_runtime_version",
                   "cuda_driver_version", "trace_name", "display_time_unit")


def _num(v: Any) -> float | None:
    """A finite number, or None (bools, strings, NaN and infinities are not times)."""
    if type(v) is float:
        return v if math.isfinite(v) else None
    if type(v) is int:
        return float(v)
    return None


def _as_id(v: Any) -> int:
    if type(v) is int:
        return v if -(2**63) <= v < 2**63 else NO_ID
    if type(v) is str and v.isdigit() and len(v) < 19:
        return int(v)
    return NO_ID


def _key(v: Any) -> str:
    return "" if v is None else str(v)


class _Interner:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []

    def __call__(self, s: Any) -> int:
        if s is None:
            return NO_ID
        if type(s) is not str:
            s = msgspec.json.encode(s).decode() if not isinstance(s, bytes) else repr(s)
        i = self.ids.get(s)
        if i is None:
            i = self.ids[s] = len(self.strings)
            self.strings.append(s)
        return i


def build_model(doc: Any, path: str) -> TraceModel:
    """Build the model of one decoded trace file (see :mod:`tb_diagnostics.trace.decode`)."""
    intern = _Interner()
    cols: dict[str, list] = {k: [] for k in (
        "kind", "name", "pid", "tid", "ts", "dur", "corr", "ext", "stream", "device", "nbytes",
        "pyid", "pypar", "stack", "dims", "types")}
    mem: dict[str, list] = {k: [] for k in ("ts", "bytes", "alloc", "resv", "dtype", "did")}
    flow_start: dict[tuple[str, str, float], int] = {}
    flow_end: dict[tuple[str, str, float], int] = {}
    process_names: dict[str, str] = {}
    thread_names: dict[tuple[str, str], str] = {}
    skipped = 0
    kind_get = CATEGORY_KIND.get
    other = Kind.OTHER

    for e in doc.events:
        ph = e.ph
        if ph == "X":
            ts = _num(e.ts)
            if ts is None:
                skipped += 1
                continue
            dur = _num(e.dur)
            dur = dur if dur is not None and dur >= 0 else 0.0
            cat = e.cat
            kind = kind_get(cat, other) if type(cat) is str or cat is None else other
            a = e.args
            cols["kind"].append(kind)
            cols["name"].append(intern(e.name if type(e.name) is str else str(e.name)))
            cols["pid"].append(_key(e.pid))
            cols["tid"].append(_key(e.tid))
            cols["ts"].append(ts)
            cols["dur"].append(dur)
            if a is None:
                for k in ("corr", "ext", "stream", "device", "pyid", "pypar", "stack", "dims",
                          "types"):
                    cols[k].append(NO_ID)
                cols["nbytes"].append(math.nan)
                continue
            cols["corr"].append(_as_id(a.correlation))
            ext = a.external_id if a.external_id is not None else a.external_id_lc
            cols["ext"].append(_as_id(ext))
            cols["stream"].append(_as_id(a.stream))
            cols["device"].append(_as_id(a.device))
            nb = _num(a.nbytes)
            cols["nbytes"].append(math.nan if nb is None else nb)
            cols["pyid"].append(_as_id(a.python_id))
            cols["pypar"].append(_as_id(a.python_parent_id))
            cols["stack"].append(intern(a.call_stack) if a.call_stack else NO_ID)
            cols["dims"].append(intern(a.input_dims) if a.input_dims else NO_ID)
            cols["types"].append(intern(a.input_type) if a.input_type else NO_ID)
        elif ph in ("s", "f", "t"):
            if e.cat in LAUNCH_FLOW_CATEGORIES and _num(e.ts) is not None:
                fid = _as_id(e.id)
                if fid != NO_ID:
                    target = flow_start if ph == "s" else flow_end
                    target[(_key(e.pid), _key(e.tid), _num(e.ts))] = fid
        elif ph in ("i", "I"):
            if e.name == "[memory]" and e.args is not None and _num(e.ts) is not None:
                a = e.args
                mem["ts"].append(_num(e.ts))
                b = _num(a.mem_bytes)
                mem["bytes"].append(0.0 if b is None else b)
                v = _num(a.total_allocated)
                mem["alloc"].append(math.nan if v is None else v)
                v = _num(a.total_reserved)
                mem["resv"].append(math.nan if v is None else v)
                mem["dtype"].append(_as_id(a.device_type))
                mem["did"].append(a.device_id if type(a.device_id) is int else NO_ID)
        elif ph == "M" and e.args is not None and type(e.args.label) is str:
            if e.name == "process_name":
                process_names[_key(e.pid)] = e.args.label
            elif e.name == "thread_name":
                thread_names[(_key(e.pid), _key(e.tid))] = e.args.label

    warnings = []
    if skipped:
        warnings.append(f"{skipped} complete event(s) without a usable ts were skipped")
    return _assemble(path, doc, intern, cols, mem, flow_start, flow_end, process_names,
                     thread_names, warnings)


def _assemble(path, doc, intern, cols, mem, flow_start, flow_end, process_names, thread_names,
              warnings) -> TraceModel:
    n = len(cols["kind"])
    kind = np.asarray(cols["kind"], dtype=np.uint8)
    ts_abs = np.asarray(cols["ts"], dtype=np.float64)
    dur = np.asarray(cols["dur"], dtype=np.float64)
    corr = np.asarray(cols["corr"], dtype=np.int64)
    is_dev = np.isin(kind, np.asarray(sorted(_DEVICE_KIND_VALUES), dtype=np.uint8))

    # Launch flows fill in correlations a generation of traces left out.
    if flow_start or flow_end:
        for i in np.flatnonzero(corr == NO_ID):
            table = flow_end if is_dev[i] else flow_start
            fid = table.get((cols["pid"][i], cols["tid"][i], cols["ts"][i]))
            if fid is not None:
                corr[i] = fid

    origin = float(ts_abs.min()) if n else 0.0
    order = np.lexsort((-dur, ts_abs)) if n else np.zeros(0, dtype=np.int64)

    lane_ids: dict[tuple[bool, str, str], int] = {}
    lanes: list[Lane] = []
    lane_col = np.empty(n, dtype=np.int32)
    for i, (p, t, d) in enumerate(zip(cols["pid"], cols["tid"], is_dev.tolist(), strict=True)):
        key = (d, p, t)
        li = lane_ids.get(key)
        if li is None:
            li = lane_ids[key] = len(lanes)
            lanes.append(Lane(pid=p, tid=t, is_device=d, label=_lane_label(
                d, p, t, process_names, thread_names)))
        lane_col[i] = li

    def col(name: str, dtype: Any) -> np.ndarray:
        return np.asarray(cols[name], dtype=dtype)[order]

    kind = kind[order]
    start = ts_abs[order] - origin
    dur = dur[order]
    lane_col = lane_col[order]
    corr = corr[order]
    device = col("device", np.int64)
    stream = col("stream", np.int64)
    # Device rows name their device and stream in args in most generations;
    # fall back to the GPU track's pid/tid (pid is the device index).
    pid_num = np.asarray([_as_id(p) for p in cols["pid"]], dtype=np.int64)[order]
    tid_num = np.asarray([_as_id(t.removeprefix("stream ")) for t in cols["tid"]],
                         dtype=np.int64)[order]
    dev_rows = is_dev[order]
    fill = dev_rows & (device < 0)
    device[fill] = pid_num[fill]
    fill = dev_rows & (stream < 0)
    stream[fill] = tid_num[fill]

    parent = _nest(kind, lane_col, start, start + dur, dev_rows)
    launcher = _join_launches(kind, corr)

    memory = _memory(mem, origin)
    base_ns = doc.base_time_ns if _num(doc.base_time_ns) is not None else None
    meta = TraceMeta(
        device_properties=[p for p in (doc.device_properties or []) if isinstance(p, dict)],
        distributed_info=doc.distributed_info if isinstance(doc.distributed_info, dict) else None,
        schema_version=doc.schema_version,
        base_time_ns=float(base_ns) if base_ns is not None else None,
        profiler_flags={k: getattr(doc, k) for k in _PROFILER_FLAGS
                        if getattr(doc, k, None) is not None},
    )
    origin_abs = origin + (meta.base_time_ns / 1000.0 if meta.base_time_ns else 0.0)
    return TraceModel(
        path=path,
        strings=intern.strings,
        kind=kind,
        name=col("name", np.int32),
        lane=lane_col,
        start=start,
        dur=dur,
        correlation=corr,
        external_id=col("ext", np.int64),
        parent=parent,
        launcher=launcher,
        stream=stream,
        device=device,
        nbytes=col("nbytes", np.float64),
        python_id=col("pyid", np.int64),
        python_parent=col("pypar", np.int64),
        call_stack=col("stack", np.int32),
        input_dims=col("dims", np.int32),
        input_types=col("types", np.int32),
        lanes=lanes,
        memory=memory,
        meta=meta,
        origin_us=origin_abs,
        warnings=warnings,
    )


def _lane_label(is_dev: bool, pid: str, tid: str, process_names: dict[str, str],
                thread_names: dict[tuple[str, str], str]) -> str:
    if is_dev:
        stream = tid.removeprefix("stream ")
        return f"GPU {pid} · stream {stream}"
    thread = thread_names.get((pid, tid))
    return f"{process_names.get(pid, 'process ' + pid)} · {thread or 'thread ' + tid}"


def _nest(kind: np.ndarray, lane: np.ndarray, start: np.ndarray, end: np.ndarray,
          is_dev: np.ndarray) -> np.ndarray:
    """Parent of every host row: the innermost earlier row on the same thread containing its start.

    Rows are already ordered by (start, longer first). A row that starts inside
    an open row is its child even if it overruns it by rounding; a row that
    starts at or after an open row's end closes it.
    """
    n = kind.shape[0]
    parent = np.full(n, NO_ID, dtype=np.int32)
    host = np.flatnonzero(~is_dev & (kind != Kind.TRACE))
    if not host.size:
        return parent
    by_lane = host[np.argsort(lane[host], kind="stable")]
    lanes = lane[by_lane].tolist()
    starts = start[by_lane].tolist()
    ends = end[by_lane].tolist()
    rows = by_lane.tolist()
    out = parent  # local alias for speed in the loop
    stack_rows: list[int] = []
    stack_ends: list[float] = []
    current = None
    for r, ln, s, e in zip(rows, lanes, starts, ends, strict=True):
        if ln != current:
            current = ln
            stack_rows.clear()
            stack_ends.clear()
        while stack_ends and s >= stack_ends[-1]:
            stack_ends.pop()
            stack_rows.pop()
        if stack_rows:
            out[r] = stack_rows[-1]
        stack_rows.append(r)
        stack_ends.append(e)
    return parent


def _join_launches(kind: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """For each device activity, the row of the runtime/driver call with its correlation id."""
    launcher = np.full(kind.shape[0], NO_ID, dtype=np.int32)
    launch_rows = np.flatnonzero(
        np.isin(kind, np.asarray(sorted(LAUNCHER_KINDS), dtype=np.uint8)) & (corr != NO_ID))
    act_rows = np.flatnonzero(
        np.isin(kind, np.asarray(sorted(DEVICE_ACTIVITY_KINDS), dtype=np.uint8))
        & (corr != NO_ID))
    if not launch_rows.size or not act_rows.size:
        return launcher
    keys = corr[launch_rows]
    # First launcher per correlation id wins (ids are unique per process in practice).
    uniq, first = np.unique(keys, return_index=True)
    pos = np.searchsorted(uniq, corr[act_rows])
    pos = np.minimum(pos, uniq.size - 1)
    hit = uniq[pos] == corr[act_rows]
    launcher[act_rows[hit]] = launch_rows[first[pos[hit]]]
    return launcher


def _memory(mem: dict[str, list], origin: float) -> MemoryEvents:
    ts = np.asarray(mem["ts"], dtype=np.float64) - origin
    order = np.argsort(ts, kind="stable")
    return MemoryEvents(
        ts=ts[order],
        nbytes=np.asarray(mem["bytes"], dtype=np.float64)[order],
        total_allocated=np.asarray(mem["alloc"], dtype=np.float64)[order],
        total_reserved=np.asarray(mem["resv"], dtype=np.float64)[order],
        device_type=np.asarray(mem["dtype"], dtype=np.int64)[order],
        device_id=np.asarray(mem["did"], dtype=np.int64)[order],
    )
