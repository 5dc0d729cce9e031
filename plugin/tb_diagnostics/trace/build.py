"""Decoded events → :class:`TraceModel`.

Each field becomes a numpy column through one list comprehension over the
complete events (no per-event Python work beyond attribute reads), then numpy
does the rest: ordering, lane assignment, the host nesting (:mod:`.nesting`)
and the launch join (:mod:`.launches`, with the kernels' launch attributes). Which
optional columns the builder keeps, and how narrow they are stored, is
:mod:`.build_columns`.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import compress, repeat
from operator import attrgetter, not_
from typing import Any

import numpy as np

from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.trace.build_columns import (
    ABSENT_VALUE,
    DTYPES,
    INT16_LIMIT,
    STRING_ID_KEYS,
    arg_columns,
    stored_columns,
)
from tb_diagnostics.trace.categories import (
    CATEGORY_KIND,
    DEVICE_KINDS,
    Kind,
    KindOfCategory,
    concrete_input_mask,
)
from tb_diagnostics.trace.columns import (
    GrowingColumn,
    as_int16,
    constant,
    digits,
    narrowest_ints,
    packed,
    take,
    time_order,
    writable,
)
from tb_diagnostics.trace.decode import TS_NOT_A_NUMBER
from tb_diagnostics.trace.interner import Interner
from tb_diagnostics.trace.launches import join_launches, launch_resources, launch_shapes
from tb_diagnostics.trace.model import NO_ID, Lane, TraceMeta, TraceModel
from tb_diagnostics.trace.nesting import nest
from tb_diagnostics.trace.side_events import SideEvents
from tb_diagnostics.trace.string_table import StringTable

_DEVICE_KIND_VALUES = np.asarray(sorted(int(k) for k in DEVICE_KINDS), dtype=np.uint8)
#: kind → is a device kind, as a lookup table (faster than np.isin per batch).
_IS_DEVICE_KIND = np.zeros(256, dtype=bool)
_IS_DEVICE_KIND[_DEVICE_KIND_VALUES] = True
_PROFILER_FLAGS = ("record_shapes", "profile_memory", "with_stack", "cuda_runtime_version",
                   "cuda_driver_version", "trace_name", "display_time_unit")
_MAX_TS_US = 1e17
#: The Chrome trace format's phases; others are counted in the notes and ignored.
_KNOWN_PHASES = frozenset("XBEiIMsftCbenRPONDcSTpF")
_PHASE = attrgetter("ph")
_IS_X = "X".__eq__
#: The note on events whose ids did not fit int64 (see columns.link_ids).
_RENUMBERED = "id beyond int64 (renumbered, links kept)"
_NO_DUR = "complete event without a usable dur (taken as 0)"
_ABSURD_DUR = "negative or absurd dur (taken as 0)"
#: No event of a profile lasts longer than a day and longer than the whole trace (its first
#: start to its last): Kineto records seconds to minutes, and such a dur is garbage that
#: would stretch a step over years.
_LONGEST_PLAUSIBLE_US = 86_400e6

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
        self.intern = Interner()
        self.lane_ids: dict[tuple[bool, Any, Any], int] = {}
        self.columns: dict[str, GrowingColumn] = {}
        self.skipped = 0
        self.skipped_device = 0  # of the skipped events, those of a device category
        self.n_events = 0  # every event added, of any phase
        self.odd: dict[str, int] = {}  # values made usable: "negative dur" → count
        self.side = SideEvents()
        # By string id: whether an op of that name keeps its Concrete Inputs.
        self._keeps_concrete = np.zeros(1024, dtype=bool)
        self._concrete_seen = 0
        self._cat_kind = KindOfCategory()

    def _count(self, what: str, n: int) -> None:
        """Count ``n`` events normalised in the way ``what`` says (the span's notes)."""
        if n:
            self.odd[what] = self.odd.get(what, 0) + n

    def _put(self, **cols: np.ndarray | int) -> None:
        """Append a batch to each column: an array, or an int ``m`` for ``m`` rows that all
        hold the column's absent value (no array is made for those)."""
        for k, v in cols.items():
            column = self.columns.get(k)
            if type(v) is int:
                if column is None:
                    column = self.columns[k] = GrowingColumn(DTYPES[k], ABSENT_VALUE[k])
                column.extend_absent(v)
                continue
            if column is None:
                column = self.columns[k] = GrowingColumn(v.dtype, ABSENT_VALUE.get(k))
            column.extend(v)

    def add(self, events: list) -> None:
        phases = list(map(_PHASE, events))
        present = set(phases)
        # The rest (flows, memory samples, metadata) go to the side events, which pick them
        # by phase; a batch of one side only is not copied.
        if "X" not in present:
            xs, others = [], events
        elif len(present) == 1:
            xs, others = events, []
        else:
            is_x = list(map(_IS_X, phases))
            xs = list(compress(events, is_x))
            others = list(compress(events, map(not_, is_x)))
            del is_x
        # Few traces have phases outside the format: counted only when the set shows one.
        if not _KNOWN_PHASES.issuperset(present):
            unknown = sum(n for ph, n in Counter(phases).items() if ph not in _KNOWN_PHASES)
            key = "unknown phase (ignored)"
            self.odd[key] = self.odd.get(key, 0) + unknown
        del phases
        self.n_events += len(events)
        ts_abs = packed([e.ts for e in xs], "d")
        # µs since 1970 stay below 1e17 for another thousand years: beyond is garbage,
        # and would overflow every interval sum downstream.
        usable = np.isfinite(ts_abs) & (np.abs(ts_abs) < _MAX_TS_US)
        if not usable.all():
            self.skipped += int((~usable).sum())
            # Whether the device side is what lost its times (then the trace is an error,
            # not a CPU-only trace): the skipped events' categories, on this rare path.
            self.skipped_device += sum(
                1 for e, ok in zip(xs, usable.tolist(), strict=True)
                if not ok and CATEGORY_KIND.get(e.cat, Kind.OTHER) in DEVICE_KINDS)
            xs = [e for e, ok in zip(xs, usable.tolist(), strict=True) if ok]
            ts_abs = ts_abs[usable]
        dur = packed([e.dur for e in xs], "d")
        bad = ~((dur >= 0) & (dur < _MAX_TS_US))
        if bad.any():
            # A complete event has a dur: NaN is one missing, null or not a number.
            missing = np.isnan(dur)
            self._count(_NO_DUR, int(missing.sum()))
            self._count(_ABSURD_DUR, int((bad & ~missing).sum()))
            dur[bad] = 0.0  # missing, NaN, negative, absurd: instant
        kind = self._kinds(xs)
        lane = self._lanes(xs, _IS_DEVICE_KIND[kind])
        args = [e.args for e in xs]
        intern = self.intern
        # Interned in this order (names, then the args' stacks, shapes, types, concrete
        # inputs, launch shapes and resources): ids are numbered in order of first appearance.
        name = intern.many([e.name for e in xs])
        cols, renumbered = arg_columns(intern, args)
        self._put(
            kind=kind, ts=ts_abs, dur=dur, lane=lane, name=name, **cols,
            concrete=self._concrete(name, args),
            shape=launch_shapes(intern, args),
            resources=launch_resources(intern, args),
        )
        if renumbered:
            self._count(_RENUMBERED, int(np.logical_or.reduce(renumbered).sum()))
        if others:
            self.side.add(others, present - {"X"})

    def _kinds(self, xs: list) -> np.ndarray:
        """The events' kinds from their categories (C-speed lookups; one for a batch of
        one category, as a run of tiny ops is)."""
        cat_kind = self._cat_kind
        cats = [e.cat for e in xs]
        n = len(cats)
        if n and cats.count(cats[0]) == n:
            return np.full(n, cat_kind[cats[0]], dtype=np.uint8)
        return packed(map(cat_kind.__getitem__, cats), "B", n)

    def _lanes(self, xs: list, is_dev: np.ndarray) -> np.ndarray:
        """Each event's lane: its thread (is device, pid, tid), numbered in order of first
        appearance. A batch on one thread (most are: a thread's events are written
        together) is one look-up, not a tuple and a hash per event."""
        lane_ids = self.lane_ids
        pids = [e.pid for e in xs]
        tids = [e.tid for e in xs]
        n = len(pids)
        if n and pids.count(pids[0]) == n and tids.count(tids[0]) == n:
            dev = bool(is_dev[0])
            if bool(is_dev.all()) if dev else not is_dev.any():
                key = (dev, pids[0], tids[0])
                return np.full(n, lane_ids.setdefault(key, len(lane_ids)), dtype=np.int32)
        # The (is device, pid, tid) of each event, looked up as zip makes it: the tuple
        # is dropped before the next is made (zip reuses it), none is kept.
        devs = is_dev.tolist()
        lanes = packed(map(lane_ids.get, zip(devs, pids, tids, strict=True), repeat(NO_ID, n)),
                       "i", n)
        if (lanes == NO_ID).any():  # threads first seen in this batch
            lanes = packed([lane_ids.setdefault(k, len(lane_ids))
                            for k in zip(devs, pids, tids, strict=True)], "i")
        return lanes

    def _concrete(self, name: np.ndarray, args: list) -> np.ndarray | int:
        """``Concrete Inputs`` of the ops whose cost reads them (NO_ID for the rest; a
        batch without such an op as its number of rows)."""
        strings = self.intern.strings
        seen = self._concrete_seen
        if seen < len(strings):  # strings first seen in this batch
            if len(strings) > self._keeps_concrete.shape[0]:
                grown = np.zeros(2 * len(strings), dtype=bool)
                grown[:seen] = self._keeps_concrete[:seen]
                self._keeps_concrete = grown
            self._keeps_concrete[seen:len(strings)] = concrete_input_mask(strings[seen:])
            self._concrete_seen = len(strings)
        rows = np.flatnonzero(self._keeps_concrete[name])
        if not rows.size:
            return name.shape[0]  # rows that all lack it: given as their number
        out = np.full(name.shape[0], NO_ID, dtype=np.int32)
        out[rows] = self.intern.raw([args[i].concrete_inputs for i in rows.tolist()],
                                    compact=True)
        return out

    def export(self) -> dict[str, Any]:
        """What the batches added, as plain data (for :meth:`merge` in another process):
        the builder is spent after it."""
        columns = {}
        for key, column in self.columns.items():
            data = column.take() if column.data is not None else None
            columns[key] = (column.dtype, column.absent, data, column.n)
        self.columns = {}
        return {"strings": self.intern.strings, "lanes": list(self.lane_ids),
                "columns": columns, "skipped": self.skipped, "odd": self.odd,
                "skipped_device": self.skipped_device, "n_events": self.n_events,
                "side": self.side.export()}

    def merge(self, part: dict[str, Any], rows: int = 0) -> None:
        """Append a part of the file (:meth:`export` of the builder that read it), as if its
        batches had been added here: strings and threads first seen in it are numbered
        after the ones known, in its order. The part's columns are taken out of it one by
        one as they are copied (peak memory: the part and the whole are never both held);
        ``rows``, the rows all merges will bring (an estimate will do), sizes the columns
        first made here."""
        string_map = self.intern.many(part["strings"])
        lane_map = np.asarray([self.lane_ids.setdefault(k, len(self.lane_ids))
                               for k in part["lanes"]], dtype=np.int32)
        columns = part["columns"]
        for key in list(columns):
            dtype, absent, data, n = columns.pop(key)
            column = self.columns.get(key)
            if column is None:
                column = self.columns[key] = GrowingColumn(dtype, absent, rows)
            if data is None:
                column.extend(np.zeros(n, dtype) if absent is None
                              else constant(absent, n, dtype))
                continue
            if key in STRING_ID_KEYS and data.size and string_map.size:
                data = np.where(data >= 0, string_map[np.maximum(data, 0)], data).astype(dtype)
            elif key == "lane" and data.size:
                data = lane_map[data]
            column.extend(data)
        self.skipped += part["skipped"]
        self.skipped_device += part["skipped_device"]
        self.n_events += part["n_events"]
        for what, count in part["odd"].items():
            self.odd[what] = self.odd.get(what, 0) + count
        self.side.merge(part["side"])

    def _check_timestamps(self, problems: dict[str, int]) -> None:
        """A file whose timestamps are mostly not numbers (strings, say) is an error: its
        events would all be skipped, and what was left would read as another trace. A few
        stray ones are skipped and counted in the notes."""
        wrong = problems.get(TS_NOT_A_NUMBER, 0)
        if wrong and 2 * wrong > self.n_events:
            raise TraceLoadError(self.path, f"timestamps are not numbers (ts is not a number "
                                            f"in {wrong} of {self.n_events} events)")

    def _column(self, key: str, dtype: Any) -> np.ndarray:
        """One column; the builder lets go of it as it is taken (peak memory)."""
        column = self.columns.pop(key, None)
        return column.take() if column is not None else np.zeros(0, dtype=dtype)

    def finish(self, doc: Any) -> TraceModel:
        """The model; ``doc`` supplies the file-level keys (its events were added already)."""
        problems = dict(getattr(doc, "problems", None) or {})
        self._check_timestamps(problems)
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
        if self.skipped_device and not is_dev.any():
            raise TraceLoadError(self.path, "the device events have no usable timestamps "
                                 f"(ts missing, not a number or absurd in all "
                                 f"{self.skipped_device} of them)")
        # The trace's extent is known only now: a max first, so that no mask is made
        # (peak memory) unless some dur is absurd.
        longest = max(float(ts_abs.max() - ts_abs.min()), _LONGEST_PLAUSIBLE_US) if n else 0.0
        if n and float(dur.max()) > longest:
            absurd = dur > longest
            self._count(_ABSURD_DUR, int(absurd.sum()))
            dur = writable(dur)
            dur[absurd] = 0.0
        keys = list(self.lane_ids)
        lanes = [Lane(pid=str(p), tid=str(t), is_device=d,
                      label=_lane_label(d, str(p), str(t), self.side.process_names,
                                        self.side.thread_names))
                 for (d, p, t) in keys]
        corr = self.side.fill_correlations(corr, kind, is_dev, lane_col, lanes, ts_abs)

        # Device rows name their device and stream in args in most generations;
        # else the GPU track's pid is the device index and its tid the stream.
        lane_pid = np.asarray([digits(p) for (_, p, _) in keys], dtype=np.int64)
        lane_tid = np.asarray([digits(t) for (_, _, t) in keys], dtype=np.int64)
        fill = is_dev & (device < 0)
        if fill.any():
            device = writable(device)
            device[fill] = lane_pid[lane_col[fill]]
        fill = is_dev & (stream < 0)
        if fill.any():
            stream = writable(stream)
            stream[fill] = lane_tid[lane_col[fill]]

        origin = float(ts_abs.min()) if n else 0.0
        order = time_order(ts_abs, dur)  # None: in order already, no column copied
        kind = take(kind, order)
        start = take(ts_abs, order) - origin
        del ts_abs
        dur = take(dur, order)
        lane_col = take(lane_col, order)
        corr = take(corr, order)
        is_dev = take(is_dev, order)
        meta = _meta(doc)
        columns = stored_columns(col, order, len(self.intern.strings))
        if len(keys) < INT16_LIMIT:
            lane_col = as_int16(lane_col)
        end = start + dur
        self._count(_RENUMBERED, self.side.renumbered)
        warnings = []
        if self.skipped:
            warnings.append(f"{self.skipped} complete event(s) without a usable ts were skipped")
        for what, count in {**problems, **self.odd}.items():
            if count:
                warnings.append(f"{count} event(s) normalised: {what}")
        model = TraceModel(
            path=self.path,
            strings=StringTable(self.intern.strings),  # one text, not 10⁶ objects
            kind=kind,
            lane=lane_col,
            start=start,
            dur=dur,
            # Narrow once linked (launcher): their readers only compare and look up.
            correlation=narrowest_ints(corr),
            stream=take(narrowest_ints(stream), order),
            device=take(narrowest_ints(device), order),
            parent=nest(kind, lane_col, start, end, is_dev),
            launcher=join_launches(kind, corr),
            lanes=lanes,
            memory=self.side.memory_events(origin, self.lane_ids),
            meta=meta,
            origin_us=origin + (meta.base_time_ns or 0.0) / 1000.0,
            warnings=warnings,
            **columns,
        )
        vars(model)["end"] = end  # TraceModel.end, computed for the nesting already
        return model


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
