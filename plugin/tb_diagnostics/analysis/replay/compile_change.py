"""torch.compile replayed: the ``compile`` change, and ``compile-graphs`` (reduce-overhead).

A compiled region is the run of eager op calls on one host thread, within one step, that
a ``torch.compile`` of the step's forward, backward and optimizer would capture in one
graph. Dynamo breaks the graph where the program reads the device (a sync, ``.item()``,
a copy to pageable memory) or waits for the DataLoader: those calls stay eager, outside
every region, and split the run around them into two regions. Ops already compiled
(inside a ``Torch-Compiled Region`` / ``CompiledFunction``) or replayed from a CUDA graph
are left as they are.

What a region costs the host once compiled (Inductor's default mode):

- one Dynamo cache lookup and guard check (:data:`LOOKUP_US`);
- per generated kernel, its launch (:data:`GENERATED_LAUNCH_US`, Inductor's ``triton_*``
  launcher with its ``cuLaunchKernel``) and the generated wrapper's own code around it
  (:data:`WRAPPER_US`: buffer allocation, argument handling);
- per GEMM, convolution or op Inductor does not generate code for (an extern kernel),
  the host time of the op that launched it, as in eager (Inductor calls it through the
  ATen dispatcher: ``extern_kernels.mm``), plus the wrapper's code around it.

Everything else the region's host did goes: the eager ops' Python, dispatch and launch
calls. Which kernels Inductor generates: each run of consecutive pointwise, norm,
softmax, reduction or copy kernels on one stream, launched by ops of the region, becomes
one kernel (Inductor fuses them); on the device the memory-bound chains among them run
as the ``fusion`` change has them (:mod:`..views.chains`: one kernel moving its largest
op's bytes; without recorded shapes their device time stays). GEMMs and convolutions
run as before.

``compile-graphs`` adds CUDA graphs: the ``graphs`` change's capture regions
(:func:`..capture.capture_regions`, which a CUDA graph can hold: a pageable copy ends one
too) replay as one graph each, whose host work is one cache lookup and one graph launch
(:data:`..capture.GRAPH_LAUNCH_US`), whose kernels follow each other at the graph's gap
(:data:`..capture.GRAPH_GAP_US`); its kernels are the ``compile`` change's.

Every figure is measured on the shared traces (``../shared``), never fitted to a pair:

- :data:`LOOKUP_US`, :data:`GENERATED_LAUNCH_US`, :data:`WRAPPER_US`: the compiled run
  of ``pairs/h100_toyblocks_eager_vs_compile/after`` (torch.compile default mode, H100):
  the median of its 5 ``TorchDynamo Cache Lookup`` calls (18.1 µs; the cold single call
  of ``traces/hta_a100_torch_compile_triton_tiny`` took 35.6 µs), of its 45 ``triton_*``
  launcher ops (9.7 µs, of which ``cuLaunchKernel`` 3.1 µs) and, per region, of the
  region's time outside its 17 calls (9 ``triton_*``, 8 ``aten::mm``) divided by them
  (6.4 µs; regions' medians 5.99-10.78 µs);
- the graph launch and gap: :mod:`..capture`'s (the median ``cudaGraphLaunch`` of
  ``traces/hta_a100_compiled_train_rank0_of16``, reduce-overhead regions on an A100).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.cost.model import family_of
from tb_diagnostics.analysis.intervals import Intervals, union_sorted
from tb_diagnostics.analysis.replay.capture import GRAPH_LAUNCH_US
from tb_diagnostics.analysis.replay.changes import fusion_change, graphs_change
from tb_diagnostics.analysis.replay.engine import Change
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.compiled import compiled_view
from tb_diagnostics.analysis.views.hierarchy import launching_op, outermost_op
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.trace.categories import GRAPH_LAUNCH, Kind

#: One Dynamo cache lookup and guard check per region call (µs; see the module's text).
LOOKUP_US = 18.1
#: Inductor's launch of one generated (Triton) kernel (µs).
GENERATED_LAUNCH_US = 9.7
#: The generated wrapper's own host code per kernel call it makes, generated or extern (µs).
WRAPPER_US = 6.4

#: The op families whose kernels Inductor generates and fuses.
FUSED_FAMILIES = frozenset({"elementwise", "norm", "softmax", "reduction", "memory"})

ASSUMES = {
    "compile": (
        "torch.compile (default mode) captures each step's host work between graph breaks "
        "(syncs, .item(), DataLoader waits stay eager and split it); per region the host "
        f"pays one Dynamo cache lookup ({LOOKUP_US:g} µs), per generated kernel its launch "
        f"({GENERATED_LAUNCH_US:g} µs) and the wrapper's code ({WRAPPER_US:g} µs), per GEMM "
        "or convolution its op's eager host time plus the wrapper's; the eager ops' Python, "
        "dispatch and launches go. Each run of pointwise, norm and reduction kernels becomes "
        "one kernel; memory-bound chains run as the fusion change has them; GEMMs and "
        "convolutions stay. Figures: medians of the shared torch.compile trace "
        "(h100_toyblocks after, H100)"),
    "compile-graphs": (
        "torch.compile(mode=\"reduce-overhead\"): the compile change's fused kernels, each "
        "capture region of the graphs change replayed as one CUDA graph: its host work on "
        f"every thread is one cache lookup ({LOOKUP_US:g} µs) and one cudaGraphLaunch "
        f"({GRAPH_LAUNCH_US:g} µs, median of the shared hta_a100_compiled_train trace), its "
        "kernels follow each other at the graph's gap; syncs, .item() and DataLoader waits "
        "stay outside"),
}


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


def _already_compiled(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """Whether each host row runs inside a compiled region or CompiledFunction already."""
    m = analysis.model
    entry = compiled_view(analysis).entry_rows
    out = np.zeros(rows.shape[0], dtype=bool)
    for lane in np.unique(m.lane[entry]).tolist():
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
    return np.union1d(rows.astype(np.int64), analysis.input_rows.astype(np.int64))


def _graph_launched(analysis: SpanAnalysis, launcher: np.ndarray) -> np.ndarray:
    m = analysis.model
    ids = np.asarray([i for i, s in enumerate(m.strings) if GRAPH_LAUNCH.match(s)],
                     dtype=np.int32)
    ok = launcher >= 0
    out = np.zeros(launcher.shape[0], dtype=bool)
    if ids.size:
        out[ok] = np.isin(m.name[launcher[ok]], ids)
    return out


@computed
def compile_regions(analysis: SpanAnalysis) -> list[Region]:
    """The span's compiled regions, each with what its host keeps once compiled."""
    m = analysis.model
    acts = m.device_activity_rows
    if analysis.cpu_only or not acts.size:
        return []
    launcher = m.launcher[acts]
    top = np.where(launcher >= 0, outermost_op(analysis)[np.maximum(launcher, 0)], -1)
    breaks = _breaks(analysis)
    ok = (top >= 0) & ~_graph_launched(analysis, launcher) & ~np.isin(top, breaks)
    if ok.any():
        ok[ok] = ~_already_compiled(analysis, top[ok].astype(np.int64))
    if not ok.any():
        return []
    cand = np.flatnonzero(ok)
    ops = np.unique(top[cand]).astype(np.int64)
    lanes = m.lane[ops].astype(np.int64)
    win = window_of_rows(analysis, ops).astype(np.int64)
    # A graph break splits the thread's ops: count the breaks that start before each op.
    seg = np.zeros(ops.shape[0], dtype=np.int64)
    for lane in np.unique(lanes).tolist():
        b = breaks[m.lane[breaks] == lane]
        on = lanes == lane
        seg[on] = np.searchsorted(np.sort(m.start[b]), m.start[ops[on]], side="right")
    inner = launching_op(analysis)
    fused_family = _fused_families(analysis, inner)
    keys = np.stack([lanes, win, seg], axis=1)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    # The ops of each group, by start (stable): one sort, not a scan of every op per group.
    grouped = np.lexsort((m.start[ops], group))
    n_groups = int(group.max()) + 1
    g_cut = np.searchsorted(group[grouped], np.arange(n_groups + 1))
    cols = _regions_columns(analysis, ops, group, grouped, g_cut, cand,
                            np.searchsorted(ops, top[cand].astype(np.int64)), inner,
                            fused_family)
    keep, acts_cut, act_pos, generated, extern = cols
    g_ops, g_keep = ops[grouped], keep[grouped]
    first = grouped[g_cut[:-1]]
    # By thread, then by first op's start (a stable sort: the groups' order on ties).
    by = np.lexsort((m.start[ops[first]], lanes[first]))
    lane_l, win_l = lanes[first].tolist(), win[first].tolist()
    gen_l, ext_l = generated.tolist(), extern.tolist()
    lo_l, acts_l = g_cut.tolist(), acts_cut.tolist()
    return [Region(lane=lane_l[g], window=win_l[g], ops=g_ops[lo_l[g]:lo_l[g + 1]],
                   keep_us=g_keep[lo_l[g]:lo_l[g + 1]],
                   activities=act_pos[acts_l[g]:acts_l[g + 1]], generated=gen_l[g],
                   extern=ext_l[g]) for g in by.tolist()]


def _fused_families(analysis: SpanAnalysis, inner: np.ndarray) -> np.ndarray:
    """Per device activity: whether Inductor generates its kernel (a kernel whose
    launching op is of a pointwise, norm, softmax, reduction or copy family)."""
    m = analysis.model
    acts = m.device_activity_rows
    names = np.where(inner >= 0, m.name[np.maximum(inner, 0)], -1)
    fused_ids = {i for i in np.unique(names[names >= 0]).tolist()
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
    acts_cut = np.searchsorted(act_g, np.arange(n_groups + 1))
    # A run of generated kernels per stream, in the order they ran: one kernel each
    # (within a region: by stream, then start, ties in position order).
    rows = acts[act_pos]
    ran = np.lexsort((m.start[rows], m.stream[rows], act_g))
    order, op_i, g = act_pos[ran], act_op[ran], act_g[ran]
    stream, gen = m.stream[acts[order]], fused[order]
    after_gen = np.zeros(order.shape[0], dtype=bool)  # the kernel before: generated, same
    after_gen[1:] = gen[:-1] & (stream[1:] == stream[:-1]) & (g[1:] == g[:-1])  # stream
    run_first = gen & ~after_gen
    # An extern call: its launching op's host time, once per op call (its first kernel).
    op = np.where(inner[order] >= 0, inner[order], ops[op_i]).astype(np.int64)
    ext = np.flatnonzero(~gen)
    stride = int(op.max()) + 1 if op.size else 1
    ext = ext[np.sort(np.unique(g[ext] * stride + op[ext], return_index=True)[1])]
    cost = np.zeros(order.shape[0])
    cost[run_first] = GENERATED_LAUNCH_US + WRAPPER_US
    cost[ext] = m.dur[op[ext]] + WRAPPER_US
    at = np.sort(np.concatenate([np.flatnonzero(run_first), ext]))
    keep = np.zeros(ops.shape[0])
    np.add.at(keep, op_i[at], cost[at])  # in the order the kernels ran: the same sums
    generated = np.bincount(g[run_first], minlength=n_groups)
    extern = np.bincount(g[ext], minlength=n_groups)
    return keep, acts_cut, act_pos, generated, extern


def _removed(analysis: SpanAnalysis, regions: list[Region],
             keep: list[np.ndarray] | np.ndarray) -> dict[int, Intervals]:
    """Per lane: each region's span less what it keeps (``keep[k]`` per op of region
    ``k``, from the op's start on; what an op's own time cannot hold is kept from the
    time after it, so a region keeps its whole budget where its span allows). Every
    region's ops as one column (numpy calls per region made a span of 10⁶ one-op steps
    10⁶ × a dozen calls)."""
    if not regions:
        return {}
    m = analysis.model
    sizes = np.fromiter((r.ops.shape[0] for r in regions), dtype=np.int64,
                        count=len(regions))
    ops = np.concatenate([r.ops for r in regions]).astype(np.int64)
    lane = np.repeat(np.fromiter((r.lane for r in regions), dtype=np.int64,
                                 count=len(regions)), sizes)
    first = np.cumsum(sizes) - sizes
    last = first + sizes - 1  # a region has an op at least
    s = m.start[ops].astype(np.float64)
    # Each op's segment: to the next op of its region; the last op's, to the region's end.
    seg_end = np.empty_like(s)
    seg_end[:-1] = s[1:]
    seg_end[last] = np.maximum.reduceat(m.end[ops], first).astype(np.float64)
    room = seg_end - s
    # A copy either way (the carries go into it): one array per region, or their column.
    want = (keep if isinstance(keep, np.ndarray) else np.concatenate(keep)).astype(np.float64)
    # What an op cannot hold carries to the next of its region: walked one op at a time
    # only from an op whose own budget overflows, until the carry is spent.
    region_end = np.repeat(last + 1, sizes)
    done = 0
    for i in np.flatnonzero(want > room).tolist():
        if i < done:
            continue
        stop, carry = int(region_end[i]), 0.0
        while i < stop:
            w = float(want[i]) + carry
            want[i] = w
            carry = w - min(w, float(room[i]))
            i += 1
            if carry == 0.0:
                break
        done = i
    kept_end = s + np.minimum(want, room)
    left = kept_end < seg_end
    out = {}
    for ln in dict.fromkeys(r.lane for r in regions):  # lanes in the regions' order
        sel = left & (lane == ln)
        ks, ke = kept_end[sel], seg_end[sel]
        order = np.argsort(ks, kind="stable")
        iv = union_sorted(ks[order], ke[order])
        if iv.total > 0:
            out[ln] = iv
    return out


def _device_scale(analysis: SpanAnalysis, regions: list[Region]) -> np.ndarray | None:
    """The fusion change's device factors, for the work of the regions only."""
    fusion = fusion_change(analysis)
    if fusion is None or fusion.device_scale is None:
        return None
    inside = np.zeros(fusion.device_scale.shape[0], dtype=bool)
    inside[np.concatenate([r.activities for r in regions])] = True
    scale = np.where(inside, fusion.device_scale, 1.0)
    return None if np.all(scale == 1.0) else scale


def _change(analysis: SpanAnalysis, regions: list[Region],
            keep: np.ndarray) -> Change | None:
    removed = _removed(analysis, regions, keep)
    scale = _device_scale(analysis, regions)
    if not removed and scale is None:
        return None
    return Change(removed_host=removed, device_scale=scale)


def compile_change(analysis: SpanAnalysis) -> Change | None:
    """torch.compile (default mode): per region, one cache lookup, and per kernel its
    launch (generated) or its op's host time (extern); fused runs on the device."""
    regions = compile_regions(analysis)
    if not regions:
        return None
    # Every region's budget as one column (a copy per region was a numpy call per step),
    # one lookup on each region's first op.
    keep = np.concatenate([r.keep_us for r in regions])
    sizes = np.fromiter((r.ops.shape[0] for r in regions), dtype=np.int64,
                        count=len(regions))
    keep[np.cumsum(sizes) - sizes] += LOOKUP_US
    return _change(analysis, regions, keep)


def compile_graphs_change(analysis: SpanAnalysis) -> Change | None:
    """torch.compile(mode="reduce-overhead"): the graphs change with one cache lookup more
    per graph launch, and the compile change's fused kernels on the device. Where nothing
    is left to compile (the run is compiled already), the ``graphs`` card says what graphs
    add, and this change does not apply."""
    if not compile_regions(analysis):
        return None
    graphs = graphs_change(analysis, launch_us=LOOKUP_US + GRAPH_LAUNCH_US)
    if graphs is None:
        return None
    compiled = compile_change(analysis)
    scale = None if compiled is None else compiled.device_scale
    return Change(removed_host=graphs.removed_host, no_wait=graphs.no_wait,
                  device_scale=scale, stream_gap=graphs.stream_gap)
