"""Decoded events → :class:`TraceModel`.

Each field becomes a numpy column through one list comprehension over the
complete events (no per-event Python work beyond attribute reads), then numpy
does the rest: ordering, lane assignment, the host nesting and the launch join.
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
from tb_diagnostics.trace.decode import ABSENT
from tb_diagnostics.trace.model import NO_ID, Lane, MemoryEvents, TraceMeta, TraceModel

_DEVICE_KIND_VALUES = np.asarray(sorted(int(k) for k in DEVICE_KINDS), dtype=np.uint8)
_PROFILER_FLAGS = ("record_shapes", "profile_memory", "with_stack", "cuda_runtime_version",
                   "cuda_driver_version", "trace_name", "display_time_unit")
_FLOW_PHASES = frozenset({"s", "f", "t"})
#: Kinds a launch flow can start or end on.
_LINKED_KIND_VALUES = np.asarray(sorted(int(k) for k in LAUNCHER_KINDS | DEVICE_ACTIVITY_KINDS),
                                 dtype=np.uint8)


def _ints(values: list) -> np.ndarray:
    """An int64 column; values outside int64 (hostile ids) become NO_ID."""
    try:
        return np.asarray(values, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return np.asarray([v if type(v) is int and -(2**63) <= v < 2**63 else NO_ID
                           for v in values], dtype=np.int64)


def _digits(v: Any) -> int:
    """Numeric value of a pid/tid (``7``, ``"7"``, ``"stream 7"``), else NO_ID."""
    if type(v) is int:
        return v if 0 <= v < 2**63 else NO_ID
    if type(v) is str:
        v = v.removeprefix("stream ")
        if v.isdigit() and len(v) < 19:
            return int(v)
    return NO_ID


class _Interner:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []

    def many(self, values: list[str]) -> np.ndarray:
        ids = self.ids
        get = ids.get
        out = []
        for v in values:
            i = get(v)
            if i is None:
                i = ids[v] = len(self.strings)
                self.strings.append(v)
            out.append(i)
        return np.asarray(out, dtype=np.int32)

    def optional(self, values: list[Any]) -> np.ndarray:
        """Intern the non-empty values (lists as their JSON text); NO_ID for the rest."""
        out = np.full(len(values), NO_ID, dtype=np.int32)
        idx = [i for i, v in enumerate(values) if v]
        if idx:
            texts = [v if type(v) is str else msgspec.json.encode(v).decode()
                     for v in (values[i] for i in idx)]
            out[idx] = self.many(texts)
        return out


def build_model(doc: Any, path: str) -> TraceModel:
    """Build the model of one decoded trace file (see :mod:`tb_diagnostics.trace.decode`)."""
    events = doc.events
    xs = [e for e in events if e.ph == "X"]
    warnings: list[str] = []

    ts_abs = np.asarray([e.ts for e in xs], dtype=np.float64)
    usable = np.isfinite(ts_abs)
    if not usable.all():
        warnings.append(f"{int((~usable).sum())} complete event(s) without a usable ts "
                        "were skipped")
        xs = [e for e, ok in zip(xs, usable.tolist(), strict=True) if ok]
        ts_abs = ts_abs[usable]
    n = len(xs)
    dur = np.asarray([e.dur for e in xs], dtype=np.float64)
    dur[~(dur >= 0)] = 0.0  # missing, NaN or negative: an instant

    cat_kind = {c: int(CATEGORY_KIND.get(c, Kind.OTHER)) for c in {e.cat for e in xs}}
    kind = np.asarray([cat_kind[e.cat] for e in xs], dtype=np.uint8)
    is_dev = np.isin(kind, _DEVICE_KIND_VALUES)
    intern = _Interner()
    name = intern.many([e.name for e in xs])
    args = [e.args for e in xs]
    corr = _ints([a.correlation for a in args])
    ext = _ints([a.external_id for a in args])
    ext_lc = _ints([a.external_id_lc for a in args])
    ext = np.where(ext >= 0, ext, ext_lc)
    pids = [e.pid for e in xs]
    tids = [e.tid for e in xs]

    _fill_from_flows(events, corr, kind, is_dev, pids, tids, ts_abs)

    lane_ids: dict[tuple[bool, Any, Any], int] = {}
    lane_col = np.asarray([lane_ids.setdefault(k, len(lane_ids))
                           for k in zip(is_dev.tolist(), pids, tids, strict=True)],
                          dtype=np.int32)
    process_names, thread_names = _metadata_names(events)
    lanes = [Lane(pid=str(p), tid=str(t), is_device=d,
                  label=_lane_label(d, str(p), str(t), process_names, thread_names))
             for (d, p, t) in lane_ids]

    device = _ints([a.device for a in args])
    stream = _ints([a.stream if type(a.stream) is int else ABSENT for a in args])
    # Device rows name their device and stream in args in most generations;
    # else the GPU track's pid is the device index and its tid the stream.
    lane_pid = np.asarray([_digits(p) for (_, p, _) in lane_ids], dtype=np.int64)
    lane_tid = np.asarray([_digits(t) for (_, _, t) in lane_ids], dtype=np.int64)
    fill = is_dev & (device < 0)
    device[fill] = lane_pid[lane_col[fill]]
    fill = is_dev & (stream < 0)
    stream[fill] = lane_tid[lane_col[fill]]

    origin = float(ts_abs.min()) if n else 0.0
    order = np.lexsort((-dur, ts_abs)) if n else np.zeros(0, dtype=np.int64)
    kind = kind[order]
    start = ts_abs[order] - origin
    dur = dur[order]
    lane_col = lane_col[order]
    corr = corr[order]
    is_dev = is_dev[order]

    def column(values: np.ndarray) -> np.ndarray:
        return values[order]

    meta = _meta(doc)
    py_parent = [a.python_parent_id for a in args]
    model_cols = dict(
        name=column(name),
        external_id=column(ext),
        stream=column(stream),
        device=column(device),
        nbytes=column(np.asarray([a.nbytes for a in args], dtype=np.float64)),
        python_id=column(_ints([a.python_id for a in args])),
        python_parent=column(_ints([NO_ID if v is None else v for v in py_parent])),
        call_stack=column(intern.optional([a.call_stack for a in args])),
        input_dims=column(intern.optional([a.input_dims for a in args])),
        input_types=column(intern.optional([a.input_type for a in args])),
    )
    return TraceModel(
        path=path,
        strings=intern.strings,
        kind=kind,
        lane=lane_col,
        start=start,
        dur=dur,
        correlation=corr,
        parent=_nest(kind, lane_col, start, start + dur, is_dev),
        launcher=_join_launches(kind, corr),
        lanes=lanes,
        memory=_memory(events, origin),
        meta=meta,
        origin_us=origin + (meta.base_time_ns or 0.0) / 1000.0,
        warnings=warnings,
        **model_cols,
    )


def _fill_from_flows(events: list, corr: np.ndarray, kind: np.ndarray, is_dev: np.ndarray,
                     pids: list, tids: list, ts_abs: np.ndarray) -> None:
    """Launch flows fill in the correlation ids a generation of traces left out.

    A flow start sits on the launching call (same thread and ts), its end on
    the device activity; the flow id is the correlation id.
    """
    linked = np.isin(kind, _LINKED_KIND_VALUES)
    missing = np.flatnonzero(linked & (corr == NO_ID))
    if not missing.size:
        return
    starts: dict[tuple[str, str, float], int] = {}
    ends: dict[tuple[str, str, float], int] = {}
    for e in events:
        if e.ph in _FLOW_PHASES and e.cat in LAUNCH_FLOW_CATEGORIES and math.isfinite(e.ts):
            fid = e.id if type(e.id) is int else _digits(e.id)
            if fid != NO_ID:
                table = starts if e.ph == "s" else ends
                table[(str(e.pid), str(e.tid), e.ts)] = fid
    if not starts and not ends:
        return
    for i in missing.tolist():
        table = ends if is_dev[i] else starts
        fid = table.get((str(pids[i]), str(tids[i]), float(ts_abs[i])))
        if fid is not None:
            corr[i] = fid


def _metadata_names(events: list) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    process_names: dict[str, str] = {}
    thread_names: dict[tuple[str, str], str] = {}
    for e in events:
        if e.ph == "M" and e.args.label is not None:
            if e.name == "process_name":
                process_names[str(e.pid)] = e.args.label
            elif e.name == "thread_name":
                thread_names[(str(e.pid), str(e.tid))] = e.args.label
    return process_names, thread_names


def _meta(doc: Any) -> TraceMeta:
    base = doc.base_time_ns
    base_ns = float(base) if type(base) in (int, float) and math.isfinite(base) else None
    props = doc.device_properties if isinstance(doc.device_properties, list) else []
    dist = doc.distributed_info
    return TraceMeta(
        device_properties=[p for p in props if isinstance(p, dict)],
        distributed_info=dist if isinstance(dist, dict) else None,
        schema_version=doc.schema_version,
        base_time_ns=base_ns,
        profiler_flags={k: getattr(doc, k) for k in _PROFILER_FLAGS
                        if getattr(doc, k, None) is not None},
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


def _memory(events: list, origin: float) -> MemoryEvents:
    mem = [e for e in events if e.name == "[memory]" and e.ph in ("i", "I")
           and math.isfinite(e.ts)]
    args = [e.args for e in mem]
    ts = np.asarray([e.ts for e in mem], dtype=np.float64) - origin
    order = np.argsort(ts, kind="stable")
    nbytes = np.asarray([a.mem_bytes for a in args], dtype=np.float64)
    return MemoryEvents(
        ts=ts[order],
        nbytes=np.nan_to_num(nbytes, nan=0.0)[order],
        total_allocated=np.asarray([a.total_allocated for a in args], dtype=np.float64)[order],
        total_reserved=np.asarray([a.total_reserved for a in args], dtype=np.float64)[order],
        device_type=_ints([a.device_type for a in args])[order],
        device_id=_ints([a.device_id for a in args])[order],
    )
