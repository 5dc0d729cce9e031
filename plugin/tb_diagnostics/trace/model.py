"""The columnar trace model: one per trace file, built once, read by everything.

Every complete event is a row across parallel numpy columns (no per-event
Python object survives the build), strings are interned into one table, and
the relations the analysis needs are precomputed as index columns:
``parent`` (host nesting by time containment, per thread) and ``launcher``
(device activity → the runtime/driver call that launched it).

Times are float64 microseconds relative to :attr:`TraceModel.origin_us`, the
start of the earliest event, so figures read as "µs since the profiler
started" whatever the trace generation wrote (absolute epoch µs before 2024,
offsets from ``baseTimeNanoseconds`` after).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.trace.categories import (
    DEVICE_ACTIVITY_KINDS,
    HOST_KINDS,
    LAUNCHER_KINDS,
    Kind,
    is_amd_device,
)

NO_ID = -1


#: Rows per pass of the whole-column loops (here and in the analysis): their temporaries
#: stay a few hundred kB however many rows a trace has.
ROW_CHUNK = 1 << 15


def row_indices(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(mask)`` as int32: row lists are cached by many views, and rows
    always fit (``parent`` and ``launcher`` are int32 too); half the memory of int64."""
    if mask.shape[0] <= ROW_CHUNK:
        return np.flatnonzero(mask).astype(np.int32)
    out = np.empty(int(np.count_nonzero(mask)), dtype=np.int32)
    at = 0
    for a in range(0, mask.shape[0], ROW_CHUNK):  # no full-length int64 temporary
        part = np.flatnonzero(mask[a:a + ROW_CHUNK])
        part += a
        out[at:at + part.shape[0]] = part
        at += part.shape[0]
    return out

@dataclass(frozen=True)
class Lane:
    """One timeline row: a host thread or a device stream."""

    pid: str
    tid: str
    is_device: bool
    label: str

    @property
    def key(self) -> str:
        side = "device" if self.is_device else "host"
        return f"{side}:{self.pid}:{self.tid}"


@dataclass(frozen=True)
class MemoryEvents:
    """``[memory]`` instant events (``profile_memory=True``), in time order."""

    ts: np.ndarray  # float64 µs, relative to the model origin
    nbytes: np.ndarray  # float64, + for an allocation, - for a free
    total_allocated: np.ndarray  # float64, NaN where the trace does not say
    total_reserved: np.ndarray  # float64, NaN where the trace does not say
    device_type: np.ndarray  # int64: 0 CPU, 1 CUDA (Kineto's c10::DeviceType)
    device_id: np.ndarray  # int64, -1 for the host
    addr: np.ndarray  # int64 block address (an allocation and its free share it), NO_ID
    lane: np.ndarray  # int32 index into the model's lanes of the host thread, NO_ID

    def __len__(self) -> int:
        return int(self.ts.shape[0])


@dataclass(frozen=True)
class TraceMeta:
    """File-level facts: devices, distributed setup, profiler flags."""

    device_properties: list[dict[str, Any]]
    distributed_info: dict[str, Any] | None
    schema_version: Any
    base_time_ns: float | None
    profiler_flags: dict[str, Any]


@dataclass(frozen=True, eq=False)
class TraceModel:
    """All complete events of one trace file as columns, sorted by start time.

    Rows are ordered by ``start`` and, on ties, longer events first, so a
    parent always precedes its children.
    """

    path: str
    #: The interned strings (a list, or a :class:`~.string_table.StringTable`, one text:
    #: the loaders' form); ``strings[i]`` is string i.
    strings: Sequence[str]
    kind: np.ndarray  # uint8, a trace.categories.Kind
    name: np.ndarray  # index into `strings` (int16 when every index fits, else int32)
    lane: np.ndarray  # index into `lanes` (int16 when every index fits, else int32)
    start: np.ndarray  # float64 µs since origin
    dur: np.ndarray  # float64 µs
    #: The narrowest signed int (int8 to int64, ``trace.columns.narrowest_ints``) that
    #: holds every value, in these three: cast before arithmetic (``device * 2**32``).
    correlation: np.ndarray  # NO_ID where absent
    external_id: np.ndarray  # int32, or int64 when an id needs it; NO_ID where absent
    parent: np.ndarray  # int32 row of the enclosing host event on the same thread, NO_ID
    launcher: np.ndarray  # int32 row of the launching runtime/driver call (device rows), NO_ID
    stream: np.ndarray  # device stream (device rows), NO_ID; as correlation
    device: np.ndarray  # device index (device rows), NO_ID; as correlation
    nbytes: np.ndarray  # float64 bytes moved by memcpy/memset, NaN elsewhere
    python_id: np.ndarray  # python_function id (int32 or int64, as external_id), NO_ID
    python_parent: np.ndarray  # python_function parent id (as python_id), NO_ID
    call_stack: np.ndarray  # as name (2021 "Call stack" arg), NO_ID
    input_dims: np.ndarray  # as name (JSON of "Input Dims"), NO_ID
    input_types: np.ndarray  # as name (JSON of "Input type"), NO_ID
    concrete_inputs: np.ndarray  # as name (JSON of "Concrete Inputs", PyTorch ≥ 2.1), NO_ID
    launch_shape: np.ndarray  # as name (JSON of a kernel's [grid, block]), NO_ID
    #: As name: JSON of a kernel's [registers per thread, shared memory (static + dynamic,
    #: bytes), est. achieved occupancy %], each null where not recorded; NO_ID.
    launch_resources: np.ndarray
    lanes: list[Lane]
    memory: MemoryEvents
    meta: TraceMeta
    origin_us: float  # absolute µs (epoch-based where the trace allows) of start == 0
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    @cached_property
    def end(self) -> np.ndarray:
        return self.start + self.dur

    def name_of(self, row: int) -> str:
        return self.strings[int(self.name[row])]

    def string(self, sid: int) -> str | None:
        return None if sid < 0 else self.strings[sid]

    @cached_property
    def name_index(self) -> Mapping[str, int]:
        """A string's id (a repeated string: its last), as the dict of every string would
        answer it, found per name looked up (:mod:`.name_index`): 10⁶ step names made
        that dict 0.4 s and ~70 MB for the few names its readers ask."""
        from tb_diagnostics.trace.name_index import NameIndex

        return NameIndex(self)

    def rows_named(self, names: set[str] | frozenset[str]) -> np.ndarray:
        """Rows whose name is one of ``names`` (exact match)."""
        ids = [self.name_index[n] for n in names if n in self.name_index]
        return row_indices(np.isin(self.name, np.asarray(ids, dtype=np.int32)))

    def name_ids_matching(self, pattern: Any) -> np.ndarray:
        """Ids of the names a compiled regular expression finds (``search``; anchor it
        with ``^`` for a prefix), for ``np.isin(model.name[rows], ids)``: ascending, read-only,
        kept per pattern, found in one pass over the joined strings where that is exact
        (:mod:`.name_match`; a ``search`` per string was 10⁶ calls per pattern on 10⁶ steps)."""
        from tb_diagnostics.trace.name_match import ids_matching

        return ids_matching(self, pattern)

    def rows_matching(self, pattern: Any) -> np.ndarray:
        """Rows whose name matches a compiled regular expression (``search``)."""
        return row_indices(np.isin(self.name, self.name_ids_matching(pattern)))

    def name_groups(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``np.unique(self.name[rows], return_inverse=True)``, in linear time and int32:
        name ids are small, so a lookup table replaces the sort (and its int64 copies)."""
        names = self.name[rows]
        present = np.zeros(len(self.strings), dtype=bool)
        present[names] = True
        ids = row_indices(present)
        code = np.zeros(len(self.strings), dtype=np.int32)
        code[ids] = np.arange(ids.shape[0], dtype=np.int32)
        return ids, code[names]

    def rows_of(self, kinds: frozenset[Kind] | set[Kind]) -> np.ndarray:
        return row_indices(np.isin(self.kind, np.asarray(sorted(kinds), dtype=np.uint8)))

    @cached_property
    def host_rows(self) -> np.ndarray:
        return row_indices(self.is_host)

    @cached_property
    def is_host(self) -> np.ndarray:
        """Boolean mask of host rows (cheaper than set operations on row lists)."""
        return np.isin(self.kind, np.asarray(sorted(HOST_KINDS), dtype=np.uint8))

    def without(self, rows: np.ndarray, *excluded: np.ndarray) -> np.ndarray:
        """``rows`` minus every row in ``excluded``, order kept (a mask, not a sort)."""
        drop = np.zeros(len(self), dtype=bool)
        for e in excluded:
            drop[e] = True
        return rows[~drop[rows]]

    @cached_property
    def device_activity_rows(self) -> np.ndarray:
        return self.rows_of(DEVICE_ACTIVITY_KINDS)

    @cached_property
    def launcher_rows(self) -> np.ndarray:
        return self.rows_of(LAUNCHER_KINDS)

    @cached_property
    def has_device_activity(self) -> bool:
        return bool(self.device_activity_rows.size)

    @cached_property
    def device_kind(self) -> str:
        """``cuda``, ``rocm`` or ``cpu`` (no device activity: the CPU is the device)."""
        if not self.has_device_activity:
            return "cpu"
        if any(is_amd_device(props) for props in self.meta.device_properties):
            return "rocm"
        launchers = self.launcher_rows
        if launchers.size and any(
            self.strings[i].startswith("hip") for i in sorted_sets.unique(self.name[launchers])
        ):
            return "rocm"
        return "cuda"

    @cached_property
    def used_device_properties(self) -> dict[str, Any] | None:
        """The ``deviceProperties`` entry of the device most activities ran on (the first
        entry when none has its id); None on a CPU-only trace or without the list."""
        props = self.meta.device_properties
        if not self.has_device_activity or not props:
            return None
        devs = self.device[self.device_activity_rows]
        devs = devs[devs >= 0]
        used = int(np.bincount(devs).argmax()) if devs.size else 0
        return next((p for p in props if p.get("id") == used), props[0])

    @cached_property
    def device_name(self) -> str | None:
        """The name of the device the activities ran on, from ``deviceProperties``."""
        used = self.used_device_properties
        if used is not None and used.get("name"):
            return str(used["name"])
        props = self.meta.device_properties
        if used is not None and props[0].get("name"):
            return str(props[0]["name"])
        return None

    def self_time(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Self time (duration minus the children's durations) of host rows.

        Children are the rows whose ``parent`` is the row; a child that spills
        past its parent's end is clipped to it, so self time never goes
        negative on slightly inconsistent traces.
        """
        return self._self_time_all if rows is None else self._self_time_all[rows]

    def self_time_once(self) -> np.ndarray:
        """Every row's :meth:`self_time`: the kept array where a reader made it, else
        computed and not kept, for a reader that needs it once and long before the
        others (the report's step totals, before its rules): 8 bytes a row not held
        in between (30 MB on a span of 10⁶ steps, through the critical paths)."""
        held = vars(self).get("_self_time_all")
        return held if held is not None else self._self_times()

    @cached_property
    def _self_time_all(self) -> np.ndarray:
        return self._self_times()

    def _self_times(self) -> np.ndarray:
        end = self.end
        child = row_indices(self.parent >= 0)
        par = self.parent[child]
        clipped = np.minimum(end[child], end[par])
        clipped -= self.start[child]
        del child
        np.maximum(clipped, 0.0, out=clipped)
        # One bincount over every child, in row order: each parent's sum adds its
        # children in the order np.add.at did (bincount adds in input order), so the
        # same bits, 5x faster; split in chunks, the partial sums would round apart.
        covered = np.bincount(par, weights=clipped, minlength=len(self)) if par.size \
            else np.zeros(len(self))  # (bincount of nothing gives ints, weights or not)
        del par, clipped
        np.subtract(self.dur, covered, out=covered)
        return np.maximum(covered, 0.0, out=covered)

    @cached_property
    def children_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, offsets): children of row r are ``order[offsets[r]:offsets[r + 1]]``."""
        par = self.parent
        order = np.argsort(par, kind="stable")
        order = order[par[order] >= 0].astype(np.int32)
        counts = np.bincount(par[order], minlength=len(self))
        offsets = np.zeros(len(self) + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        return order, offsets

    def children(self, row: int) -> np.ndarray:
        order, offsets = self.children_index
        return order[offsets[row] : offsets[row + 1]]
