"""Iterations from calls the script makes once per iteration: graph launches, compiled
regions, optimizer steps, DataLoader fetches."""

from __future__ import annotations

import re

import numpy as np

from tb_diagnostics.analysis.iterations.lane import (
    CACHE_LOOKUP,
    COMPILED_REGION,
    DATALOADER,
    OPTIMIZER_STEP,
    OPTIMIZER_ZERO_GRAD,
    Lane,
    all_occurrences,
    occurrences,
    pick,
)
from tb_diagnostics.analysis.iterations.windows import Iterations, windows
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import TraceModel

GRAPH_LAUNCH = re.compile(r"^(cuda|hip)GraphLaunch")


def graph_launches(m: TraceModel, lane: Lane) -> Iterations | None:
    """A CUDA/HIP graph replayed once per iteration (``g.replay()``, a captured decode
    step, ``mode="reduce-overhead"``): each launch starts one (several per iteration group
    by their period)."""
    found = occurrences(m, lane, GRAPH_LAUNCH)
    found = {n: p[np.isin(m.kind[lane.rows[p]], (Kind.RUNTIME, Kind.DRIVER))]
             for n, p in found.items()}
    pos = all_occurrences(found, lane)
    if pos.size < 2:
        return None
    name = min(found, key=lambda n: (found[n].size == 0, n))
    return windows(m, lane, pos, f"the graph launches ({name})")


def compiled_regions(m: TraceModel, lane: Lane) -> Iterations | None:
    """A compiled model or step called once per iteration: each ``Torch-Compiled Region``
    (or ``CompiledFunction``) call, from the Dynamo cache lookup that precedes it."""
    found = occurrences(m, lane, COMPILED_REGION)
    pos = all_occurrences(found, lane)
    if pos.size < 2:
        return None
    name = min(found, key=lambda n: (float(lane.start[found[n][0]]), n))
    lookups = all_occurrences(occurrences(m, lane, CACHE_LOOKUP), lane)
    source = f"the compiled-region calls ({name})"
    if lookups.size:
        # Dynamo checks its guards right before it runs the frame: the lookup that ends
        # last before a region, after the previous region ended, starts its call.
        prev_end = np.concatenate(([-np.inf], lane.end[pos[:-1]]))
        k = np.searchsorted(lane.end[lookups], lane.start[pos], side="right") - 1
        ok = k >= 0
        ok[ok] = lane.start[lookups[k[ok]]] >= prev_end[ok]
        pos = np.where(ok, lookups[np.maximum(k, 0)], pos)
        if ok.all():
            source += ", each from its TorchDynamo cache lookup"
    return windows(m, lane, pos, source)


def optimizer(m: TraceModel, lane: Lane) -> Iterations | None:
    steps = occurrences(m, lane, OPTIMIZER_STEP)
    if steps and max(p.size for p in steps.values()) >= 2:
        name, pos = pick(steps, lane, latest=True)
        # Where each iteration starts is clearer from a call it starts with (the whole
        # first iteration, however long its cold start, is then one window), when there
        # is one such call per step (one more: the fetch that ended the loop).
        for what, pattern in (("DataLoader fetch", DATALOADER),
                              ("zero_grad call", OPTIMIZER_ZERO_GRAD)):
            mark = all_occurrences(occurrences(m, lane, pattern), lane)
            if mark.size in (pos.size, pos.size + 1) and _one_between(lane, mark, pos):
                return windows(m, lane, mark, f"the optimizer steps ({name}), each "
                                              f"iteration starting at its {what}")
        return windows(m, lane, pos, f"the optimizer steps ({name})", ends=True)
    zero = occurrences(m, lane, OPTIMIZER_ZERO_GRAD)
    if zero and max(p.size for p in zero.values()) >= 2:
        name, pos = pick(zero, lane, latest=False)
        return windows(m, lane, pos, f"the optimizer's zero_grad calls ({name})")
    return None


def _one_between(lane: Lane, marks: np.ndarray, steps: np.ndarray) -> bool:
    """Exactly one step between consecutive marks (and none before the first)."""
    if not marks.size:
        return False
    k = np.searchsorted(lane.start[marks], lane.start[steps], side="right") - 1
    return bool(k.min() >= 0 and np.array_equal(np.bincount(k, minlength=marks.size)[:steps.size],
                                                np.ones(steps.size, dtype=np.int64)))


def dataloader(m: TraceModel, lane: Lane) -> Iterations | None:
    found = occurrences(m, lane, DATALOADER)
    # Both iterator classes count (a loader re-created per epoch): one fetch per iteration.
    pos = all_occurrences(found, lane)
    if pos.size < 2:
        return None
    name = min(found, key=lambda n: lane.start[found[n][0]])
    return windows(m, lane, pos, f"the DataLoader fetches ({name})")
