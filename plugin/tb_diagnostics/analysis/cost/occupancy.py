"""Theoretical occupancy of a kernel launch: how many of an SM's warp slots its blocks can
fill, given its block size, registers per thread and shared memory per block.

The rules are the CUDA occupancy calculator's (``cuda_occupancy.h``,
``cudaOccMaxActiveBlocksPerMultiprocessor``): the resident blocks per SM are the least of

- *warps*: the SM's warp slots / the block's warps (rounded up to whole warps);
- *registers*: registers are allocated per warp, ``regs/thread × warp size`` rounded up to
  the allocation unit (256), in each of the SM's 4 sub-partitions; the warps that fit are
  ``(regs per SM / 4) // regs per warp × 4``, the blocks that fit those // warps per block.
  A block over the per-block register file, or a thread over 255 registers, cannot launch;
- *shared memory*: per block its static + dynamic bytes plus what the driver reserves per
  block (1 KB from compute capability 8.0), rounded up to the allocation unit (128 B from
  8.0, 256 B before); the SM's shared memory // that. A block over the per-block limit (the
  opt-in maximum, ``sharedMemPerBlockOptin``, that a kernel asking for more than the 48 KB
  default must have set) cannot launch;
- *blocks*: the SM's resident block limit.

Occupancy = resident blocks × warps per block / the SM's warp slots. It ignores the grid:
a grid of fewer blocks than ``resident blocks × SMs`` does not fill it (the profiler's
``est. achieved occupancy %`` is capped by ``blocks per SM`` for that reason, and it uses
the 48 KB default per-block limit, so it reads 0 for a kernel that opted in to more).

The device's figures come from the trace's ``deviceProperties`` where it records them;
what it never records (resident blocks per SM, allocation units, reserved shared memory)
and any property it lacks come from the compute capability's documented values: the CUDA
C++ Programming Guide, "Technical Specifications per Compute Capability"
(docs.nvidia.com/cuda/cuda-c-programming-guide/#features-and-technical-specifications), and
the allocation units of ``cuda_occupancy.h``. The rules reproduce Kineto's recorded estimate
exactly on every kernel of the shared V100 (7.0), A100 (8.0) and H100 (9.0) traces. An
unknown compute capability gets no figure: a guessed SM would give a number the reader
believes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

KB = 1024

#: Per compute capability (major, minor): resident blocks per SM, warp slots per SM, shared
#: memory per SM and the opt-in maximum per block (bytes), 32-bit registers per block.
#:
#: Sources, checked value by value:
#:
#: - 7.5 to 12.x: the CUDA Programming Guide, "Compute Capabilities", Table 30 "Device and
#:   Streaming Multiprocessor (SM) Information per Compute Capability" (resident blocks 16 /
#:   32 / 16 / 16 / 24 / 32 / 32 / 32 / 24 / 24 and warps 32 / 64 / 48 / 48 / 48 / 64 / 64 /
#:   64 / 48 / 48 for 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 11.0, 12.x) and Table 31
#:   "Memory Information per Compute Capability" (64 K registers per SM and per block; shared
#:   memory per SM / per block 64/64, 164/163, 100/99, 164/163, 100/99 KB, 228/227 KB for 9.0,
#:   10.x and 11.0, 100/99 KB for 12.x),
#:   docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html; the
#:   legacy CUDA C++ Programming Guide's Table 27 (same figures, 7.5 to 12.0),
#:   docs.nvidia.com/cuda/cuda-c-programming-guide/#features-and-technical-specifications.
#: - 5.x to 7.2, which those tables no longer list: the legacy guide's architecture sections
#:   (shared memory 64 KB on 5.0, 5.3, 6.0 and 6.2, 96 KB on 5.2, 6.1 and 7.0/7.2 Volta; a
#:   block may address all 96 KB on Volta, 48 KB before it), cuda_occupancy.h's
#:   cudaOccMaxBlocksPerMultiprocessor (32 resident blocks for majors 5 and 6 and for 7.x
#:   other than Turing's 16), and the guide's 6.1 column as reproduced at
#:   ashburnlee.github.io (64 warps, 64 K registers per SM and per block). The 32 K registers
#:   per block of 5.3 and 6.2 (Tegra) are the older guide's figure, not re-read here.
#: - 11.0 (Jetson Thor) pairs 228 KB of shared memory with 48 warps and 24 blocks: Table 30
#:   groups it with 12.x, Table 31 with 9.0 and 10.x.
#:
#: The Kineto estimate reproduces exactly on every kernel of the shared traces at 7.0, 8.0
#: and 9.0 (tests/test_occupancy.py); the other rows rest on the tables above.
_CC_TABLE: dict[tuple[int, int], tuple[int, int, int, int, int]] = {
    (5, 0): (32, 64, 64 * KB, 48 * KB, 64 * KB),
    (5, 2): (32, 64, 96 * KB, 48 * KB, 64 * KB),
    (5, 3): (32, 64, 64 * KB, 48 * KB, 32 * KB),
    (6, 0): (32, 64, 64 * KB, 48 * KB, 64 * KB),
    (6, 1): (32, 64, 96 * KB, 48 * KB, 64 * KB),
    (6, 2): (32, 64, 64 * KB, 48 * KB, 32 * KB),
    (7, 0): (32, 64, 96 * KB, 96 * KB, 64 * KB),
    (7, 2): (32, 64, 96 * KB, 96 * KB, 64 * KB),
    (7, 5): (16, 32, 64 * KB, 64 * KB, 64 * KB),
    (8, 0): (32, 64, 164 * KB, 163 * KB, 64 * KB),
    (8, 6): (16, 48, 100 * KB, 99 * KB, 64 * KB),
    (8, 7): (16, 48, 164 * KB, 163 * KB, 64 * KB),
    (8, 9): (24, 48, 100 * KB, 99 * KB, 64 * KB),
    (9, 0): (32, 64, 228 * KB, 227 * KB, 64 * KB),
    (10, 0): (32, 64, 228 * KB, 227 * KB, 64 * KB),
    (10, 3): (32, 64, 228 * KB, 227 * KB, 64 * KB),
    (11, 0): (24, 48, 228 * KB, 227 * KB, 64 * KB),
    (12, 0): (24, 48, 100 * KB, 99 * KB, 64 * KB),
    (12, 1): (24, 48, 100 * KB, 99 * KB, 64 * KB),
}
REGS_PER_SM = 64 * KB  # every capability in the table
MAX_REGS_PER_THREAD = 255
DEFAULT_SMEM_PER_BLOCK = 48 * KB  # without the opt-in attribute
#: Registers are allocated per warp in units of 256 on every major from 3 on
#: (cuda_occupancy.h, cudaOccRegAllocationGranularity); shared memory in units of 256 bytes
#: up to major 7 and 128 from 8 on (cudaOccSMemAllocationGranularity); 4 register
#: sub-partitions per SM except 2 on 6.0 (cudaOccSubPartitionsPerMultiprocessor); from 8.0
#: the driver reserves 1 KB of shared memory per block (cudaOccSMemPerBlock adds
#: reservedSharedMemPerBlock; the guide: "The 1 KB of shared memory not made available to a
#: thread block is reserved for system use").
REG_ALLOCATION_UNIT = 256
WARP_SIZE = 32


@dataclass(frozen=True)
class SmLimits:
    """One part's per-SM limits, and which of them the trace recorded."""

    cc: tuple[int, int]
    warp_size: int
    max_warps: int
    max_blocks: int
    regs_per_sm: int
    regs_per_block: int
    sub_partitions: int
    smem_per_sm: int
    smem_per_block: int  # the default per-block limit
    smem_per_block_optin: int
    smem_unit: int
    smem_reserved: int  # per block, by the driver
    from_trace: tuple[str, ...]  # the deviceProperties keys that were used

    @property
    def cc_text(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"


def _prop(props: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = props.get(k)
        if type(v) in (int, float) and v > 0:
            return int(v)
    return None


def sm_limits(props: dict[str, Any] | None) -> SmLimits | str:
    """The limits of the part ``props`` (a ``deviceProperties`` entry) describes, or why
    there are none."""
    if not props:
        return "the trace records no deviceProperties"
    major, minor = _prop(props, "computeMajor"), props.get("computeMinor")
    name = str(props.get("name", ""))
    if "gcnArchName" in props or any(w in name for w in ("AMD", "Radeon", "Instinct")):
        return f"{name or 'this device'} is not an NVIDIA GPU: no CUDA occupancy rules"
    if major is None or type(minor) is not int:
        return "deviceProperties has no compute capability"
    cc = (major, minor)
    row = _CC_TABLE.get(cc)
    if row is None:
        return f"compute capability {major}.{minor} is not in the occupancy table"
    max_blocks, max_warps, smem_sm, smem_optin, regs_block = row
    used: list[str] = []

    def take(default: int, *keys: str) -> int:
        v = _prop(props, *keys)
        if v is None:
            return default
        used.append(keys[0])
        return v

    warp = take(WARP_SIZE, "warpSize")
    threads = take(max_warps * warp, "maxThreadsPerMultiprocessor")
    return SmLimits(
        cc=cc, warp_size=warp, max_warps=threads // warp,
        max_blocks=take(max_blocks, "maxBlocksPerMultiProcessor"),
        regs_per_sm=take(REGS_PER_SM, "regsPerMultiprocessor"),
        regs_per_block=take(regs_block, "regsPerBlock"),
        sub_partitions=2 if cc == (6, 0) else 4,
        smem_per_sm=take(smem_sm, "sharedMemPerMultiprocessor",
                         "maxSharedMemoryPerMultiProcessor"),
        smem_per_block=take(DEFAULT_SMEM_PER_BLOCK, "sharedMemPerBlock"),
        smem_per_block_optin=take(smem_optin, "sharedMemPerBlockOptin"),
        smem_unit=128 if major >= 8 else 256,
        smem_reserved=take(KB if major >= 8 else 0, "reservedSharedMemPerBlock"),
        from_trace=tuple(used))


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM of one launch configuration, and what limits them."""

    blocks: int  # resident blocks per SM (0: the block cannot launch)
    warps_per_block: int
    pct: float  # resident warps / the SM's warp slots, in %
    limited_by: tuple[str, ...]  # of "warps", "registers", "shared memory", "blocks"
    #: The blocks each resource alone allows (None: that resource does not limit).
    by_warps: int
    by_registers: int | None
    by_shared_memory: int | None


def _up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def theoretical_occupancy(limits: SmLimits, threads_per_block: int, regs_per_thread: int,
                          smem_bytes: int, *, opt_in: bool = True) -> Occupancy | None:
    """The occupancy calculator's answer for a block of ``threads_per_block`` threads using
    ``regs_per_thread`` registers each and ``smem_bytes`` of shared memory (static +
    dynamic). ``opt_in``: the block may use up to the opt-in per-block maximum (a kernel
    launched with more than the default limit has opted in); False: the default limit, as
    the profiler's estimate assumes. None for a block of no threads."""
    if threads_per_block <= 0 or regs_per_thread < 0 or smem_bytes < 0:
        return None
    warp = limits.warp_size
    warps = -(-threads_per_block // warp)
    max_threads_per_block = 1024
    by_warps = limits.max_warps // warps if threads_per_block <= max_threads_per_block else 0

    by_regs: int | None = None
    if regs_per_thread > 0:
        per_warp = _up(regs_per_thread * warp, REG_ALLOCATION_UNIT)
        parts = limits.sub_partitions
        # The hardware checks the block against the register file as if every
        # sub-partition got the same number of warps (cuda_occupancy.h).
        if (regs_per_thread > MAX_REGS_PER_THREAD or per_warp * warps > limits.regs_per_block
                or per_warp * _up(warps, parts) > limits.regs_per_block):
            by_regs = 0
        else:
            by_regs = (limits.regs_per_sm // parts // per_warp) * parts // warps

    per_block = _up(smem_bytes + limits.smem_reserved, limits.smem_unit)
    cap = (limits.smem_per_block_optin if opt_in else limits.smem_per_block) \
        + limits.smem_reserved
    by_smem: int | None = None
    if per_block > cap:
        by_smem = 0
    elif smem_bytes > 0 or limits.smem_reserved > 0:
        by_smem = limits.smem_per_sm // per_block

    candidates = {"warps": by_warps, "blocks": limits.max_blocks}
    if by_regs is not None:
        candidates["registers"] = by_regs
    if by_smem is not None:
        candidates["shared memory"] = by_smem
    blocks = min(candidates.values())
    limited = tuple(k for k in ("warps", "registers", "shared memory", "blocks")
                    if candidates.get(k) == blocks)
    return Occupancy(blocks=blocks, warps_per_block=warps,
                     pct=100.0 * blocks * warps / limits.max_warps, limited_by=limited,
                     by_warps=by_warps, by_registers=by_regs, by_shared_memory=by_smem)


def profiler_estimate_pct(limits: SmLimits, threads_per_block: int, regs_per_thread: int,
                          smem_bytes: int, blocks_per_sm: float) -> int | None:
    """Kineto's ``est. achieved occupancy %`` for the same launch: the calculator's blocks
    with the default shared memory limit, capped by the grid's ``blocks per SM``, as
    threads over the SM's thread slots, rounded (libkineto's CudaDeviceProperties.cpp).
    Kineto computes in single precision, so this does too: 7.2 blocks of 64 threads over
    2048 slots is 22.4999… there, 22 %, not the 23 % of exact arithmetic."""
    occ = theoretical_occupancy(limits, threads_per_block, regs_per_thread, smem_bytes,
                                opt_in=False)
    if occ is None:
        return None
    f32 = np.float32
    blocks = min(f32(occ.blocks), f32(blocks_per_sm))
    frac = blocks * f32(threads_per_block) / f32(limits.max_warps * limits.warp_size)
    return int(0.5 + float(frac) * 100.0)
