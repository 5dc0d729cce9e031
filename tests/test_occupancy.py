"""Theoretical occupancy (analysis/cost/occupancy.py) against hand computations from the
occupancy calculator's rules, and the profiler's recorded estimate reproduced on every
kernel of the shared real traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tb_diagnostics.analysis.cost.occupancy import (
    profiler_estimate_pct,
    sm_limits,
    theoretical_occupancy,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936, "numSms": 108,
        "sharedMemPerBlockOptin": 166912}
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
        "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
        "sharedMemPerMultiprocessor": 233472}
V100 = {"id": 0, "name": "Tesla V100-SXM2-32GB", "computeMajor": 7, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 98304, "numSms": 80,
        "sharedMemPerBlockOptin": 98304}


def _up(x: int, unit: int) -> int:
    return (x + unit - 1) // unit * unit


def test_256_threads_64_registers_no_smem_on_cc80_is_half():
    lim = sm_limits(A100)
    occ = theoretical_occupancy(lim, 256, 64, 0)
    # By hand: 8 warps a block; 64 × 32 = 2048 registers a warp (a whole number of
    # 256-register units); each of the 4 sub-partitions holds 16384 // 2048 = 8 warps, so 32
    # warps fit: 4 blocks. Warp slots allow 64 // 8 = 8, shared memory (the 1 KB reserve)
    # 167936 // 1024 = 164, the block limit 32.
    warps = 256 // 32
    by_regs = (65536 // 4 // _up(64 * 32, 256)) * 4 // warps
    blocks = min(by_regs, 64 // warps, 167936 // 1024, 32)
    assert (occ.blocks, occ.warps_per_block) == (blocks, warps) == (4, 8)
    assert occ.pct == 100.0 * blocks * warps / 64 == 50.0
    assert occ.limited_by == ("registers",)


def test_registers_round_up_to_the_allocation_unit():
    # 47 registers: 1504 a warp, allocated 1536; 16384 // 1536 = 10 warps a sub-partition,
    # 40 an SM, 5 blocks of 8 warps: 62.5 % (the alexnet trace records 63).
    occ = theoretical_occupancy(sm_limits(A100), 256, 47, 0)
    assert (occ.by_registers, occ.blocks, occ.pct) == (5, 5, 62.5)


def test_shared_memory_counts_the_reserve_and_the_opt_in_limit():
    lim = sm_limits(H100)
    # owlv2's cuBLAS GEMM: 384 threads, 168 registers, 231424 B. Registers: 5376 a warp,
    # 16384 // 5376 = 3 warps a sub-partition, 12 an SM: one block of 12 warps. Shared
    # memory: 231424 + 1024 = 232448 a block, 233472 // 232448 = 1.
    occ = theoretical_occupancy(lim, 384, 168, 231424)
    assert (occ.by_registers, occ.by_shared_memory, occ.blocks) == (1, 1, 1)
    assert occ.pct == pytest.approx(100 * 12 / 64)
    assert occ.limited_by == ("registers", "shared memory")
    # Without the opt-in (the profiler's assumption) the block does not fit in 48 KB.
    assert theoretical_occupancy(lim, 384, 168, 231424, opt_in=False).blocks == 0


def test_volta_allocates_shared_memory_in_256_byte_units_without_a_reserve():
    lim = sm_limits(V100)
    occ = theoretical_occupancy(lim, 128, 32, 40000)
    per_block = _up(40000, 256)
    assert occ.by_shared_memory == 98304 // per_block == 2
    assert occ.pct == 100.0 * 2 * 4 / 64


def test_the_resident_block_limit_of_the_capability():
    # cc 8.6 without maxThreadsPerMultiprocessor in the trace: 48 warp slots, 16 blocks.
    props = {"name": "NVIDIA GeForce RTX 3090", "computeMajor": 8, "computeMinor": 6}
    lim = sm_limits(props)
    assert (lim.max_warps, lim.max_blocks, lim.smem_per_sm) == (48, 16, 100 * 1024)
    assert lim.from_trace == ()
    occ = theoretical_occupancy(lim, 32, 16, 0)
    assert (occ.blocks, occ.limited_by) == (16, ("blocks",))
    assert occ.pct == pytest.approx(100 * 16 / 48)


def test_launches_that_cannot_run():
    lim = sm_limits(A100)
    assert theoretical_occupancy(lim, 1025, 16, 0).blocks == 0
    assert theoretical_occupancy(lim, 128, 256, 0).blocks == 0  # over 255 a thread
    assert theoretical_occupancy(lim, 128, 32, 170 * 1024).blocks == 0  # over the opt-in
    assert theoretical_occupancy(lim, 0, 32, 0) is None


def test_no_figure_without_known_rules():
    assert "no deviceProperties" in sm_limits(None)
    assert "not an NVIDIA GPU" in sm_limits({"name": "AMD Instinct MI250X", "computeMajor": 9,
                                             "computeMinor": 0})
    assert "not in the occupancy table" in sm_limits({"name": "x", "computeMajor": 42,
                                                      "computeMinor": 0})
    assert "no compute capability" in sm_limits({"name": "x"})


def test_the_profiler_estimate_is_capped_by_the_grid_in_single_precision():
    lim = sm_limits(V100)
    # 576 blocks of 64 threads on 80 SMs: 7.2 a block slot each; 7.2 × 64 / 2048 is
    # 22.4999… in float32, which Kineto rounds to 22.
    assert profiler_estimate_pct(lim, 64, 20, 0, 576 / 80) == 22
    # A grid larger than the SM holds: the calculator's blocks (A100, 47 regs: 5).
    assert profiler_estimate_pct(sm_limits(A100), 256, 47, 0, 8.0) == 63


def _kernels(path: Path):
    doc = json.loads(gzip.decompress(path.read_bytes()))
    if not isinstance(doc, dict):
        return {}, []
    props = {p.get("id"): p for p in doc.get("deviceProperties") or []}
    return props, [e for e in doc.get("traceEvents", []) if e.get("cat") in ("kernel", "Kernel")
                   and "est. achieved occupancy %" in (e.get("args") or {})]


def test_the_recorded_estimate_is_reproduced_on_every_shared_kernel():
    files = sorted(SHARED.glob("*/*.pt.trace.json.gz")) if SHARED.is_dir() else []
    if not files:
        pytest.skip("../shared/traces is not present")
    checked = 0
    for f in files:
        props, kernels = _kernels(f)
        for e in kernels:
            a = e["args"]
            p = props.get(a.get("device")) or next(iter(props.values()), None)
            lim = sm_limits(p)
            if isinstance(lim, str):
                continue
            (bx, by, bz), (gx, gy, gz) = a["block"], a["grid"]
            bps = np.float32(gx * gy * gz) / np.float32(p["numSms"])
            got = profiler_estimate_pct(lim, bx * by * bz, a["registers per thread"],
                                        a["shared memory"], float(bps))
            assert got == a["est. achieved occupancy %"], (f.parent.name, e["name"], a)
            checked += 1
    assert checked > 50_000  # V100, A100 and H100 kernels of 13 traces


# --- one hand-computed kernel per compute capability -------------------------------------
#
# Each case gives only the compute capability, so every limit comes from the table
# (docs: the CUDA Programming Guide's Tables 30/31, the legacy guide for 6.x/7.0/7.2).
# The expected figures were worked out by hand from the rules in the module docstring;
# the comment shows the arithmetic. Tuple: (threads, regs/thread, smem bytes) ->
# (blocks, by_registers, by_shared_memory, limited_by, occupancy %).
PER_CC = [
    # 6.0 (P100): 2 register sub-partitions. 64 threads = 2 warps; 88 regs x 32 = 2816 a
    # warp (11 units of 256). Half the file, 32768 // 2816 = 11 warps, x 2 = 22 warps: 11
    # blocks (4 sub-partitions would give 16384 // 2816 = 5, x 4 = 20: 10). Warps allow
    # 64 // 2 = 32, the block limit 32; no shared memory and no reserve before 8.0.
    ((6, 0), (64, 88, 0), (11, 11, None, ("registers",), 100 * 22 / 64)),
    # 6.1: 96 KB of shared memory, 256-byte units. 20000 B -> 20224 (79 x 256);
    # 98304 // 20224 = 4 blocks of 4 warps (on 6.0's 64 KB: 3). Registers 32 x 32 = 1024
    # a warp: 16 a sub-partition, 64 warps, 16 blocks.
    ((6, 1), (128, 32, 20000), (4, 16, 4, ("shared memory",), 25.0)),
    # 7.0 (V100): a block may opt in to 96 KB. 50000 B -> 50176 (196 x 256); 98304 // 50176
    # = 1 block of 8 warps. Registers 64 x 32 = 2048: 8 warps a sub-partition, 32, 4 blocks.
    ((7, 0), (256, 64, 50000), (1, 4, 1, ("shared memory",), 12.5)),
    # 7.2 (Xavier): 96 threads = 3 warps, 32 regs: 64 warps // 3 = 21 blocks by registers
    # and 64 // 3 = 21 by warp slots: 63 of 64 warps.
    ((7, 2), (96, 32, 0), (21, 21, None, ("warps", "registers"), 100 * 63 / 64)),
    # 7.5 (Turing): 32 warp slots, 64 KB. 12288 B is 48 256-byte units: 65536 // 12288 = 5
    # blocks of 4 warps = 20 of 32. Registers 40 x 32 = 1280: 12 a sub-partition, 48, 12.
    ((7, 5), (128, 40, 12288), (5, 12, 5, ("shared memory",), 62.5)),
    # 8.0 (A100): 41000 B + the 1 KB reserve = 42024 -> 42112 (329 x 128); 167936 // 42112
    # = 3 (without the reserve 41088 would fit 4). Registers 32: 64 warps, 8 blocks.
    ((8, 0), (256, 32, 41000), (3, 8, 3, ("shared memory",), 37.5)),
    # 8.6 (GA10x): 48 warp slots. 72 regs x 32 = 2304 (9 units): 16384 // 2304 = 7 a
    # sub-partition, 28 warps, 3 blocks of 8 = 24 of 48. Warps allow 6; shared memory (the
    # reserve alone) 102400 // 1024 = 100.
    ((8, 6), (256, 72, 0), (3, 3, 100, ("registers",), 50.0)),
    # 8.7 (Orin): 164 KB with 48 warps. 61440 + 1024 = 62464 (488 x 128): 167936 // 62464
    # = 2 blocks of 4 warps = 8 of 48 (on 8.6's 100 KB only 1).
    ((8, 7), (128, 32, 61440), (2, 16, 2, ("shared memory",), 100 * 8 / 48)),
    # 8.9 (Ada): 24 resident blocks. 64 threads = 2 warps, 32 regs: registers allow 32,
    # warp slots 48 // 2 = 24, the block limit 24: 48 of 48 warps (8.6's 16 would give 32).
    ((8, 9), (64, 32, 0), (24, 32, 100, ("warps", "blocks"), 100.0)),
    # 9.0 (H100): 228 KB. 102400 + 1024 = 103424: 233472 // 103424 = 2. Registers 128 x 32
    # = 4096: 4 a sub-partition, 16 warps, 4 blocks.
    ((9, 0), (128, 128, 102400), (2, 4, 2, ("shared memory",), 12.5)),
    # 10.0 (B200): a 1024-thread block of 64 regs fills the register file: 2048 a warp,
    # 8 a sub-partition, 32 warps, 1 block of 32 = 32 of 64 (warp slots allow 2).
    ((10, 0), (1024, 64, 0), (1, 1, 228, ("registers",), 50.0)),
    # 10.3 (B300): 24 regs = 768 a warp: 21 a sub-partition, 84 warps, 10 blocks; 16 KB +
    # 1 KB = 17408: 233472 // 17408 = 13; warp slots 64 // 8 = 8: 8 blocks, 64 of 64.
    ((10, 3), (256, 24, 16384), (8, 10, 13, ("warps",), 100.0)),
    # 11.0 (Thor): 228 KB but 24 blocks and 48 warps. 1-warp blocks of 16 regs and 8 KB:
    # 8192 + 1024 = 9216, 233472 // 9216 = 25; registers 128; warps 48; blocks 24: 24 of 48.
    ((11, 0), (32, 16, 8192), (24, 128, 25, ("blocks",), 50.0)),
    # 12.0 (RTX 50, RTX PRO Blackwell): 100 KB, 48 warps, 24 blocks. 32768 + 1024 = 33792:
    # 102400 // 33792 = 3 blocks of 4 warps = 12 of 48. Registers 64: 32 warps, 8 blocks.
    ((12, 0), (128, 64, 32768), (3, 8, 3, ("shared memory",), 25.0)),
    # 12.1 (GB10) shares 12.x's column: the same kernel, the same answer.
    ((12, 1), (128, 64, 32768), (3, 8, 3, ("shared memory",), 25.0)),
]


@pytest.mark.parametrize(("cc", "launch", "expected"), PER_CC,
                         ids=[f"cc{c[0]}.{c[1]}" for c, _, _ in PER_CC])
def test_one_hand_computed_kernel_per_compute_capability(cc, launch, expected):
    lim = sm_limits({"name": "NVIDIA test part", "computeMajor": cc[0], "computeMinor": cc[1]})
    assert lim.from_trace == ()  # every limit is the table's
    occ = theoretical_occupancy(lim, *launch)
    blocks, by_regs, by_smem, limited, pct = expected
    assert (occ.blocks, occ.by_registers, occ.by_shared_memory) == (blocks, by_regs, by_smem)
    assert occ.limited_by == limited
    assert occ.pct == pytest.approx(pct)


# The guide's figures per capability: (resident blocks, warps, shared memory per SM and
# per block in KB). Listed from Tables 30/31 (7.5 on) and the legacy guide (6.x, 7.0, 7.2).
GUIDE = {
    (6, 0): (32, 64, 64, 48), (6, 1): (32, 64, 96, 48), (7, 0): (32, 64, 96, 96),
    (7, 2): (32, 64, 96, 96), (7, 5): (16, 32, 64, 64), (8, 0): (32, 64, 164, 163),
    (8, 6): (16, 48, 100, 99), (8, 7): (16, 48, 164, 163), (8, 9): (24, 48, 100, 99),
    (9, 0): (32, 64, 228, 227), (10, 0): (32, 64, 228, 227), (10, 3): (32, 64, 228, 227),
    (11, 0): (24, 48, 228, 227), (12, 0): (24, 48, 100, 99), (12, 1): (24, 48, 100, 99),
}


@pytest.mark.parametrize("cc", sorted(GUIDE), ids=lambda c: f"cc{c[0]}.{c[1]}")
def test_the_table_holds_the_guides_figures(cc):
    lim = sm_limits({"name": "NVIDIA test part", "computeMajor": cc[0], "computeMinor": cc[1]})
    got = (lim.max_blocks, lim.max_warps, lim.smem_per_sm // 1024,
           lim.smem_per_block_optin // 1024)
    assert got == GUIDE[cc]
    assert (lim.regs_per_sm, lim.regs_per_block) == (65536, 65536)
    # Allocation units and the driver's reserve change at 8.0; 6.0 alone has 2 partitions.
    assert lim.smem_unit == (128 if cc[0] >= 8 else 256)
    assert lim.smem_reserved == (1024 if cc[0] >= 8 else 0)
    assert lim.sub_partitions == (2 if cc == (6, 0) else 4)
