"""Which op calls carry the step's FLOPs and bytes, and which device work is theirs.

``record_shapes`` writes each op call's argument shapes, so the cost model can price
every call. A product is recorded at several levels (``aten::linear`` →
``aten::addmm``; ``aten::conv2d`` → … → ``aten::cudnn_convolution``), and counting
each level would count it several times. The call that is *counted* is the deepest
one the model knows: a known op is not counted when a known op of the same kind runs
inside it. The products (matmul, convolution, attention) are one kind, as SDPA's math
path runs as ``bmm``s; every memory-side family (elementwise, reduction, norm,
softmax, copies…) is its own, so the copy a product or a reduction makes on the
side (the ``Memcpy DtoD`` bias seed of an ``addmm``, a ``sum``'s dtype cast) counts
as well: it is work of its own.

Each device activity belongs to the counted call nearest above the op that launched
it. Device work no counted call owns gets, where the op that launched it recorded its
shapes, a group of its own whose cost is a memory lower bound (:mod:`.lower_bounds`).
On a CPU-only trace the counted calls are themselves the work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.cost.bounds import memory_lower_bound
from tb_diagnostics.analysis.cost.formula import OpCost
from tb_diagnostics.analysis.cost.model import NO_SHAPES, family_of, op_cost
from tb_diagnostics.analysis.cost.shapes import ITEMSIZE, OpArgs
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.hierarchy import (
    climb_ops,
    launching_op,
    nearest_marked,
    op_parent,
)
from tb_diagnostics.analysis.views.lower_bounds import bounding_ops
from tb_diagnostics.trace.model import NO_ID

#: The kinds of the nesting rule: products are one kind, each other family its own.
_KINDS = ("product", "elementwise", "reduction", "softmax", "norm", "embedding", "memory")
_PRODUCTS = frozenset({"matmul", "conv", "attention"})
#: Above this many combinations of (name, shapes, types, concretes) the groups are
#: found by sorting; below it a presence table does it in linear time.
_DENSE_LIMIT = 1 << 23


@dataclass(frozen=True)
class OpGroup:
    """Calls of one op with the same recorded arguments."""

    name: str
    input_dims: str | None  # the recorded JSON text
    input_types: str | None
    concrete_inputs: str | None
    cost: OpCost | None  # per call
    reason: str | None  # why there is no cost


@dataclass(frozen=True)
class OpCosts:
    """The counted op calls, their groups, and the device activity each group owns."""

    groups: list[OpGroup]
    rows: np.ndarray  # int32 counted op rows and those bounding unowned work, ascending
    group: np.ndarray  # int32 group index of each of ``rows``
    activity_group: np.ndarray  # per device activity (or per counted row, CPU-only), or -1
    activity_owner: np.ndarray  # the counted op row each of those belongs to, or -1
    shapes_recorded: bool

    def flops_per_row(self) -> np.ndarray:
        per_group = np.asarray([g.cost.flops if g.cost else 0.0 for g in self.groups])
        return per_group[self.group] if self.groups else np.zeros(0)


def _dense(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes 0..n-1 for the distinct values of a small-int column (ids ≥ -1)."""
    shifted = values.astype(np.int64) + 1
    present = np.zeros(int(shifted.max()) + 1 if shifted.size else 1, dtype=bool)
    present[shifted] = True
    code = np.cumsum(present) - 1
    return code[shifted], int(present.sum())


def _group_rows(m, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group index of each row, one representative row per group)."""
    key = np.zeros(rows.shape[0], dtype=np.int64)
    span = 1
    for column in (m.name, m.input_dims, m.input_types, m.concrete_inputs):
        code, n = _dense(column[rows])
        key = key * n + code
        span *= n
    if span <= _DENSE_LIMIT:
        present = np.zeros(span, dtype=bool)
        present[key] = True
        code = np.cumsum(present) - 1
        inverse = code[key].astype(np.int32)
        first = np.full(int(present.sum()), -1, dtype=np.int64)
        # The first row of each group, in one reversed scatter (later writes win).
        first[inverse[::-1]] = np.arange(rows.shape[0] - 1, -1, -1)
        return inverse, rows[first]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return inverse.astype(np.int32), rows[first]


def _default_itemsize(m, rows: np.ndarray) -> int:
    """The element size of the span's commonest floating dtype (for TensorList members,
    whose dtype the trace does not write)."""
    counts = np.bincount(m.input_types[rows].astype(np.int64) + 1)  # ids ≥ -1, few
    for code in np.argsort(-counts, kind="stable")[:20].tolist():
        if counts[code] == 0:
            break
        text = m.string(code - 1) or ""
        for t in ("c10::BFloat16", "c10::Half", "float", "double"):
            if f'"{t}"' in text:
                return ITEMSIZE[t]
    return 4


@computed
def op_costs(analysis: SpanAnalysis) -> OpCosts:
    m = analysis.model
    ops = analysis.op_rows
    name_ids, code = m.name_groups(ops)
    fam = [family_of(m.strings[i]) for i in name_ids.tolist()]
    leaf_kind = np.asarray([0 if f is None else 1 + _KINDS.index("product" if f in _PRODUCTS
                                                                  else f) for f in fam],
                           dtype=np.int8)
    row_kind = leaf_kind[code] if ops.size else np.zeros(0, dtype=np.int8)
    shapes_recorded = bool((m.input_dims[ops] >= 0).any()) if ops.size else False
    n = len(m)

    # A known op with a known op of its kind inside it is not counted: each known op
    # marks the nearest op of its kind above it, found on the op tree (op positions) by
    # pointer jumping, log(op depth) passes however deep the Python frames between are.
    up = op_parent(analysis)
    inside = np.zeros(ops.shape[0], dtype=bool)
    for kind in range(1, len(_KINDS) + 1):
        mask = row_kind == kind
        if not mask.any():
            continue
        start = up[mask]
        start = start[start >= 0]
        above = nearest_marked(up, mask)[start]
        inside[above[above >= 0]] = True
    counted = ops[(row_kind > 0) & ~inside]

    group, reps = _group_rows(m, counted) if counted.size else (
        np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64))
    itemsize = _default_itemsize(m, counted) if counted.size else 4
    groups = [_group(m, r, op_cost, itemsize, shapes_recorded) for r in reps.tolist()]

    group_of_row = np.full(n, NO_ID, dtype=np.int32)
    group_of_row[counted] = group
    if analysis.cpu_only:
        return OpCosts(groups=groups, rows=counted, group=group, activity_group=group.copy(),
                       activity_owner=counted.astype(np.int32),
                       shapes_recorded=shapes_recorded)
    owner = climb_ops(analysis, launching_op(analysis), group_of_row >= 0)
    if shapes_recorded:
        # Device work no priced op owns: a memory lower bound from the op that launched it.
        bound = bounding_ops(analysis, owner, counted)
        rows = unique(bound[bound >= 0])  # a sort: the hash path is slow on many rows
        if rows.size:
            b_group, b_reps = _group_rows(m, rows)
            group_of_row[rows] = b_group + len(groups)
            groups += [_group(m, r, _bound_cost, itemsize, True) for r in b_reps.tolist()]
            owner = np.where(bound >= 0, bound, owner).astype(np.int32)
            all_rows = np.concatenate([counted, rows])
            order = np.argsort(all_rows, kind="stable")
            counted = all_rows[order]
            group = group_of_row[counted]
    activity_group = np.where(owner >= 0, group_of_row[np.maximum(owner, 0)], NO_ID)
    return OpCosts(groups=groups, rows=counted, group=group,
                   activity_group=activity_group.astype(np.int32),
                   activity_owner=owner, shapes_recorded=shapes_recorded)


def _bound_cost(name: str, args: OpArgs | None, itemsize: int) -> OpCost | str:
    return memory_lower_bound(args, itemsize)


def _group(m, r: int, price, itemsize: int, shapes_recorded: bool) -> OpGroup:
    """The group of representative row ``r``, priced by ``price(name, args, itemsize)``;
    a lower-bound cost keeps the reason it is only a bound."""
    dims, types, conc = (m.string(int(c[r])) for c in
                         (m.input_dims, m.input_types, m.concrete_inputs))
    args = OpArgs.parse(dims, types, conc) if dims else None
    cost = price(m.name_of(r), args, itemsize)
    if isinstance(cost, str) and cost == NO_SHAPES and shapes_recorded:
        cost = "this call's shapes were not recorded"
    if isinstance(cost, str):
        return OpGroup(name=m.name_of(r), input_dims=dims, input_types=types,
                       concrete_inputs=conc, cost=None, reason=cost)
    return OpGroup(name=m.name_of(r), input_dims=dims, input_types=types,
                   concrete_inputs=conc, cost=cost, reason=cost.why)
