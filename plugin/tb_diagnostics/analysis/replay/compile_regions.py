"""torch.compile's regions (the ``compile`` change, :mod:`.compile_change`), as columns.

A compiled region is the run of eager op calls on one host thread, within one step, that
a ``torch.compile`` of the step's forward, backward and optimizer would capture in one
graph; graph breaks (syncs, ``.item()``, DataLoader waits) split it, ops compiled already
or replayed from a CUDA graph stay out. Per op of a region, the host time it keeps once
compiled: per generated kernel (a run of pointwise, norm, softmax, reduction or copy
kernels on one stream) its launch and the wrapper's code, per extern call (GEMM,
convolution, other) its op's host time and the wrapper's code; the figures are measured
on the shared torch.compile trace (see :mod:`.compile_change`).

Every region is built in one pass over all of them (a dozen numpy calls per region were
10⁵ × a dozen on a span of 10⁵ one-op steps) and kept as columns, :class:`Regions`,
not an object per region: a span of 10⁶ steps has 10⁶ regions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.cost.model import family_of
from tb_diagnostics.analysis.intervals import union_sorted
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.compiled import compiled_view
from tb_diagnostics.analysis.views.hierarchy import launching_op, outermost_op
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.trace.categories import GRAPH_LAUNCH, Kind

#: Inductor's launch of one generated (Triton) kernel (µs).
GENERATED_LAUNCH_US = 9.7
#: The generated wrapper's own host code per kernel call it makes, generated or extern (µs).
WRAPPER_US = 6.4

#: The op families whose kernels Inductor generates and fuses.
FUSED_FAMILIES = frozenset({"elementwise", "norm", "softmax", "reduction", "memory"})

@dataclass(frozen=True)
class Region:
    """One compiled region: op calls of one thread and step between two graph breaks."""

    lane: int
    window: int  # step window index (-1: outside every window)
    ops: np.ndarray  # outermost op calls that launch device work, by start
    keep_us: np.ndarray  # per op: the host time it keeps once compiled (no lookup)
    activities: np.ndarray  # positions in model.device_activity_rows of their work
    generated: int  # kernels Inductor generates (fused runs)
    extern: int  # GEMM / convolution / other calls it keeps


@dataclass(frozen=True, eq=False)
class Regions(Sequence[Region]):
    """Every compiled region, as columns, in order by thread, then first op's start;
    ``regions[k]`` is region ``k`` as a :class:`Region` (its arrays slices of these)."""

    lane: np.ndarray  # int64 per region
    window: np.ndarray  # int64 per region
    op_cut: np.ndarray  # region k's ops: ops[op_cut[k]:op_cut[k + 1]]
    ops: np.ndarray  # int64, region after region, each by start
    keep_us: np.ndarray  # per op
    act_cut: np.ndarray  # region k's activities: activities[act_cut[k]:act_cut[k + 1]]
    activities: np.ndarray  # int64 positions in model.device_activity_rows
    generated: np.ndarray  # int64 per region
    extern: np.ndarray  # int64 per region

    def __len__(self) -> int:
        return int(self.lane.shape[0])

    @overload
    def __getitem__(self, k: int) -> Region: ...

    @overload
    def __getitem__(self, k: slice) -> list[Region]: ...

    def __getitem__(self, k: int | slice) -> Region | list[Region]:
        if isinstance(k, slice):
            return [self[i] for i in range(len(self))[k]]
        k = range(len(self))[k]  # negative indices, and IndexError past the end
        lo, hi = int(self.op_cut[k]), int(self.op_cut[k + 1])
        a, b = int(self.act_cut[k]), int(self.act_cut[k + 1])
        return Region(lane=int(self.lane[k]), window=int(self.window[k]),
                      ops=self.ops[lo:hi], keep_us=self.keep_us[lo:hi],
                      activities=self.activities[a:b], generated=int(self.generated[k]),
                      extern=int(self.extern[k]))

    def __iter__(self) -> Iterator[Region]:
        return (self[k] for k in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """As a list of its regions (``compile_regions(a) == []`` where none)."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    @staticmethod
    def empty() -> Regions:
        z, one = np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
        return Regions(lane=z, window=z, op_cut=one, ops=z, keep_us=np.zeros(0),
                       act_cut=one, activities=z, generated=z, extern=z)


def _already_compiled(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """Whether each host row runs inside a compiled region or CompiledFunction already."""
    m = analysis.model
    entry = compiled_view(analysis).entry_rows
    out = np.zeros(rows.shape[0], dtype=bool)
    for lane in sorted_sets.unique(m.lane[entry]).tolist():
        e = entry[m.lane[entry] == lane]
        e = e[np.argsort(m.start[e], kind="stable")]
        iv = union_sorted(m.start[e], m.end[e])
        on = m.lane[rows] == lane
        at = np.searchsorted(iv.start, m.start[rows[on]], side="right") - 1
        ok = at >= 0
        inside = np.zeros(at.shape[0], dtype=bool)
        inside[ok] = m.start[rows[on]][ok] < iv.end[at[ok]]
        out[on] = inside
    return out


def _breaks(analysis: SpanAnalysis) -> np.ndarray:
    """The calls that end a graph: each sync's outermost op (``aten::item`` for its
    ``cudaStreamSynchronize``; the sync call itself outside every op) and the
    DataLoader's waits."""
    syncs = analysis.sync_rows
    top = outermost_op(analysis)[syncs] if syncs.size else syncs
    rows = np.where(top >= 0, top, syncs) if syncs.size else syncs
    return sorted_sets.union1d(rows.astype(np.int64), analysis.input_rows.astype(np.int64))


def _graph_launched(analysis: SpanAnalysis, launcher: np.ndarray) -> np.ndarray:
    m = analysis.model
    ids = m.name_ids_matching(GRAPH_LAUNCH)  # anchored: search is match
    ok = launcher >= 0
    out = np.zeros(launcher.shape[0], dtype=bool)
    if ids.size:
        out[ok] = np.isin(m.name[launcher[ok]], ids)
    return out


@computed
def compile_regions(analysis: SpanAnalysis) -> Regions:
    """The span's compiled regions, each with what its host keeps once compiled."""
    m = analysis.model
    acts = m.device_activity_rows
    if analysis.cpu_only or not acts.size:
        return Regions.empty()
    # Every temporary below is a column of 10⁶ ops or activities at 10⁶ steps (8 MB):
    # each is dropped past its last use (about 30 were held at once, the what-if cards'
    # peak).
    launcher = m.launcher[acts]
    top = np.where(launcher >= 0, outermost_op(analysis)[np.maximum(launcher, 0)], -1)
    breaks = _breaks(analysis)
    ok = (top >= 0) & ~_graph_launched(analysis, launcher) & ~np.isin(top, breaks)
    del launcher
    if ok.any():
        ok[ok] = ~_already_compiled(analysis, top[ok].astype(np.int64))
    if not ok.any():
        return Regions.empty()
    cand = np.flatnonzero(ok)
    del ok
    cand_op = top[cand].astype(np.int64)
    del top
    ops = sorted_sets.unique(cand_op)
    lanes = m.lane[ops].astype(np.int64)
    win = window_of_rows(analysis, ops).astype(np.int64)
    # A graph break splits the thread's ops: count the breaks that start before each op.
    seg = np.zeros(ops.shape[0], dtype=np.int64)
    for lane in sorted_sets.unique(lanes).tolist():
        b = breaks[m.lane[breaks] == lane]
        on = lanes == lane
        seg[on] = np.searchsorted(np.sort(m.start[b]), m.start[ops[on]], side="right")
    inner = launching_op(analysis)
    fused_family = _fused_families(analysis, inner)
    group = _group_of(lanes, win, seg)
    del seg
    # The ops of each group, by start (stable): one sort, not a scan of every op per group.
    grouped = np.lexsort((m.start[ops], group))
    n_groups = int(group.max()) + 1
    g_cut = sorted_sets.run_starts(group[grouped], n_groups)
    op_of = np.searchsorted(ops, cand_op)
    del cand_op
    cols = _regions_columns(analysis, ops, group, grouped, g_cut, cand, op_of, inner,
                            fused_family)
    del cand, op_of, group, fused_family
    keep, acts_cut, act_pos, generated, extern = cols
    del cols
    first = grouped[g_cut[:-1]]
    # By thread, then by first op's start (a stable sort: the groups' order on ties).
    by = np.lexsort((m.start[ops[first]], lanes[first]))
    lane_col, window_col = lanes[first][by], win[first][by]
    del lanes, win, first
    op_at = grouped[_ranges(g_cut[by], g_cut[by + 1])]
    del grouped
    sizes = np.diff(g_cut)[by]
    del g_cut
    op_cut = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    del sizes
    ops, keep = ops[op_at], keep[op_at]
    del op_at
    act_sizes = np.diff(acts_cut)[by]
    activities = act_pos[_ranges(acts_cut[by], acts_cut[by + 1])]
    del act_pos
    act_cut = np.concatenate([[0], np.cumsum(act_sizes)]).astype(np.int64)
    del act_sizes, acts_cut
    return Regions(lane=lane_col, window=window_col, op_cut=op_cut, ops=ops, keep_us=keep,
                   act_cut=act_cut, activities=activities,
                   generated=generated[by].astype(np.int64),
                   extern=extern[by].astype(np.int64))


def _group_of(*keys: np.ndarray) -> np.ndarray:
    """Each position's index among the distinct key tuples in lexicographic order:
    ``np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)[1]`` by one lexsort
    (numpy sorts the rows as records: 1.5 s on 10⁶ ops)."""
    order = np.lexsort(keys[::-1])
    new = np.zeros(order.shape[0], dtype=bool)
    new[:1] = True
    for k in keys:
        sk = k[order]
        new[1:] |= sk[1:] != sk[:-1]
    group = np.empty(order.shape[0], dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    return group


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The positions ``lo[k]:hi[k]`` of every ``k``, concatenated (one repeat + arange)."""
    sizes = hi - lo
    return np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))


def _fused_families(analysis: SpanAnalysis, inner: np.ndarray) -> np.ndarray:
    """Per device activity: whether Inductor generates its kernel (a kernel whose
    launching op is of a pointwise, norm, softmax, reduction or copy family)."""
    m = analysis.model
    acts = m.device_activity_rows
    names = np.where(inner >= 0, m.name[np.maximum(inner, 0)], -1)
    fused_ids = {i for i in sorted_sets.unique(names[names >= 0]).tolist()
                 if family_of(m.strings[i]) in FUSED_FAMILIES}
    return (m.kind[acts] == Kind.KERNEL) & np.isin(names, list(fused_ids) or [-2])


def _regions_columns(analysis: SpanAnalysis, ops: np.ndarray, group: np.ndarray,
                     grouped: np.ndarray, g_cut: np.ndarray, cand: np.ndarray,
                     op_of: np.ndarray, inner: np.ndarray, fused: np.ndarray,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every region's host budget at once (a dozen numpy calls per region were 10⁵ × a
    dozen on a span of 10⁵ one-op steps): per op (of ``ops``) the host time it keeps; the
    regions' activities (positions in ``device_activity_rows``), region after region in
    position order, and where each region's start; per region its generated kernels and
    extern calls. ``cand`` are the activities to compile, ``op_of`` each one's op."""
    m = analysis.model
    acts = m.device_activity_rows
    n_groups = g_cut.shape[0] - 1
    act_group = group[op_of]
    # A region's activities in position order (cand ascends; a stable sort by region).
    by_region = np.argsort(act_group, kind="stable")
    act_pos, act_op, act_g = cand[by_region].astype(np.int64), op_of[by_region], \
        act_group[by_region]
    del act_group, by_region
    acts_cut = sorted_sets.run_starts(act_g, n_groups)
    # A run of generated kernels per stream, in the order they ran: one kernel each
    # (within a region: by stream, then start, ties in position order).
    rows = acts[act_pos]
    ran = np.lexsort((m.start[rows], m.stream[rows], act_g))
    del rows
    order, op_i, g = act_pos[ran], act_op[ran], act_g[ran]
    del ran, act_op, act_g
    stream, gen = m.stream[acts[order]], fused[order]
    after_gen = np.zeros(order.shape[0], dtype=bool)  # the kernel before: generated, same
    after_gen[1:] = gen[:-1] & (stream[1:] == stream[:-1]) & (g[1:] == g[:-1])  # stream
    run_first = gen & ~after_gen
    del stream, after_gen
    # An extern call: its launching op's host time, once per op call (its first kernel).
    op = np.where(inner[order] >= 0, inner[order], ops[op_i]).astype(np.int64)
    del order
    ext = np.flatnonzero(~gen)
    del gen
    stride = int(op.max()) + 1 if op.size else 1
    # (Sorts of ints: any kind gives the same array; numpy's default one takes ~50 ms on a
    # million in order, the stable one ~1 ms.)
    ext = ext[np.sort(np.unique(g[ext] * stride + op[ext], return_index=True)[1],
                      kind="stable")]
    cost = np.zeros(op_i.shape[0])
    cost[run_first] = GENERATED_LAUNCH_US + WRAPPER_US
    cost[ext] = m.dur[op[ext]] + WRAPPER_US
    del op
    at = np.sort(np.concatenate([np.flatnonzero(run_first), ext]), kind="stable")
    keep = np.zeros(ops.shape[0])
    np.add.at(keep, op_i[at], cost[at])  # in the order the kernels ran: the same sums
    generated = np.bincount(g[run_first], minlength=n_groups)
    extern = np.bincount(g[ext], minlength=n_groups)
    return keep, acts_cut, act_pos, generated, extern


