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
