"""The analysis of one span: derived views, computed once and shared.

Like Lighthouse's computed artifacts, each view (host steps, device busy
intervals, host activity by cause, step windows…) is a cached property that
rules and presenters ask for by name; nothing is computed that nobody asks
for, and nothing is computed twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cached_property, wraps
from typing import TypeVar

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.dispatch import CallNode, call_tree
from tb_diagnostics.analysis.intervals import Intervals, union, union_of_rows
from tb_diagnostics.analysis.step_windows import build_windows, window_bounds
from tb_diagnostics.analysis.steps import HostSteps, find_host_steps
from tb_diagnostics.analysis.verdict import Thresholds
from tb_diagnostics.analysis.window_columns import StepWindows
from tb_diagnostics.trace.categories import (
    COLLECTIVE_OP,
    COMM_KERNEL,
    COMM_NAME,
    INPUT_NAME,
    PAGEABLE_DTOH,
    STEP_NAME,
    SYNC_NAME,
    Kind,
)
from tb_diagnostics.trace.model import TraceModel, row_indices

T = TypeVar("T")


def computed(fn: Callable[[SpanAnalysis], T]) -> Callable[[SpanAnalysis], T]:
    """Make ``fn(analysis)`` a computed artifact: run once per analysis, then shared.

    Derived views that live outside this module (GPU gaps, launch delays,
    memory series…) use this so that every rule asking for them gets the same
    object and the work is done once.
    """

    @wraps(fn)
    def memoized(analysis: SpanAnalysis) -> T:
        cache = analysis._computed
        if fn not in cache:
            if fn in analysis._released:  # asked again after a release: counted
                analysis._recomputed.append(fn.__qualname__)
            cache[fn] = fn(analysis)
        return cache[fn]

    return memoized


#: Host kinds that mean "the host is running the user's program" (Python,
#: operators, runtime calls); the profiler's own span and overhead are not.
_LAUNCH_KINDS = frozenset({Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER,
                           Kind.PYTHON})


def _names_among(model: TraceModel, rows: np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    """The ids (ascending, int32) of the names ``rows`` carry that ``pattern`` finds
    (``search``): what ``np.isin(model.name[rows], model.name_ids_matching(pattern))``
    reads, looking only at those rows' distinct names."""
    names = model.name[rows]
    present = np.zeros(len(model.strings), dtype=bool)
    present[names[names >= 0]] = True
    among = np.flatnonzero(present)
    if 4 * among.size > len(model.strings):  # most names: the model's one pass over all
        ids = model.name_ids_matching(pattern)
        return np.asarray(ids[present[ids]], dtype=np.int32)
    strings = model.strings
    return np.asarray([i for i in among.tolist() if pattern.search(strings[i])],
                      dtype=np.int32)


def self_segments(model: TraceModel, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The self-time segments of ``rows`` (each one's interval less its children's, each
    child clipped to it), for every row at once: a walk of each row's children in order,
    a cursor past the latest child end so far, made column work (a Python step per op,
    and so per step, on a CPU-only trace)."""
    order, offsets = model.children_index
    rows = np.asarray(rows, dtype=np.int64)
    first = offsets[rows].astype(np.int64)
    count = offsets[rows + 1].astype(np.int64) - first
    group = np.repeat(np.arange(rows.shape[0], dtype=np.int64), count)
    kids = order[np.repeat(first - (np.cumsum(count) - count), count)
                 + np.arange(int(count.sum()), dtype=np.int64)]
    s, e = model.start[rows], model.end[rows]
    k_start, k_end = model.start[kids], np.minimum(model.end[kids], e[group])
    # The latest clipped end of the earlier children of the same row (-inf for the first):
    # a running maximum of (row, rank of the end), so no row's maximum runs into the next.
    n = k_end.shape[0]
    by_end = np.argsort(k_end, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[by_end] = np.arange(n, dtype=np.int64)
    upto = k_end[by_end][np.maximum.accumulate(group * n + rank) - group * n] if n else k_end
    before = np.full(n, -np.inf)
    same = np.flatnonzero(group[1:] == group[:-1]) + 1
    before[same] = upto[same - 1]
    cursor = np.maximum(s[group], before)
    gap = k_start > cursor  # a gap before this child
    last = s.copy()  # the cursor after each row's last child
    if n:
        ends_at = np.flatnonzero(np.r_[group[1:] != group[:-1], True])
        last[group[ends_at]] = np.maximum(s[group[ends_at]], upto[ends_at])
    tail = e > last
    return (np.concatenate((cursor[gap], last[tail])),
            np.concatenate((np.minimum(k_start[gap], e[group][gap]), e[tail])))


class SpanAnalysis:
    """Everything the engine derives from one :class:`TraceModel`."""

    def __init__(self, model: TraceModel, thresholds: Thresholds | None = None) -> None:
        self.model = model
        self.thresholds = thresholds or Thresholds()
        self._call_trees: dict[int, CallNode] = {}
        self._computed: dict[Callable, object] = {}
        self._released: set[Callable] = set()
        self._recomputed: list[str] = []
        self._released_names: set[str] = set()

    def _cache_of(self, name: str) -> tuple[dict, str]:
        """The instance dict a released name's cached property lives in, and its name
        there: ``"model.<name>"`` the model's, ``"<name>"`` this analysis's."""
        if name.startswith("model."):
            return vars(self.model), name.removeprefix("model.")
        return vars(self), name

    @property
    def recomputed(self) -> list[str]:
        """The computed artifacts asked for again after :meth:`release` dropped them, in
        order (each was computed a second time), then the released cached properties
        made again, by name."""
        again = [n for n in sorted(self._released_names)
                 if self._cache_of(n)[1] in self._cache_of(n)[0]]
        return [*self._recomputed, *again]

    def release(self, artifacts: Iterable[Callable | str]) -> None:
        """Drop these computed artifacts (the functions :func:`computed` made; a string
        names a cached property, ``"model.<name>"`` of the model, ``"<name>"`` of this
        analysis): the memory they hold is freed once no one else holds it. Only for an
        analysis no one reads after its report (``engine.span_summary`` opening its
        own), whose model no one else holds: one asked for again is computed again, the
        same, and named in :attr:`recomputed`."""
        for a in artifacts:
            if isinstance(a, str):
                self._released_names.add(a)
                cache, name = self._cache_of(a)
                cache.pop(name, None)
                continue
            fn = getattr(a, "__wrapped__", a)
            self._released.add(fn)
            self._computed.pop(fn, None)

    # ---- what the device is -------------------------------------------------
    @property
    def cpu_only(self) -> bool:
        """No device activity at all: the CPU is the device."""
        return not self.model.has_device_activity

    # ---- host-side views ----------------------------------------------------
    @cached_property
    def host_steps(self) -> HostSteps:
        return find_host_steps(self.model)

    @cached_property
    def step_rows(self) -> np.ndarray:
        """Rows of every ProfilerStep#N-named host event (markers, not activities)."""
        return self.model.rows_matching(STEP_NAME)

    @cached_property
    def op_rows(self) -> np.ndarray:
        """Operator calls (ATen/autograd), without the step and DataLoader markers that
        the 2021 format files under ``Operator`` too."""
        m = self.model
        rows = m.rows_of({Kind.CPU_OP})
        return m.without(rows, self.step_rows, self.input_rows)

    @cached_property
    def input_rows(self) -> np.ndarray:
        rows = self.model.rows_matching(INPUT_NAME)
        return rows[self.model.is_host[rows]]

    @cached_property
    def sync_rows(self) -> np.ndarray:
        """Host calls that block until the device catches up: the sync APIs, ``.item()``,
        and copies to pageable host memory (``cudaMemcpyAsync`` is synchronous then)."""
        m = self.model
        named = m.rows_matching(SYNC_NAME)
        named = named[m.is_host[named]]
        copies = m.rows_matching(PAGEABLE_DTOH)
        copies = copies[m.kind[copies] == Kind.MEMCPY]
        launchers = m.launcher[copies]
        # The rows of either, as a mask (union1d sorts both; 10⁶ steps may sync 10⁶ times).
        mask = np.zeros(len(m), dtype=bool)
        mask[named] = True
        mask[launchers[launchers >= 0]] = True
        return row_indices(mask)

    @cached_property
    def comm_rows(self) -> np.ndarray:
        """Host events of a collective (``c10d::*``, ``gloo:*``, ``nccl:*``,
        ``record_param_comms``) on any thread: gloo runs the collective on its own
        threads while the training thread waits, so the union over threads is the wait."""
        rows = self.model.rows_matching(COMM_NAME)
        return rows[self.model.is_host[rows]]

    def launch_rows(self) -> np.ndarray:
        """Host rows that run the user's program (not cached: only their union is kept)."""
        rows = self.model.rows_of(_LAUNCH_KINDS)
        return self.model.without(rows, self.step_rows)

    def _host_union(self, rows: np.ndarray) -> Intervals:
        """Union of host rows (ascending, as every row list of the model is)."""
        return union_of_rows(self.model.start, self.model.end, rows)

    @cached_property
    def input_intervals(self) -> Intervals:
        return self._host_union(self.input_rows)

    @cached_property
    def sync_intervals(self) -> Intervals:
        return self._host_union(self.sync_rows)

    @cached_property
    def comm_intervals(self) -> Intervals:
        return self._host_union(self.comm_rows)

    @cached_property
    def launch_intervals(self) -> Intervals:
        return self._host_union(self.launch_rows())

    @cached_property
    def compile_intervals(self) -> Intervals:
        """When the host compiles (``views.compiled``): a one-time cost, labelled."""
        from tb_diagnostics.analysis.views.compiled import compile_intervals

        return compile_intervals(self)

    @cached_property
    def module_load_intervals(self) -> Intervals:
        """Kernels' first launches loading their module (``views.launch``): one-time."""
        from tb_diagnostics.analysis.views.launch import module_loads

        return module_loads(self).intervals

    @cached_property
    def profiler_intervals(self) -> Intervals:
        """Time that is the profiler's own (its flush sync, buffer requests and overhead on
        the host; the device gaps they open): labelled, and kept out of every verdict."""
        from tb_diagnostics.analysis.views.artefacts import profiler_artefacts

        art = profiler_artefacts(self)
        return art.host | art.device_gaps

    # ---- device-side views --------------------------------------------------
    @cached_property
    def activity_step(self) -> np.ndarray:
        """For each device activity row (``model.device_activity_rows``), its step index or -1.

        The launching call's start decides; an activity whose launch is not in
        the trace falls back to its own start, except backlog launched before the
        record window (``views.activity_coverage``): no step's kernels, so -1.
        """
        from tb_diagnostics.analysis.views.activity_coverage import pre_window_activities

        m = self.model
        acts = m.device_activity_rows
        launcher = m.launcher[acts]
        t = np.where(launcher >= 0, m.start[np.maximum(launcher, 0)], m.start[acts])
        step = self.host_steps.locate(t)
        step[pre_window_activities(m)] = -1
        return step

    @cached_property
    def heavy_op_rows(self) -> np.ndarray:
        """CPU-only traces: op calls whose self time reaches the heavy threshold."""
        # A collective's self time is waiting for the other ranks, not work.
        rows = self.model.without(self.op_rows, self.comm_rows)
        return rows[self.model.self_time(rows) >= self.thresholds.cpu_heavy_self_us]

    @cached_property
    def busy_intervals(self) -> Intervals:
        """When the device is doing work.

        On a GPU: the union of kernels, copies and memsets on every stream. On
        a CPU-only trace: the self-time segments of heavy op calls (their
        interval minus their children's), on any thread.
        """
        m = self.model
        if not self.cpu_only:
            acts = m.device_activity_rows
            return union(m.start[acts], m.end[acts])
        starts, ends = self_segments(m, self.heavy_op_rows)
        return union(starts, ends)

    @cached_property
    def comm_activity_mask(self) -> np.ndarray:
        """Over ``model.device_activity_rows``: which activities are communication, the
        one definition the step verdict, the roofline and the rules share. A collective
        kernel by name (NCCL/RCCL, symmetric-memory and custom all-reduce kernels: they
        keep the device "busy" while they mostly wait for the other ranks), or any
        activity a collective op launched (its innermost op above the launch)."""
        m = self.model
        acts = m.device_activity_rows
        out = np.zeros(acts.shape[0], dtype=bool)
        if not acts.size:  # a CPU-only trace: no names to look at
            return out
        # Only the activities' own names can be a collective kernel's, and only op names
        # a collective op's (launching_op answers op rows): a few names, not the span's
        # every name (10⁶ step names on 10⁶ steps).
        kernels = _names_among(m, acts, COMM_KERNEL)
        ops = _names_among(m, self.op_rows, COLLECTIVE_OP)
        if kernels.size:
            out |= np.isin(m.name[acts], kernels)
        if ops.size:
            from tb_diagnostics.analysis.views.hierarchy import launching_op  # a view of us

            op = launching_op(self)
            has = op >= 0
            out[has] |= np.isin(m.name[op[has]], ops)
        return out

    @cached_property
    def comm_kernel_rows(self) -> np.ndarray:
        """Device activity rows that are communication (:attr:`comm_activity_mask`)."""
        return self.model.device_activity_rows[self.comm_activity_mask]

    @cached_property
    def comm_kernel_intervals(self) -> Intervals:
        m = self.model
        rows = self.comm_kernel_rows
        return union(m.start[rows], m.end[rows])

    @cached_property
    def compute_intervals(self) -> Intervals:
        """When the device computes: busy time without the collective kernels. On a
        CPU-only trace, the busy time itself (host collectives are not in it)."""
        if self.cpu_only:
            return self.busy_intervals
        comm = self.comm_kernel_rows
        if not comm.size:
            return self.busy_intervals
        m = self.model
        other = m.without(m.device_activity_rows, comm)
        return union(m.start[other], m.end[other])

    def window_activity_rows(self, index: int) -> np.ndarray:
        """Device activity rows charged to window ``index`` (all of them without steps)."""
        acts = self.model.device_activity_rows
        if not len(self.host_steps):
            return acts
        order, cut = self._activities_by_window
        if not 0 <= index < cut.shape[0] - 1:
            return acts[self.activity_step == index]
        # A slice of the activities grouped by window (a mask over all of them per
        # window read every step's activities once per step: quadratic in the steps).
        return acts[order[cut[index]:cut[index + 1]]]

    @cached_property
    def _activities_by_window(self) -> tuple[np.ndarray, np.ndarray]:
        """The activities' positions grouped by window, each window's in row order (a
        stable sort), and where each window's group starts."""
        step = self.activity_step
        # int32 both (positions in the activities): half the memory of argsort's int64.
        # Activities mostly come in step order already: then the stable sort is the
        # identity, and no sort is made.
        if step.shape[0] < 2 or bool((step[1:] >= step[:-1]).all()):
            order = np.arange(step.shape[0], dtype=np.int32)
        else:
            order = np.argsort(step, kind="stable").astype(np.int32)
        cut = sorted_sets.run_starts(step[order], len(self.host_steps)).astype(np.int32)
        return order, cut

    def call_tree(self, index: int) -> CallNode:
        """The aggregated dispatch tree of window ``index`` (see :mod:`.dispatch`)."""
        tree = self._call_trees.get(index)
        if tree is None:
            w = self.windows[index]
            tree = call_tree(self.model, w.row, w.host_start, w.host_end,
                             self.window_activity_rows(index))
            if self.host_steps.inferred:  # no step event to name the root after
                tree.name = f"iteration {w.step} (inferred)"
            self._call_trees[index] = tree
        return tree

    # ---- the windows (built in :mod:`.step_windows`) ---------------------------
    @cached_property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The device-side ``[start, end)`` of every window."""
        return window_bounds(self)

    @cached_property
    def windows(self) -> StepWindows:
        """One verdict per step window (:func:`.step_windows.build_windows`): a sequence of
        :class:`StepWindow` views over columns (``windows.columns``), none kept per step."""
        return build_windows(self)
