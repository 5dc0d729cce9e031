"""The Operators view: every op of the span (or of one step) grouped by name or by name
and input shapes, with torch-tb-profiler's columns.

Per op call (:func:`op_calls`, once per span):

- *host total*: the call's duration; a group adds only its *outermost* calls (a call
  inside a call of the same group is already in it: recursion counted once, as
  torch-tb-profiler and ``key_averages()`` do);
- *host self*: duration minus the host children's;
- *device self*: device time of the activities the call launched directly (it is the
  innermost op above their runtime call);
- *device total*: device time of every activity launched under the call, directly or by
  the ops it called (summed up the op ancestry of each activity's launcher);
- *stack*: where ``with_stack`` recorded one, a key for "the same call stack": the 2021
  ``Call stack`` string, else a hash of the ``python_function`` frames above the call.

:func:`op_groups` then sums the calls a selection keeps (a step window, the ops under a
module) by group with bincounts: no Python loop over calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import pairs
from tb_diagnostics.analysis.views.hierarchy import innermost_op, launching_op, nearest_marked
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import ROW_CHUNK

GROUPINGS = ("name", "shapes")
#: Calls of a group kept to open (the first ones of the selection, in time order).
ROWS_PER_GROUP = 3
#: Selections whose grouping is kept per span (span and a few steps/modules).
_KEPT = 16


@dataclass(frozen=True)
class OpCalls:
    """Every op call of the span (``analysis.op_rows`` order) with its figures."""

    rows: np.ndarray  # op rows
    window: np.ndarray  # step window index, -1 outside steps
    host_us: np.ndarray  # duration
    host_self_us: np.ndarray
    device_self_us: np.ndarray
    device_total_us: np.ndarray
    nested_name: np.ndarray  # bool: inside a call of the same name
    nested_shapes: np.ndarray  # bool: inside a call of the same name and input dims
    stacks_recorded: bool
    #: The call stack: the distinct int64 keys (sorted) and each call's index among them,
    #: -1 where none was recorded (one sort of the keys, once for every grouping).
    stack_keys: np.ndarray
    stack_code: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.shape[0])


def _nested(analysis: SpanAnalysis, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which op calls run inside an op of the same name, and of the same name and input
    dims: one climb up the op ancestry for both (a chunk of rows at a time)."""
    m = analysis.model
    inner = innermost_op(analysis)
    same_name = np.zeros(ops.shape[0], dtype=bool)
    same_dims = np.zeros(ops.shape[0], dtype=bool)
    for a in range(0, ops.shape[0], ROW_CHUNK):
        part = ops[a:a + ROW_CHUNK]
        names, dims = m.name[part], m.input_dims[part]
        anc = inner[part]
        by_name, by_dims = same_name[a:a + ROW_CHUNK], same_dims[a:a + ROW_CHUNK]
        live = np.flatnonzero(anc >= 0)
        while live.size:
            hit = m.name[anc[live]] == names[live]
            by_name[live] |= hit
            by_dims[live] |= hit & (m.input_dims[anc[live]] == dims[live])
            anc[live] = inner[anc[live]]
            live = live[(anc[live] >= 0) & ~by_dims[live]]
    return same_name, same_dims


def _device_times(analysis: SpanAnalysis, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(self, total) device µs per op call: each activity's time goes to its launching op
    (self) and to every op above that one (total)."""
    m = analysis.model
    # Op positions instead of rows: the sums stay as long as the op list, not the trace.
    pos = np.full(len(m), -1, dtype=np.int32)
    pos[ops] = np.arange(ops.shape[0], dtype=np.int32)
    n = ops.shape[0]
    op_of = launching_op(analysis)
    has = op_of >= 0
    owner = op_of[has]
    dur = m.dur[m.device_activity_rows[has]]
    at = pos[owner]
    keep = at >= 0  # a launcher under a step marker or DataLoader label only: no op
    dev_self = np.bincount(at[keep], weights=dur[keep], minlength=n)
    dev_total = dev_self.copy()
    inner = innermost_op(analysis)
    up = inner[owner]
    live = np.flatnonzero(up >= 0)
    while live.size:
        at = pos[up[live]]
        ok = at >= 0
        dev_total += np.bincount(at[ok], weights=dur[live][ok], minlength=n)
        up[live] = inner[up[live]]
        live = live[up[live] >= 0]
    return dev_self, dev_total


#: The frame hash's multiplier: digest(frame) = digest(frame above) · P + name id + 1.
_HASH_P = np.uint64(1_000_003)


def _chain_digests(names: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Per frame, ``digest = digest[up] * P + names`` (mod 2⁶⁴; 0 above a root frame): the
    hash of its chain of names from the outermost frame, by pointer jumping. Each frame
    keeps ``digest = digest[ptr] * mult + h`` true while ``ptr`` doubles its climb, so a
    chain of depth d takes log2 d passes (``with_stack`` nests frames hundreds deep: one
    pass per level would be seconds on 10⁶ frames)."""
    h = names.astype(np.uint64, copy=True)
    mult = np.full(h.shape[0], _HASH_P, dtype=np.uint64)
    ptr = up.astype(np.int64, copy=True)
    todo = np.flatnonzero(ptr >= 0)
    while todo.size:
        p = ptr[todo]
        # Every right side reads the pass's old values (synchronous jumping); uint64
        # products wrap, as the digest's modulus wants.
        h[todo] = h[p] * mult[todo] + h[todo]
        mult[todo] = mult[p] * mult[todo]
        ptr[todo] = ptr[p]
        todo = todo[ptr[todo] >= 0]
    return h


def _stack_keys(analysis: SpanAnalysis, ops: np.ndarray) -> tuple[np.ndarray, bool]:
    """A call-stack key per op call: the 2021 ``Call stack`` string id (its own, else the
    nearest enclosing op's), else a hash of the ``python_function`` frames' names above
    the call (innermost to outermost), else -1."""
    m = analysis.model
    recorded = m.call_stack >= 0
    key = np.full(ops.shape[0], -1, dtype=np.int64)
    if recorded.any():
        # An op without its own string has its caller's (as pystack.python_stack reads it).
        own = nearest_marked(m.parent, recorded)[ops]
        key = np.where(own >= 0, m.call_stack[np.maximum(own, 0)].astype(np.int64), -1)
    del recorded
    python = m.kind == Kind.PYTHON
    if python.any():
        frame = nearest_marked(m.parent, python)

        def above(rows: np.ndarray) -> np.ndarray:
            par = m.parent[rows]
            return np.where(par >= 0, frame[np.maximum(par, 0)], -1)

        frames = np.flatnonzero(python)
        pos = np.full(len(m), -1, dtype=np.int64)
        pos[frames] = np.arange(frames.shape[0])
        up_frame = above(frames)
        up = np.where(up_frame >= 0, pos[np.maximum(up_frame, 0)], -1)
        digest = _chain_digests(m.name[frames].astype(np.uint64) + np.uint64(1), up)
        inner = above(ops)
        tagged = (digest[pos[np.maximum(inner, 0)]] >> np.uint64(2)).astype(np.int64) \
            | np.int64(1 << 62)  # never a string id
        key = np.where(key >= 0, key, np.where(inner >= 0, tagged, -1))
    return key, bool((key >= 0).any())


@computed
def op_calls(analysis: SpanAnalysis) -> OpCalls:
    m = analysis.model
    ops = analysis.op_rows
    nested_name, nested_shapes = _nested(analysis, ops)
    dev_self, dev_total = _device_times(analysis, ops)
    stack_key, recorded = _stack_keys(analysis, ops)
    # The distinct keys (a hash pass: few beside the calls), then each call's by a binary
    # search among them: cheaper than the argsort of every call a return_inverse takes.
    has = stack_key >= 0
    stack_keys = sorted_sets.unique(stack_key[has])
    stack_code = np.full(stack_key.shape[0], -1, dtype=np.int64)
    stack_code[has] = np.searchsorted(stack_keys, stack_key[has])
    return OpCalls(rows=ops, window=window_of_rows(analysis, ops).astype(np.int64),
                   host_us=m.dur[ops], host_self_us=m.self_time(ops),
                   device_self_us=dev_self, device_total_us=dev_total,
                   nested_name=nested_name, nested_shapes=nested_shapes,
                   stacks_recorded=recorded, stack_keys=stack_keys, stack_code=stack_code)


@dataclass(frozen=True)
class OpGroups:
    """The groups of one selection of op calls; arrays per group."""

    by: str  # "name" or "shapes"
    name_ids: np.ndarray  # string id of the op name
    dims_ids: np.ndarray  # string id of the Input Dims JSON (-1: none; by name: all -1)
    calls: np.ndarray
    host_total_us: np.ndarray
    host_self_us: np.ndarray
    device_total_us: np.ndarray
    device_self_us: np.ndarray
    #: the first calls of each group (rows, in time order): ``first[starts[g]:starts[g+1]]``
    first: np.ndarray
    first_starts: np.ndarray
    #: the most common stack per group: its key (-1 none), how many calls have it, how
    #: many distinct stacks the group has, and one call that has it
    stack_key: np.ndarray
    stack_calls: np.ndarray
    stacks: np.ndarray
    stack_row: np.ndarray

    def __len__(self) -> int:
        return int(self.name_ids.shape[0])

    def first_rows(self, g: int) -> np.ndarray:
        return self.first[self.first_starts[g]:self.first_starts[g + 1]]


@computed
def _kept(analysis: SpanAnalysis) -> dict[tuple, OpGroups]:
    return {}


def op_groups(analysis: SpanAnalysis, by: str = "name", window: int | None = None,
              within: np.ndarray | None = None, within_key: object = None) -> OpGroups:
    """The op calls of the span (``window`` None) or of one step window, optionally only
    those where the boolean ``within`` (over ``op_calls`` order) is set, grouped ``by``
    name or name + input dims. ``within_key`` names ``within`` for the per-span memo
    (None with a ``within``: not kept)."""
    if by not in GROUPINGS:
        raise ValueError(f"group must be one of {', '.join(GROUPINGS)}, not {by!r}")
    kept = _kept(analysis)
    memo = (by, window, within_key) if within is None or within_key is not None else None
    if memo is not None and memo in kept:
        return kept[memo]
    out = _group(analysis, by, window, within)
    if memo is not None:
        if len(kept) >= _KEPT:
            kept.pop(next(iter(kept)))
        kept[memo] = out
    return out


def _group(analysis: SpanAnalysis, by: str, window: int | None,
           within: np.ndarray | None) -> OpGroups:
    m = analysis.model
    c = op_calls(analysis)
    if within is None and window is None:
        idx = None  # the whole span: the columns as they are, no copies
        rows = c.rows
    else:
        sel = np.ones(len(c), dtype=bool) if within is None else within.copy()
        if window is not None:
            sel &= c.window == window
        idx = np.flatnonzero(sel)
        rows = c.rows[idx]

    def take(values: np.ndarray) -> np.ndarray:
        return values if idx is None else values[idx]

    if by == "name":
        # Name ids are small: a lookup table, not a sort (linear time).
        name_ids, gid = m.name_groups(rows)
        dims_ids = np.full(name_ids.shape[0], -1, dtype=np.int64)
    else:
        # Ordered by name id, then dims id (-1: none first), as a sort of the pairs would.
        name_ids, dims_ids, gid = pairs(m.name[rows].astype(np.int64),
                                        m.input_dims[rows].astype(np.int64))
    n = name_ids.shape[0]
    outer = ~take(c.nested_shapes if by == "shapes" else c.nested_name)

    def total(values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        v = take(values) if mask is None else np.where(mask, take(values), 0.0)
        return np.bincount(gid, weights=v, minlength=n)

    first, first_starts = _first_calls(gid, n)
    stack = _stack_modes(take(c.stack_code), c.stack_keys, gid, n, rows)
    return OpGroups(by=by, name_ids=name_ids.astype(np.int64), dims_ids=dims_ids,
                    calls=np.bincount(gid, minlength=n),
                    host_total_us=total(c.host_us, outer), host_self_us=total(c.host_self_us),
                    device_total_us=total(c.device_total_us, outer),
                    device_self_us=total(c.device_self_us),
                    first=rows[first].astype(np.int64), first_starts=first_starts, **stack)


def _first_calls(gid: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first :data:`ROWS_PER_GROUP` positions of each group (positions are in time
    order), grouped: ``(positions, starts)``. A pass per kept call picks every group's
    earliest call not yet picked, so no sort of all the calls is needed."""
    size = gid.shape[0]
    taken = np.zeros(size, dtype=bool)
    picks = []
    for _ in range(ROWS_PER_GROUP):
        cand = np.flatnonzero(~taken)
        if not cand.size:
            break
        best = np.full(n, size, dtype=np.int64)
        np.minimum.at(best, gid[cand], cand)
        best = best[best < size]
        taken[best] = True
        picks.append(best)
    pos = np.concatenate(picks) if picks else np.zeros(0, dtype=np.int64)
    pos = pos[np.lexsort((pos, gid[pos]))]
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(gid[pos], minlength=n), out=starts[1:])
    return pos, starts


def _stack_modes(code: np.ndarray, keys: np.ndarray, gid: np.ndarray, n: int,
                 rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per group: its most common stack key, that key's calls, the distinct keys, one
    call with it (calls without a stack, ``code`` -1, are not counted). ``code`` indexes
    ``keys``; the (group, stack) pairs are found without a sort where their range allows."""
    out = {"stack_key": np.full(n, -1, dtype=np.int64), "stack_calls": np.zeros(n, np.int64),
           "stacks": np.zeros(n, np.int64), "stack_row": np.full(n, -1, dtype=np.int64)}
    has = np.flatnonzero(code >= 0)
    if not has.size:
        return out
    g, k, pair = pairs(gid[has].astype(np.int64), code[has])
    counts = np.bincount(pair, minlength=g.shape[0])
    first = np.full(g.shape[0], has.size, dtype=np.int64)
    np.minimum.at(first, pair, np.arange(has.size))
    k = keys[k]
    out["stacks"] = np.bincount(g, minlength=n)
    # Most common first within each group (ties: the earlier call's stack).
    order = np.lexsort((first, -counts, g))
    lead = np.ones(order.shape[0], dtype=bool)
    lead[1:] = g[order][1:] != g[order][:-1]
    best = order[lead]
    out["stack_key"][g[best]] = k[best]
    out["stack_calls"][g[best]] = counts[best]
    out["stack_row"][g[best]] = rows[has[first[best]]]
    return out
