"""The events that are not complete events: launch flows, memory samples, and the names
of processes and threads.

They are kept as a few numbers per event in growing columns, never as decoded structs:
a trace recorded with ``profile_memory=True`` has one memory sample per allocation
and per free, and launch flows come two per kernel, so holding their structs until
the end of the file would cost more than the whole model.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any

import numpy as np

from tb_diagnostics.trace.categories import (
    DEVICE_ACTIVITY_KINDS,
    LAUNCH_FLOW_CATEGORIES,
    LAUNCHER_KINDS,
)
from tb_diagnostics.trace.columns import (
    GrowingColumn,
    ints,
    link_id,
    link_ids,
    packed,
    writable,
)
from tb_diagnostics.trace.model import NO_ID, Lane, MemoryEvents

_FLOW_PHASES = frozenset({"s", "f", "t"})
#: The phases of a memory sample (an instant event named ``[memory]``).
_INSTANT_PHASES = frozenset({"i", "I"})
_PHASE = attrgetter("ph")
#: Kinds a launch flow can start or end on.
_LINKED_KIND_VALUES = np.asarray(sorted(int(k) for k in LAUNCHER_KINDS | DEVICE_ACTIVITY_KINDS),
                                 dtype=np.uint8)
_MEMORY_FIELDS = {"ts": np.float64, "bytes": np.float64, "allocated": np.float64,
                  "reserved": np.float64, "device_type": np.int64, "device_id": np.int64,
                  "addr": np.int64, "thread": np.int32}


class SideEvents:
    """Collects the non-complete events of a trace, batch by batch."""

    def __init__(self) -> None:
        self.process_names: dict[str, str] = {}
        self.thread_names: dict[tuple[str, str], str] = {}
        # Flows: which end (start on the launching call, end on the activity), the
        # thread as (pid, tid) text, the time, the id (the correlation id).
        self.flow_threads: dict[tuple[str, str], int] = {}
        self.flows = {"end": GrowingColumn(np.bool_, None),
                      "thread": GrowingColumn(np.int32, None),
                      "ts": GrowingColumn(np.float64, None), "id": GrowingColumn(np.int64, None)}
        self.memory = {k: GrowingColumn(t, None) for k, t in _MEMORY_FIELDS.items()}
        # The thread of each memory sample as (pid, tid), numbered like the flows' threads:
        # the model maps it to the host lane whose op made the allocation.
        self.memory_threads: dict[tuple[Any, Any], int] = {}
        self.renumbered = 0  # flows whose id did not fit int64 (columns.link_ids)

    def add(self, events: list[Any], present: set[str] | None = None) -> None:
        """Take what is needed from one batch of decoded events (complete ones are skipped);
        ``present`` is the set of the batch's phases where the caller has it.

        One filtering pass per kind of event rather than one Python loop with branches:
        most of these events are memory samples, and a comprehension's test is cheaper
        than a loop body's. A kind the batch has no event of (its set of phases says so)
        costs no pass."""
        if present is None:
            present = set(map(_PHASE, events))
        if not present.isdisjoint(_FLOW_PHASES):
            self._add_flows([e for e in events if e.ph in _FLOW_PHASES])
        if not present.isdisjoint(_INSTANT_PHASES):
            samples = [e for e in events if e.name == "[memory]" and e.ph in _INSTANT_PHASES]
            if samples:
                self._add_samples(samples)
        if "M" in present:
            for e in [e for e in events if e.ph == "M"]:
                if e.args.label is not None:
                    if e.name == "process_name":
                        self.process_names[str(e.pid)] = e.args.label
                    elif e.name == "thread_name":
                        self.thread_names[(str(e.pid), str(e.tid))] = e.args.label

    def _add_flows(self, flows: list[Any]) -> None:
        f_end: list[bool] = []
        f_thread: list[int] = []
        f_ts: list[float] = []
        f_id: list[int] = []
        threads = self.flow_threads
        for e in flows:
            if e.cat in LAUNCH_FLOW_CATEGORIES and math.isfinite(e.ts):
                fid = link_id(e.id)
                if fid is not None and fid != NO_ID:
                    key = (str(e.pid), str(e.tid))
                    f_end.append(e.ph != "s")
                    f_thread.append(threads.setdefault(key, len(threads)))
                    f_ts.append(e.ts)
                    f_id.append(fid)
        if f_ts:
            self.flows["end"].extend(np.asarray(f_end, dtype=np.bool_))
            self.flows["thread"].extend(np.asarray(f_thread, dtype=np.int32))
            self.flows["ts"].extend(np.asarray(f_ts, dtype=np.float64))
            ids, big = link_ids(f_id)
            if big is not None:
                self.renumbered += int(big.sum())
            self.flows["id"].extend(ids)

    def _add_samples(self, samples: list[Any]) -> None:
        """Memory samples: a column per field, their threads numbered in order of first
        appearance (dictionary look-ups at C speed; new threads numbered below)."""
        ts = packed([e.ts for e in samples], "d")
        finite = np.isfinite(ts)
        if not finite.all():
            samples = [e for e, ok in zip(samples, finite.tolist(), strict=True) if ok]
            if not samples:
                return
            ts = ts[finite]
        args = [e.args for e in samples]
        m = self.memory
        m["ts"].extend(ts)
        m["bytes"].extend(packed([a.mem_bytes for a in args], "d"))
        m["allocated"].extend(packed([a.total_allocated for a in args], "d"))
        m["reserved"].extend(packed([a.total_reserved for a in args], "d"))
        m["device_type"].extend(ints([a.device_type for a in args]))
        m["device_id"].extend(ints([a.device_id for a in args]))
        m["addr"].extend(ints([a.addr for a in args]))
        mt = self.memory_threads
        pids = [e.pid for e in samples]
        tids = [e.tid for e in samples]
        n = len(pids)
        if pids.count(pids[0]) == n and tids.count(tids[0]) == n:  # one thread: one look-up
            m["thread"].extend(np.full(n, mt.setdefault((pids[0], tids[0]), len(mt)),
                                       dtype=np.int32))
            return
        keys = list(zip(pids, tids, strict=True))
        del pids, tids
        thread = list(map(mt.get, keys))
        if None in thread:
            thread = [mt.setdefault(k, len(mt)) for k in keys]
        m["thread"].extend(np.asarray(thread, dtype=np.int32))

    def export(self) -> dict[str, Any]:
        """The collected events as plain data (for :meth:`merge` in another process)."""
        return {"process_names": self.process_names, "thread_names": self.thread_names,
                "flow_threads": list(self.flow_threads),
                "flows": {k: c.take() for k, c in self.flows.items()},
                "memory": {k: c.take() for k, c in self.memory.items()},
                "memory_threads": list(self.memory_threads),
                "renumbered": self.renumbered}

    def merge(self, part: dict[str, Any]) -> None:
        """Append the events of a later part of the file, as if added here."""
        self.process_names.update(part["process_names"])
        self.thread_names.update(part["thread_names"])
        self.renumbered += part["renumbered"]
        threads = self.flow_threads
        thread_map = np.asarray([threads.setdefault(k, len(threads))
                                 for k in part["flow_threads"]], dtype=np.int32)
        for k, values in part["flows"].items():
            if k == "thread" and values.size:
                values = thread_map[values]
            if values.size:
                self.flows[k].extend(values)
        mt = self.memory_threads
        mem_thread_map = np.asarray([mt.setdefault(k, len(mt)) for k in part["memory_threads"]],
                                    dtype=np.int32)
        for k, values in part["memory"].items():
            if k == "thread" and values.size:
                values = mem_thread_map[values]
            if values.size:
                self.memory[k].extend(values)

    def fill_correlations(self, corr: np.ndarray, kind: np.ndarray, is_dev: np.ndarray,
                          lane_col: np.ndarray, lanes: list[Lane],
                          ts_abs: np.ndarray) -> np.ndarray:
        """Launch flows fill in the correlation ids a generation of traces left out.

        A flow start sits on the launching call (same thread and ts), its end on the
        device activity; the flow id is the correlation id. A later flow with the same
        end, thread and time wins.
        """
        if not self.flows["ts"].n:
            return corr
        missing = np.flatnonzero(np.isin(kind, _LINKED_KIND_VALUES) & (corr == NO_ID))
        if not missing.size:
            return corr  # every launch and activity has its id: the flows add nothing
        ends, threads, ts, ids = (self.flows[k].take() for k in ("end", "thread", "ts", "id"))
        table = dict(zip(zip(ends.tolist(), threads.tolist(), ts.tolist(), strict=True),
                         ids.tolist(), strict=True))
        thread_of_lane = [self.flow_threads.get((ln.pid, ln.tid), -1) for ln in lanes]
        corr = writable(corr)
        for i in missing.tolist():
            fid = table.get((bool(is_dev[i]), thread_of_lane[lane_col[i]], float(ts_abs[i])))
            if fid is not None:
                corr[i] = fid
        return corr

    def memory_events(self, origin: float,
                      lane_ids: dict[tuple[bool, Any, Any], int]) -> MemoryEvents:
        """The memory samples, in time order, with times relative to ``origin``; each
        sample's thread as its host lane in ``lane_ids`` (the builder's (is_device, pid,
        tid) → lane), NO_ID where that thread has no complete event."""
        cols = {k: c.take() for k, c in self.memory.items()}
        ts = cols["ts"] - origin
        order = np.argsort(ts, kind="stable")
        lane_of_thread = np.asarray([lane_ids.get((False, pid, tid), NO_ID)
                                     for pid, tid in self.memory_threads] or [NO_ID],
                                    dtype=np.int32)
        return MemoryEvents(
            ts=ts[order],
            nbytes=np.nan_to_num(cols["bytes"], nan=0.0)[order],
            total_allocated=cols["allocated"][order],
            total_reserved=cols["reserved"][order],
            device_type=cols["device_type"][order],
            device_id=cols["device_id"][order],
            addr=cols["addr"][order],
            lane=lane_of_thread[cols["thread"]][order],
        )
