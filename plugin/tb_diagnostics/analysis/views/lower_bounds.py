"""Which op call bounds the device work no counted op owns.

The cost model prices the ops it knows (:mod:`.op_costs`); the kernels a custom op
launches (vLLM's ``_C::rotary_embedding``, a MoE kernel, a Triton kernel inside a
``torch.library`` op) belong to no priced call. When the op that launched such work,
or the nearest op above it, recorded its tensor shapes, the bytes of those tensors are
a memory lower bound (:mod:`..cost.bounds`) on the work. The op chosen for an activity
is the nearest op at or above its launch that:

- recorded ``Input Dims``, and is not an op the cost model knows (those are priced, or
  say why not) nor a collective (communication, never compute);
- has no counted op inside it (its bytes would count that op's bytes again);
- has no other chosen op inside it (the deepest bound is the tightest: the same rule
  as the counted calls).

Collective kernels are left alone: they are communication.
"""

from __future__ import annotations

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.cost.collectives import COLLECTIVE_KERNEL, is_collective
from tb_diagnostics.analysis.cost.model import family_of
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import climb_ops, launching_op, op_parent


def op_ancestors(up: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """A mask over op positions of every op strictly above any of ``pos`` on the op tree
    ``up`` (:func:`.hierarchy.op_parent`). Each op joins once: the walk stops where an
    earlier chain already went, so its work is the number of ancestors, not the depth
    times the rows."""
    mask = np.zeros(up.shape[0], dtype=bool)
    at = sorted_sets.unique(up[pos]) if pos.size else pos
    at = at[at >= 0]
    while at.size:
        at = at[~mask[at]]
        mask[at] = True
        at = sorted_sets.unique(up[at])
        at = at[at >= 0]
    return mask


def bounding_ops(analysis: SpanAnalysis, owner: np.ndarray, counted: np.ndarray,
                 ) -> np.ndarray:
    """Per device activity (``device_activity_rows`` order), the op row whose lower bound
    it belongs to, or -1 (owned by a counted op, a collective, or nothing to bound)."""
    m = analysis.model
    out = np.full(owner.shape[0], -1, dtype=np.int32)
    free = np.flatnonzero(owner < 0)
    ops = analysis.op_rows
    if not free.size or not ops.size:
        return out
    n = len(m)
    candidate = np.zeros(n, dtype=bool)
    candidate[ops] = m.input_dims[ops] >= 0
    ids, code = m.name_groups(ops)
    names = [m.strings[i] for i in ids.tolist()]
    known = np.asarray([family_of(s) is not None for s in names] or [False])
    comm = np.asarray([is_collective(s) for s in names] or [False])
    candidate[ops[(known | comm)[code]]] = False
    # Only ops can stop the climb below, so only the op tree's ancestors matter here.
    up = op_parent(analysis)
    candidate[ops[op_ancestors(up, np.searchsorted(ops, counted))]] = False
    # A collective op stops the climb too: the work under it is communication.
    collective = np.zeros(n, dtype=bool)
    collective[ops[comm[code]]] = True
    kernel_ids = np.asarray([i for i, s in enumerate(m.strings) if COLLECTIVE_KERNEL.search(s)],
                            dtype=np.int32)
    free = free[~np.isin(m.name[m.device_activity_rows[free]], kernel_ids)]
    at = climb_ops(analysis, launching_op(analysis)[free], candidate | collective)
    at[(at >= 0) & collective[np.maximum(at, 0)]] = -1
    chosen = sorted_sets.unique(at[at >= 0])
    if chosen.size:
        inner_of_another = np.zeros(n, dtype=bool)
        inner_of_another[ops[op_ancestors(up, np.searchsorted(ops, chosen))]] = True
        at[(at >= 0) & inner_of_another[np.maximum(at, 0)]] = -1
    out[free] = at
    return out
