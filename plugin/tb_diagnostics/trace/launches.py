"""Kernel launches in the build: what a launch records, and which call launched each activity.

Kernels record their launch configuration in their args: ``grid`` and ``block``, and in
newer profilers registers per thread, shared memory and the estimated achieved
occupancy. :func:`launch_shapes` and :func:`launch_resources` keep them, per batch, as
interned JSON text (NO_ID for every other event), answering a batch without any (every
CPU trace) with two C-speed counts. :func:`join_launches` links each device activity to
the runtime/driver call with its correlation id (``TraceModel.launcher``).
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics.trace.categories import DEVICE_ACTIVITY_KINDS, LAUNCHER_KINDS
from tb_diagnostics.trace.columns import constant
from tb_diagnostics.trace.decode import NO_RAW
from tb_diagnostics.trace.interner import Interner
from tb_diagnostics.trace.model import NO_ID


def launch_shapes(intern: Interner, args: list) -> np.ndarray | int:
    """Kernels' ``[grid, block]`` as JSON text, each absent one ``null`` (NO_ID for the
    rest). Only kernels record them: a batch without any (every CPU trace) is answered
    by two C-speed counts, and given as the number of its rows, all NO_ID."""
    n = len(args)
    grids = [a.grid for a in args]
    blocks = [a.block for a in args]
    if grids.count(NO_RAW) == n and blocks.count(NO_RAW) == n:
        return n
    return intern.composed([grids, blocks])


def launch_resources(intern: Interner, args: list) -> np.ndarray | int:
    """Kernels' ``[registers per thread, shared memory, est. achieved occupancy %]`` as
    JSON text, each absent one ``null`` (NO_ID for the rest), with the same C-speed
    answer for a batch without any (the number of its rows)."""
    n = len(args)
    registers = [a.registers for a in args]
    shared = [a.shared_memory for a in args]
    if registers.count(NO_RAW) == n and shared.count(NO_RAW) == n:
        return n
    return intern.composed([registers, shared, [a.occupancy for a in args]])


def join_launches(kind: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """For each device activity, the row of the runtime/driver call with its correlation id."""
    launch_rows = np.flatnonzero(
        np.isin(kind, np.asarray(sorted(LAUNCHER_KINDS), dtype=np.uint8)) & (corr != NO_ID))
    act_rows = np.flatnonzero(
        np.isin(kind, np.asarray(sorted(DEVICE_ACTIVITY_KINDS), dtype=np.uint8))
        & (corr != NO_ID))
    if not launch_rows.size or not act_rows.size:
        return constant(NO_ID, kind.shape[0], np.int32)
    launcher = np.full(kind.shape[0], NO_ID, dtype=np.int32)
    keys = corr[launch_rows]
    # First launcher per correlation id wins (ids are unique per process in practice).
    uniq, first = np.unique(keys, return_index=True)
    pos = np.searchsorted(uniq, corr[act_rows])
    pos = np.minimum(pos, uniq.size - 1)
    hit = uniq[pos] == corr[act_rows]
    launcher[act_rows[hit]] = launch_rows[first[pos[hit]]]
    return launcher
