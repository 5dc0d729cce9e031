"""The Kernels view: every kernel of the span (or of one step) grouped by name, or by name
and the op that launched it, with its launch configuration and occupancy.

Per kernel (:func:`kernel_calls`, once per span): its step window, launching op, launch
configuration (grid, block, registers per thread, shared memory, the device it ran on: one
code per distinct combination, parsed once), precision and whether it ran on Tensor Cores.

- *precision*: the roofline's for the op group that owns the kernel (input types, fp32
  refined to tf32 by the kernel's name), else what the kernel's name gives away;
- *Tensor Cores*: the kernel's name is a Tensor Core kernel's (cuBLAS/CUTLASS/cuDNN
  ``tensorop``/``s1688``/``h884``…, ``wmma``/``xmma``/``wgmma``/``mma``, tf32, Hopper
  ``nvjet``, FlashAttention, ROCm ``mfma``); ``simt`` kernels run on the CUDA cores;
- *occupancy*: as the trace records it (Kineto's estimate, capped by the grid), and the
  theoretical limit of the configuration on the part (:mod:`..cost.occupancy`).

:func:`kernel_groups` sums a selection's kernels by group with bincounts and sorts; the
only Python loops are over distinct configurations and names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.cost.occupancy import (
    Occupancy,
    SmLimits,
    sm_limits,
    theoretical_occupancy,
)
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import pairs
from tb_diagnostics.analysis.views.hierarchy import launching_op
from tb_diagnostics.analysis.views.roofline import KERNEL_PRECISION, TF32_KERNEL, roofline
from tb_diagnostics.trace.categories import Kind

GROUPINGS = ("name", "op")
#: Kernels (and launching ops) of a group kept to open, the first ones in time order.
ROWS_PER_GROUP = 3
#: Selections whose grouping is kept per span.
_KEPT = 16

TENSOR_CORE_KERNEL = re.compile(
    r"tensorop|wmma|xmma|wgmma|hmma|imma|mma_|_mma|s1688|s16816|s161616|h884|h1688|h16816|"
    r"i8816|i16832|tf32|nvjet|flash_fwd|flash_bwd|fmha|mfma", re.I)
CUDA_CORE_KERNEL = re.compile(r"simt|sgemm|dgemm|gemv", re.I)


def is_tensor_core_kernel(name: str) -> bool:
    """Whether a kernel of this name runs on Tensor Cores (its library's naming)."""
    return bool(TENSOR_CORE_KERNEL.search(name)) and not CUDA_CORE_KERNEL.search(name)


def names_matching(names: list[str], pattern: re.Pattern[str]) -> np.ndarray:
    """Which of ``names`` the pattern finds something in: one scan of them joined by
    newlines (which no pattern here matches) instead of a search per name."""
    if not names:
        return np.zeros(0, dtype=bool)
    ends = np.cumsum([len(n) + 1 for n in names])
    hits = [m.start() for m in pattern.finditer("\n".join(names))]
    out = np.zeros(len(names), dtype=bool)
    out[np.searchsorted(ends, np.asarray(hits, dtype=np.int64), side="right")] = True
    return out


@dataclass(frozen=True)
class LaunchConfig:
    """One distinct launch configuration (as the trace records it) on one device."""

    grid: list[int] | None
    block: list[int] | None
    registers_per_thread: int | None
    shared_memory_bytes: int | None  # static + dynamic, as Kineto adds them
    occupancy_pct: float | None  # recorded: Kineto's est. achieved occupancy %
    device: int
    blocks_per_sm: float | None  # grid blocks / the part's SMs
    theoretical: Occupancy | None
    why_not: str | None  # why there is no theoretical figure


@dataclass(frozen=True)
class KernelCalls:
    """Every kernel of the span, in start order."""

    rows: np.ndarray  # kernel rows
    window: np.ndarray  # step window index, -1 outside steps
    op: np.ndarray  # launching op row, -1 where none is in the trace
    config: np.ndarray  # int32 index into ``configs``
    configs: list[LaunchConfig]
    precision: np.ndarray  # int8 index into ``precisions``, -1 unknown
    precisions: list[str]
    tensor_core: np.ndarray  # bool
    limits: SmLimits | str  # of the part most kernels ran on, or why there are none

    def __len__(self) -> int:
        return int(self.rows.shape[0])


def _ints(v: Any, n: int | None = None) -> list[int] | None:
    if not isinstance(v, list) or (n is not None and len(v) != n):
        return None
    if not all(type(x) is int and x >= 0 for x in v):
        return None
    return v


def _number(v: Any) -> float | None:
    return float(v) if type(v) in (int, float) and np.isfinite(v) else None


def _parse(text: str | None) -> list[Any]:
    try:
        v = json.loads(text) if text else None
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def _config(shape: str | None, resources: str | None, device: int,
            limits_of: dict[int, SmLimits | str], props_of: dict[int, dict]) -> LaunchConfig:
    gb = _parse(shape)
    grid = _ints(gb[0], 3) if len(gb) == 2 else None
    block = _ints(gb[1], 3) if len(gb) == 2 else None
    res = _parse(resources) + [None] * 3
    regs, smem, occ = _number(res[0]), _number(res[1]), _number(res[2])
    limits = limits_of[device]
    sms = (props_of.get(device) or {}).get("numSms")
    bps = (float(np.prod(grid)) / sms if grid is not None and type(sms) is int and sms > 0
           else None)
    theo, why = None, None
    if isinstance(limits, str):
        why = limits
    elif block is None or regs is None or smem is None:
        why = "the trace does not record this kernel's block, registers and shared memory"
    else:
        theo = theoretical_occupancy(limits, int(np.prod(block)), int(regs), int(smem))
    return LaunchConfig(grid=grid, block=block,
                        registers_per_thread=None if regs is None else int(regs),
                        shared_memory_bytes=None if smem is None else int(smem),
                        occupancy_pct=occ, device=device, blocks_per_sm=bps,
                        theoretical=theo, why_not=why)


def _precisions(analysis: SpanAnalysis, is_k: np.ndarray, names: np.ndarray,
                ) -> tuple[np.ndarray, list[str]]:
    """Per kernel, its precision: the roofline's for its op group, else its name's."""
    m = analysis.model
    rf = roofline(analysis)
    by_group = [f.precision for f in rf.figures]
    found: list[str] = []
    code_of: dict[str, int] = {}

    def code(p: str | None) -> int:
        if p is None:
            return -1
        if p not in code_of:
            code_of[p] = len(found)
            found.append(p)
        return code_of[p]

    group_code = np.asarray([code(p) for p in by_group] + [-1], dtype=np.int16)
    g = (rf.activity_group[is_k] if rf.activity_group.shape[0] == is_k.shape[0]
         else np.full(names.shape, -1))
    out = group_code[np.where(g >= 0, g, len(by_group))]
    ids, inverse = np.unique(names, return_inverse=True)
    texts = [m.strings[int(i)] for i in ids.tolist()]
    # The first precision of the list whose pattern the name matches.
    for_name = np.full(len(texts) + 1, -1, dtype=np.int16)
    for p, pat in reversed(KERNEL_PRECISION):
        for_name[:-1][names_matching(texts, pat)] = code(p)
    by_name = for_name[inverse] if ids.size else np.zeros(0, dtype=np.int16)
    # A group's fp32 runs as TF32 in a TF32 kernel, whatever the group says overall.
    tf32 = (names_matching(texts, TF32_KERNEL)[inverse] if ids.size
            else np.zeros(0, dtype=bool))
    out = np.where(out >= 0, out, by_name)
    if tf32.any():
        out = np.where(tf32 & (out == code_of.get("fp32", -2)), code("tf32"), out)
    return out.astype(np.int8), found


@computed
def kernel_calls(analysis: SpanAnalysis) -> KernelCalls:
    m = analysis.model
    acts = m.device_activity_rows
    is_k = m.kind[acts] == Kind.KERNEL
    rows = acts[is_k]
    window = (analysis.activity_step[is_k] if len(analysis.host_steps)
              else np.zeros(rows.shape[0], dtype=np.int64))
    op = launching_op(analysis)[is_k] if rows.size else np.zeros(0, dtype=np.int64)
    props = m.meta.device_properties
    device = np.maximum(m.device[rows], -1).astype(np.int64)
    used = m.used_device_properties
    props_of = {int(p["id"]): p for p in props if type(p.get("id")) is int}
    devices = sorted_sets.unique(device).tolist()
    for d in devices:  # a device without its own entry: the one most kernels ran on
        props_of.setdefault(d, used or {})
    limits_of = {d: sm_limits(props_of[d]) for d in devices}
    # One code per distinct (grid/block, resources, device).
    res_dev, dev, res_code = pairs(m.launch_resources[rows].astype(np.int64), device)
    shape, pair, inverse = pairs(m.launch_shape[rows].astype(np.int64), res_code)
    configs = [_config(m.string(s), m.string(int(res_dev[p])), int(dev[p]), limits_of,
                       props_of) for s, p in zip(shape.tolist(), pair.tolist(), strict=True)]
    names = m.name[rows]
    precision, precisions = _precisions(analysis, is_k, names) if rows.size else (
        np.zeros(0, dtype=np.int8), [])
    ids, name_inv = np.unique(names, return_inverse=True)
    texts = [m.strings[int(i)] for i in ids.tolist()]
    tc = names_matching(texts, TENSOR_CORE_KERNEL) & ~names_matching(texts, CUDA_CORE_KERNEL)
    tensor_core = tc[name_inv] if rows.size else np.zeros(0, dtype=bool)
    if "tf32" in precisions:  # a TF32 product is a Tensor Core one whatever its name says
        tensor_core = tensor_core | (precision == precisions.index("tf32"))
    return KernelCalls(rows=rows, window=np.asarray(window, dtype=np.int64), op=op,
                       config=inverse.reshape(-1).astype(np.int32), configs=configs,
                       precision=precision, precisions=precisions, tensor_core=tensor_core,
                       limits=sm_limits(used) if used is not None
                       else "the trace records no deviceProperties")


@dataclass(frozen=True)
class KernelGroups:
    """A selection's kernels summed by group (name, or name and launching op)."""

    name_ids: np.ndarray  # kernel name string id per group
    op_name_ids: np.ndarray  # launching op's name id per group (group=op), -1 none/name
    calls: np.ndarray
    total_us: np.ndarray
    min_us: np.ndarray
    max_us: np.ndarray
    selection_us: float  # all the selection's kernel time (the share's denominator)
    members: np.ndarray  # indices into KernelCalls, grouped: members[starts[g]:starts[g+1]]
    starts: np.ndarray
    config: np.ndarray  # the group's commonest configuration (by calls)
    configs: np.ndarray  # distinct configurations in the group
    config_calls: np.ndarray  # calls with the commonest one
    precision: np.ndarray  # by device time, -1 unknown
    tensor_core_calls: np.ndarray

    def __len__(self) -> int:
        return int(self.name_ids.shape[0])


def _commonest(group: np.ndarray, value: np.ndarray, weight: np.ndarray | None,
               n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: the value with the largest weight (count when None), its weight, and how
    many distinct values the group has."""
    if not group.size:
        z = np.zeros(n, dtype=np.int64)
        return z - 1, z, z
    pg, pv, inv = pairs(group.astype(np.int64), value.astype(np.int64))
    w = np.bincount(inv, weights=weight, minlength=pg.shape[0])
    # The pairs come ordered by group, then value: per group's run of pairs, its largest
    # weight, and the first pair that has it (the smallest value among ties). No sort.
    starts = np.flatnonzero(np.r_[True, pg[1:] != pg[:-1]])
    top = np.repeat(np.maximum.reduceat(w, starts), np.diff(np.r_[starts, pg.shape[0]]))
    at_top = np.flatnonzero(w == top)
    lead = at_top[np.searchsorted(at_top, starts)]
    best = np.full(n, -1, dtype=np.int64)
    best_w = np.zeros(n)
    best[pg[starts]] = pv[lead]
    best_w[pg[starts]] = w[lead]
    return best, best_w, np.bincount(pg, minlength=n)


def kernel_groups(analysis: SpanAnalysis, by: str, window: int | None) -> KernelGroups:
    """The kernels of step ``window`` (None: the span) by ``by`` (one of GROUPINGS);
    memoized per span for a few selections."""
    cache = analysis._computed.setdefault(kernel_groups, {})
    key = (by, window)
    if key not in cache:
        if len(cache) >= _KEPT:
            cache.pop(next(iter(cache)))
        cache[key] = _groups(analysis, by, window)
    return cache[key]


def _groups(analysis: SpanAnalysis, by: str, window: int | None) -> KernelGroups:
    m = analysis.model
    kc = kernel_calls(analysis)
    sel = np.flatnonzero(kc.window == window) if window is not None else np.arange(len(kc))
    rows = kc.rows[sel]
    names = m.name[rows].astype(np.int64)
    op_names = np.full(rows.shape[0], -1, dtype=np.int64)
    if by == "op":
        op = kc.op[sel]
        op_names = np.where(op >= 0, m.name[np.maximum(op, 0)], -1).astype(np.int64)
    group_names, group_ops, inverse = pairs(names, op_names)
    n = group_names.shape[0]
    dur = m.dur[rows]
    # By group, then in time order: the kernels are in time order already, so a stable
    # sort of the group ids alone (one key, not lexsort's two).
    order = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[order], np.arange(n + 1))
    sorted_dur = dur[order]
    lo = np.minimum.reduceat(sorted_dur, starts[:-1]) if n else np.zeros(0)
    hi = np.maximum.reduceat(sorted_dur, starts[:-1]) if n else np.zeros(0)
    config, config_calls, n_configs = _commonest(inverse, kc.config[sel], None, n)
    prec_rows = kc.precision[sel].astype(np.int64)
    known = prec_rows >= 0
    precision, _, _ = _commonest(inverse[known], prec_rows[known], dur[known], n)
    return KernelGroups(
        name_ids=group_names, op_name_ids=group_ops,
        calls=np.bincount(inverse, minlength=n), total_us=np.bincount(inverse, dur, n),
        min_us=lo, max_us=hi, selection_us=float(dur.sum()), members=sel[order],
        starts=starts, config=config, configs=n_configs,
        config_calls=config_calls.astype(np.int64), precision=precision,
        tensor_core_calls=np.bincount(inverse, kc.tensor_core[sel].astype(np.int64), n))


def group_streams(analysis: SpanAnalysis, g: KernelGroups, i: int) -> list[int]:
    """The streams group ``i``'s kernels ran on, in order."""
    kc = kernel_calls(analysis)
    rows = kc.rows[g.members[g.starts[i]:g.starts[i + 1]]]
    return sorted(set(analysis.model.stream[rows].tolist()))
