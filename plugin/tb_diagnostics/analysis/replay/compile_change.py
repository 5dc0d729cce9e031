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

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, union_sorted
from tb_diagnostics.analysis.replay.capture import GRAPH_LAUNCH_US
from tb_diagnostics.analysis.replay.changes import fusion_change, graphs_change
from tb_diagnostics.analysis.replay.compile_regions import (  # noqa: F401 (their home was here)
    FUSED_FAMILIES,
    GENERATED_LAUNCH_US,
    WRAPPER_US,
    Region,
    Regions,
    _fused_families,
    compile_regions,
)
from tb_diagnostics.analysis.replay.engine import Change
from tb_diagnostics.analysis.span import SpanAnalysis

#: One Dynamo cache lookup and guard check per region call (µs; see the module's text).
LOOKUP_US = 18.1

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


def _removed(analysis: SpanAnalysis, regions: Regions | list[Region],
             keep: list[np.ndarray] | np.ndarray) -> dict[int, Intervals]:
    """Per lane: each region's span less what it keeps (``keep[k]`` per op of region
    ``k``, from the op's start on; what an op's own time cannot hold is kept from the
    time after it, so a region keeps its whole budget where its span allows). Every
    region's ops as one column (numpy calls per region made a span of 10⁶ one-op steps
    10⁶ × a dozen calls)."""
    if not regions:
        return {}
    m = analysis.model
    if isinstance(regions, Regions):  # the columns themselves
        sizes, ops = np.diff(regions.op_cut), regions.ops.astype(np.int64)
        lanes = regions.lane
    else:
        sizes = np.fromiter((r.ops.shape[0] for r in regions), dtype=np.int64,
                            count=len(regions))
        ops = np.concatenate([r.ops for r in regions]).astype(np.int64)
        lanes = np.fromiter((r.lane for r in regions), dtype=np.int64, count=len(regions))
    # Each temporary is a column of every op (10⁶ steps: 8 MB): dropped past its last use.
    first = np.cumsum(sizes) - sizes
    last = first + sizes - 1  # a region has an op at least
    s = m.start[ops].astype(np.float64)
    # Each op's segment: to the next op of its region; the last op's, to the region's end.
    seg_end = np.empty_like(s)
    seg_end[:-1] = s[1:]
    seg_end[last] = np.maximum.reduceat(m.end[ops], first).astype(np.float64)
    del first, ops
    room = seg_end - s
    # A copy either way (the carries go into it): one array per region, or their column.
    want = (keep if isinstance(keep, np.ndarray) else np.concatenate(keep)).astype(np.float64)
    # What an op cannot hold carries to the next of its region: walked one op at a time
    # only from an op whose own budget overflows, until the carry is spent. A region's
    # last op carries to nothing (its walk would change nothing): a span of one-op
    # regions, each over budget, walks none.
    region_end = np.repeat(last + 1, sizes)
    over = want > room
    over[last] = False
    del last
    done = 0
    for i in np.flatnonzero(over).tolist():
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
    del region_end, over
    kept_end = s + np.minimum(want, room)
    del s, want, room
    left = kept_end < seg_end
    lane = np.repeat(lanes, sizes)
    out = {}
    seen, at = np.unique(lanes, return_index=True)
    for ln in seen[np.argsort(at)].tolist():  # lanes in the regions' order
        sel = left & (lane == ln)
        ks, ke = kept_end[sel], seg_end[sel]
        del sel
        if ks.shape[0] > 1 and not bool(np.all(ks[1:] >= ks[:-1])):
            order = np.argsort(ks, kind="stable")  # else the identity: no sort, no copy
            ks, ke = ks[order], ke[order]
            del order
        iv = union_sorted(ks, ke)
        del ks, ke
        if iv.total > 0:
            out[ln] = iv
    return out


def _device_scale(analysis: SpanAnalysis, regions: Regions) -> np.ndarray | None:
    """The fusion change's device factors, for the work of the regions only."""
    fusion = fusion_change(analysis)
    if fusion is None or fusion.device_scale is None:
        return None
    inside = np.zeros(fusion.device_scale.shape[0], dtype=bool)
    inside[regions.activities] = True
    scale = np.where(inside, fusion.device_scale, 1.0)
    return None if np.all(scale == 1.0) else scale


def _change(analysis: SpanAnalysis, regions: Regions, keep: np.ndarray) -> Change | None:
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
    # one lookup on each region's first op (op_cut: where each region's ops start).
    keep = regions.keep_us.copy()
    keep[regions.op_cut[:-1]] += LOOKUP_US
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
    # The compile change's fused kernels: its device factors, not the whole change again
    # (where that change is None, so are they).
    scale = _device_scale(analysis, compile_regions(analysis))
    return Change(removed_host=graphs.removed_host, no_wait=graphs.no_wait,
                  device_scale=scale, stream_gap=graphs.stream_gap)
