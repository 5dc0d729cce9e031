"""Decoded events → :class:`TraceModel`.

Each field becomes a numpy column through one list comprehension over the
complete events (no per-event Python work beyond attribute reads), then numpy
does the rest: ordering, lane assignment, the host nesting (:mod:`.nesting`)
and the launch join.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tb_diagnostics.trace.categories import (
    CATEGORY_KIND,
    DEVICE_ACTIVITY_KINDS,
    DEVICE_KINDS,
    LAUNCH_FLOW_CATEGORIES,
    LAUNCHER_KINDS,
    Kind,
)
from tb_diagnostics.trace.decode import ABSENT, NO_RAW
from tb_diagnostics.trace.model import NO_ID, Lane, MemoryEvents, TraceMeta, TraceModel
from tb_diagnostics.trace.nesting import nest

_DEVICE_KIND_VALUES = np.asarray(sorted(int(k) for k in DEVICE_KINDS), dtype=np.uint8)
#: kind → is a device kind, as a lookup table (faster than np.isin per batch).
_IS_DEVICE_KIND = np.zeros(256, dtype=bool)
_IS_DEVICE_KIND[_DEVICE_KIND_VALUES] = True
_PROFILER_FLAGS = ("record_shapes", "profile_memory", "with_stack", "cuda_runtime_version",
                   "cuda_driver_version", "trace_name", "display_time_unit")
_FLOW_PHASES = frozenset({"s", "f", "t"})
_MAX_TS_US = 1e17
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
        if v.isascii() and v.isdigit() and len(v) < 19:
            return int(v)
    return NO_ID


class _Interner:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []
        # Raw JSON text → string id, per compaction mode; empty and null are absent.
        self.raw_ids: dict[bool, dict[bytes, int]] = {
            mode: {b"": NO_ID, b"null": NO_ID} for mode in (False, True)}

    def many(self, values: list[str]) -> np.ndarray:
        ids = self.ids
        out = list(map(ids.get, values))  # C-speed lookups; new strings fixed up below
        if None in out:
            for i, v in enumerate(values):
                if out[i] is None:
                    j = ids.get(v)
                    if j is None:
                        j = ids[v] = len(self.strings)
                        self.strings.append(v)
                    out[i] = j
        return np.asarray(out, dtype=np.int32)

    def optional(self, values: list[str]) -> np.ndarray:
        """Intern the non-empty strings; NO_ID for the rest."""
        out = np.full(len(values), NO_ID, dtype=np.int32)
        idx = [i for i, v in enumerate(values) if v]
        if idx:
            out[idx] = self.many([values[i] for i in idx])
        return out

    def raw(self, values: list[Any], compact: bool = False) -> np.ndarray:
        """Intern raw JSON values (``msgspec.Raw``) as their text; NO_ID when absent.

        ``compact`` drops white space, for values that hold only numbers (shapes),
        so that the same shape printed two ways is one string.
        """
        keys = list(map(bytes, values))
        known = self.raw_ids[compact]
        out = list(map(known.get, keys))
        if None in out:
            for i, k in enumerate(keys):
                if out[i] is None:
                    j = known.get(k)
                    if j is None:
                        text = (k.translate(None, b" \t\r\n") if compact else k).decode(
                            "utf-8", "replace")
                        j = known[k] = int(self.many([text])[0])
                    out[i] = j
        return np.asarray(out, dtype=np.int32)


def _launch_shape(a: Any) -> bytes:
    """``[grid, block]`` as JSON text for kernels that record them, else empty."""
    if not a.grid and not a.block:
        return b""
    return b"[" + (bytes(a.grid) or b"null") + b"," + (bytes(a.block) or b"null") + b"]"


def build_model(doc: Any, path: str) -> TraceModel:
    """Build the model of one decoded trace file (see :mod:`tb_diagnostics.trace.decode`)."""
    builder = ModelBuilder(path)
    builder.add(doc.events)
    return builder.finish(doc)


class ModelBuilder:
    """Accumulates columns batch by batch, so a trace can be decoded in bounded pieces.

    ``add`` turns a batch of decoded events into column arrays right away (the
    batch's structs can then be freed); ``finish`` joins the batches and does
    what needs every event at once: ordering, nesting, the launch join.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.intern = _Interner()
        self.lane_ids: dict[tuple[bool, Any, Any], int] = {}
        self.columns: dict[str, _GrowingColumn] = {}
        self.skipped = 0
        self.flow_starts: dict[tuple[str, str, float], int] = {}
        self.flow_ends: dict[tuple[str, str, float], int] = {}
        self.process_names: dict[str, str] = {}
        self.thread_names: dict[tuple[str, str], str] = {}
        self.memory: list[Any] = []

    def _put(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            column = self.columns.get(k)
            if column is None:
                column = self.columns[k] = _GrowingColumn(v.dtype, _ABSENT_VALUE.get(k))
            column.extend(v)

    def add(self, events: list) -> None:
        xs = [e for e in events if e.ph == "X"]
        ts_abs = np.asarray([e.ts for e in xs], dtype=np.float64)
        # µs since 1970 stay below 1e17 for another thousand years: beyond is garbage,
        # and would overflow every interval sum downstream.
        usable = np.isfinite(ts_abs) & (np.abs(ts_abs) < _MAX_TS_US)
        if not usable.all():
            self.skipped += int((~usable).sum())
            xs = [e for e, ok in zip(xs, usable.tolist(), strict=True) if ok]
            ts_abs = ts_abs[usable]
        dur = np.asarray([e.dur for e in xs], dtype=np.float64)
        dur[~((dur >= 0) & (dur < _MAX_TS_US))] = 0.0  # missing, NaN, negative, absurd: instant
        cat_kind = {c: int(CATEGORY_KIND.get(c, Kind.OTHER)) for c in {e.cat for e in xs}}
        kind = np.asarray([cat_kind[e.cat] for e in xs], dtype=np.uint8)
        is_dev = _IS_DEVICE_KIND[kind]
        lane_ids = self.lane_ids
        lane = np.asarray([lane_ids.setdefault(k, len(lane_ids)) for k in
                           zip(is_dev.tolist(), [e.pid for e in xs], [e.tid for e in xs],
                               strict=True)], dtype=np.int32)
        args = [e.args for e in xs]
        ext = _ints([a.external_id for a in args])
        intern = self.intern
        self._put(
            kind=kind, ts=ts_abs, dur=dur, lane=lane,
            name=intern.many([e.name for e in xs]),
            corr=_ints([a.correlation for a in args]),
            ext=np.where(ext >= 0, ext, _ints([a.external_id_lc for a in args])),
            device=_ints([a.device for a in args]),
            stream=_ints([a.stream if type(a.stream) is int else ABSENT for a in args]),
            nbytes=np.asarray([a.nbytes for a in args], dtype=np.float64),
            pyid=_ints([a.python_id for a in args]),
            pypar=_ints([NO_ID if a.python_parent_id is None else a.python_parent_id
                         for a in args]),
            stack=intern.optional([a.call_stack for a in args]),
            dims=intern.raw([a.input_dims for a in args], compact=True),
            types=intern.raw([a.input_type for a in args]),
            # Only kernels record grid and block: skip the call for everything else.
            shape=intern.raw([b"" if a.grid is NO_RAW and a.block is NO_RAW
                              else _launch_shape(a) for a in args], compact=True),
        )
        for e in events:
            ph = e.ph
            if ph == "X":
                continue
            if ph in _FLOW_PHASES:
                if e.cat in LAUNCH_FLOW_CATEGORIES and math.isfinite(e.ts):
                    fid = e.id if type(e.id) is int else _digits(e.id)
                    if fid != NO_ID:
                        table = self.flow_starts if ph == "s" else self.flow_ends
                        table[(str(e.pid), str(e.tid), e.ts)] = fid
            elif ph in ("i", "I"):
                if e.name == "[memory]" and math.isfinite(e.ts):
                    self.memory.append((e.ts, e.args))
            elif ph == "M" and e.args.label is not None:
                if e.name == "process_name":
                    self.process_names[str(e.pid)] = e.args.label
                elif e.name == "thread_name":
                    self.thread_names[(str(e.pid), str(e.tid))] = e.args.label

    def _column(self, key: str, dtype: Any) -> np.ndarray:
        """One column; the builder lets go of it as it is taken (peak memory)."""
        column = self.columns.pop(key, None)
        return column.take() if column is not None else np.zeros(0, dtype=dtype)

    def finish(self, doc: Any) -> TraceModel:
        """The model; ``doc`` supplies the file-level keys (its events were added already)."""
        col = self._column
        kind = col("kind", np.uint8)
        ts_abs = col("ts", np.float64)
        dur = col("dur", np.float64)
        lane_col = col("lane", np.int32)
        corr = col("corr", np.int64)
        device = col("device", np.int64)
        stream = col("stream", np.int64)
        n = kind.shape[0]
        is_dev = np.isin(kind, _DEVICE_KIND_VALUES)
        keys = list(self.lane_ids)
        lanes = [Lane(pid=str(p), tid=str(t), is_device=d,
                      label=_lane_label(d, str(p), str(t), self.process_names,
                                        self.thread_names))
                 for (d, p, t) in keys]
        corr = self._fill_from_flows(corr, kind, is_dev, lane_col, lanes, ts_abs)

        # Device rows name their device and stream in args in most generations;
        # else the GPU track's pid is the device index and its tid the stream.
        lane_pid = np.asarray([_digits(p) for (_, p, _) in keys], dtype=np.int64)
        lane_tid = np.asarray([_digits(t) for (_, _, t) in keys], dtype=np.int64)
        fill = is_dev & (device < 0)
        if fill.any():
            device = _writable(device)
            device[fill] = lane_pid[lane_col[fill]]
        fill = is_dev & (stream < 0)
        if fill.any():
            stream = _writable(stream)
            stream[fill] = lane_tid[lane_col[fill]]

        origin = float(ts_abs.min()) if n else 0.0
        order = np.lexsort((-dur, ts_abs)) if n else np.zeros(0, dtype=np.int64)
        kind = kind[order]
        start = ts_abs[order] - origin
        del ts_abs
        dur = dur[order]
        lane_col = lane_col[order]
        corr = _take(corr, order)
        is_dev = is_dev[order]
        meta = _meta(doc)
        named = {"name": ("name", np.int32), "external_id": ("ext", np.int64),
                 "nbytes": ("nbytes", np.float64), "python_id": ("pyid", np.int64),
                 "python_parent": ("pypar", np.int64), "call_stack": ("stack", np.int32),
                 "input_dims": ("dims", np.int32), "input_types": ("types", np.int32),
                 "launch_shape": ("shape", np.int32)}
        columns = {field: _take(col(key, dtype), order) for field, (key, dtype) in named.items()}
        for field in _NARROWABLE_IDS:
            columns[field] = _narrow_ids(columns[field])
        if len(self.intern.strings) < _INT16_LIMIT:
            for field in _STRING_ID_COLUMNS:
                columns[field] = _as_int16(columns[field])
        if len(keys) < _INT16_LIMIT:
            lane_col = _as_int16(lane_col)
        end = start + dur
        warnings = []
        if self.skipped:
            warnings.append(f"{self.skipped} complete event(s) without a usable ts were skipped")
        model = TraceModel(
            path=self.path,
            strings=self.intern.strings,
            kind=kind,
            lane=lane_col,
            start=start,
            dur=dur,
            correlation=corr,
            stream=_take(stream, order),
            device=_take(device, order),
            parent=nest(kind, lane_col, start, end, is_dev),
            launcher=_join_launches(kind, corr),
            lanes=lanes,
            memory=_memory(self.memory, origin),
            meta=meta,
            origin_us=origin + (meta.base_time_ns or 0.0) / 1000.0,
            warnings=warnings,
            **columns,
        )
        vars(model)["end"] = end  # TraceModel.end, computed for the nesting already
        return model

    def _fill_from_flows(self, corr: np.ndarray, kind: np.ndarray, is_dev: np.ndarray,
                         lane_col: np.ndarray, lanes: list[Lane],
                         ts_abs: np.ndarray) -> np.ndarray:
        """Launch flows fill in the correlation ids a generation of traces left out.

        A flow start sits on the launching call (same thread and ts), its end on
        the device activity; the flow id is the correlation id.
        """
        if not self.flow_starts and not self.flow_ends:
            return corr
        linked = np.isin(kind, _LINKED_KIND_VALUES)
        missing = np.flatnonzero(linked & (corr == NO_ID)).tolist()
        if missing:
            corr = _writable(corr)
        for i in missing:
            table = self.flow_ends if is_dev[i] else self.flow_starts
            lane = lanes[lane_col[i]]
            fid = table.get((lane.pid, lane.tid, float(ts_abs[i])))
            if fid is not None:
                corr[i] = fid
        return corr


#: Columns that are often empty in a whole trace (no kernels, no stacks, no shapes), and
#: the value that marks "absent" in each.
_ABSENT_VALUE: dict[str, Any] = {
    **dict.fromkeys(("corr", "ext", "device", "stream", "pyid", "pypar",
                     "stack", "dims", "types", "shape"), NO_ID),
    "nbytes": math.nan,
}


class _GrowingColumn:
    """One column filled batch by batch, in one buffer that doubles when full.

    One large buffer instead of a list of small per-batch arrays: joining those
    needs the parts and the whole at once, and the freed parts stay scattered
    through the heap. The doubled buffer's unused tail is never touched, so it
    costs address space, not memory. A column that has had no value yet is only
    a count (constant columns cost nothing).
    """

    __slots__ = ("absent", "data", "dtype", "n")

    def __init__(self, dtype: Any, absent: Any) -> None:
        self.dtype = dtype
        self.absent = absent
        self.data: np.ndarray | None = None
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        m = values.shape[0]
        if self.data is None:
            if self.absent is not None and _all_absent(values, self.absent):
                self.n += m
                return
            self.data = np.empty(max(2 * (self.n + m), 1 << 14), dtype=self.dtype)
            if self.n:
                self.data[: self.n] = self.absent
        elif self.n + m > self.data.shape[0]:
            grown = np.empty(2 * (self.n + m), dtype=self.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : self.n + m] = values
        self.n += m

    def take(self) -> np.ndarray:
        if self.data is None:
            if self.absent is None:
                return np.zeros(self.n, dtype=self.dtype)
            return _constant(self.absent, self.n, self.dtype)
        out, self.data = self.data[: self.n], None
        return out


def _all_absent(values: np.ndarray, absent: Any) -> bool:
    if type(absent) is float and math.isnan(absent):
        return bool(np.isnan(values).all())
    return bool((values == absent).all())


def _constant(value: Any, n: int, dtype: Any) -> np.ndarray:
    """``n`` copies of ``value`` as a read-only view of one element."""
    return np.broadcast_to(np.asarray(value, dtype=dtype), (n,))


def _take(column: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``column[order]``; a constant column stays a constant view."""
    if column.ndim == 1 and column.strides == (0,):
        return column[: order.shape[0]]
    return column[order]


#: Id columns that are only looked up, never combined arithmetically: stored as int32
#: when every id fits (they are small counters in practice), int64 otherwise.
_NARROWABLE_IDS = ("external_id", "python_id", "python_parent")


def _narrow_ids(column: np.ndarray) -> np.ndarray:
    if column.strides == (0,) or column.dtype != np.int64 or not column.size:
        return column
    if column.min() >= np.iinfo(np.int32).min and column.max() <= np.iinfo(np.int32).max:
        return column.astype(np.int32)
    return column


#: Index columns are int16 when every index fits (traces with fewer than 32767
#: distinct strings, or threads and streams): half the memory of int32.
_INT16_LIMIT = np.iinfo(np.int16).max
_STRING_ID_COLUMNS = ("name", "call_stack", "input_dims", "input_types", "launch_shape")


def _as_int16(column: np.ndarray) -> np.ndarray:
    if column.strides == (0,) and column.size:
        return _constant(column[0], column.shape[0], np.int16)
    return column.astype(np.int16)


def _writable(column: np.ndarray) -> np.ndarray:
    return column if column.flags.writeable else column.copy()


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


def _join_launches(kind: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """For each device activity, the row of the runtime/driver call with its correlation id."""
    launch_rows = np.flatnonzero(
        np.isin(kind, np.asarray(sorted(LAUNCHER_KINDS), dtype=np.uint8)) & (corr != NO_ID))
    act_rows = np.flatnonzero(
        np.isin(kind, np.asarray(sorted(DEVICE_ACTIVITY_KINDS), dtype=np.uint8))
        & (corr != NO_ID))
    if not launch_rows.size or not act_rows.size:
        return _constant(NO_ID, kind.shape[0], np.int32)
    launcher = np.full(kind.shape[0], NO_ID, dtype=np.int32)
    keys = corr[launch_rows]
    # First launcher per correlation id wins (ids are unique per process in practice).
    uniq, first = np.unique(keys, return_index=True)
    pos = np.searchsorted(uniq, corr[act_rows])
    pos = np.minimum(pos, uniq.size - 1)
    hit = uniq[pos] == corr[act_rows]
    launcher[act_rows[hit]] = launch_rows[first[pos[hit]]]
    return launcher


def _memory(memory: list[tuple[float, Any]], origin: float) -> MemoryEvents:
    args = [a for _, a in memory]
    ts = np.asarray([t for t, _ in memory], dtype=np.float64) - origin
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
