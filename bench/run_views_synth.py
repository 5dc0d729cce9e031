"""Made-up traces for ``run_views.py`` where the bench data have nothing to show.

The tiny-ops bench traces are CPU-only and record no memory, so:

- :func:`made_up_kernels`: N kernels (3,100 names, 300 launching ops, 40 steps, several
  launch configurations, an A100's deviceProperties);
- :func:`made_up_memory`: N ``[memory]`` events (20 steps; on two threads, ops that
  allocate, free, and keep 1 % each step): the size profile_memory=True gives a long run.

Each is written as ``LOGDIR/<run>/worker0.<n>.pt.trace.json`` (a log dir TensorBoard reads)
and its path returned.

    .venv/bin/python bench/run_views_synth.py kernels 200000 DIR   # write one, print its path
    .venv/bin/python bench/run_views_synth.py memory 1000000 DIR
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936, "numSms": 108,
        "sharedMemPerBlockOptin": 166912}
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936}


def made_up_kernels(logdir: Path, kernels: int, steps: int = 40) -> Path:
    """A GPU trace of ``kernels`` kernels, each launched by an op through cudaLaunchKernel."""
    rnd = random.Random(1)
    names = [f"void at::native::kernel_{i}<float, {i % 7}>(int, float*)" for i in range(3000)]
    names += [f"ampere_bf16_s16816gemm_bf16_128x128_ldg8_stages_64x3_tn_{i}" for i in range(100)]
    ops = [f"aten::op{i}" for i in range(300)]
    per_step = max(kernels // steps, 1)
    events: list[dict[str, Any]] = []
    t, corr = 0.0, 0
    for step in range(steps):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 1, "tid": 1, "ts": t, "dur": per_step * 30.0})
        for k in range(per_step):
            corr += 1
            ts = t + k * 30.0
            events.append({"ph": "X", "cat": "cpu_op", "name": rnd.choice(ops), "pid": 1,
                           "tid": 1, "ts": ts + 1, "dur": 20.0, "args": {"External id": corr}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 1, "tid": 1, "ts": ts + 2, "dur": 5.0,
                           "args": {"correlation": corr, "External id": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": rnd.choice(names), "pid": 0,
                           "tid": 7, "ts": ts + 10, "dur": rnd.uniform(1, 25), "args": {
                               "device": 0, "stream": 7, "correlation": corr,
                               "External id": corr,
                               "registers per thread": rnd.choice([16, 32, 64, 128]),
                               "shared memory": rnd.choice([0, 4096, 49152]),
                               "grid": [rnd.choice([1, 108, 4096]), 1, 1],
                               "block": [rnd.choice([128, 256, 512]), 1, 1],
                               "est. achieved occupancy %": 50}})
        t += per_step * 30.0 + 100
    path = Path(logdir) / "made_up_kernels" / f"worker0.{kernels}.pt.trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [A100],
                                "traceEvents": events}))
    return path


def made_up_memory(logdir: Path, n_events: int, steps: int = 20) -> Path:
    """A trace of ``n_events`` memory events (half allocations, half frees, 1 % kept)."""
    per_step = max(n_events // steps, 4)
    path = Path(logdir) / "made_up_memory" / f"worker0.{n_events}.pt.trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [' + json.dumps(H100)
                + '], "traceEvents": [\n')
        total, addr, t, first = 1e9, 1 << 40, 0.0, True
        for s in range(steps):
            step_start = t
            rows = []
            for i in range(per_step // 2):
                tid = 1 if i % 3 else 2  # the main thread and an autograd thread
                rows.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 50}",
                             "pid": 1, "tid": tid, "ts": t, "dur": 4.0})
                size = 4096 * (1 + i % 64)
                total += size
                addr += 4096 * 65
                rows.append(_mem(t + 1, size, total, addr, tid))
                if i % 100:  # 1 % of the allocations outlive their step
                    total -= size
                    rows.append(_mem(t + 3, -size, total, addr, tid))
                t += 5.0
            rows.insert(0, {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                            "pid": 1, "tid": 1, "ts": step_start, "dur": t - step_start + 1})
            t += 2.0
            for r in rows:
                f.write(("" if first else ",\n") + json.dumps(r))
                first = False
        f.write("\n]}\n")
    return path


def _mem(ts: float, nbytes: float, total: float, addr: int, tid: int) -> dict[str, Any]:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
            "tid": tid, "ts": ts, "args": {"Device Type": 1, "Device Id": 0, "Addr": addr,
                                           "Bytes": nbytes, "Total Allocated": total,
                                           "Total Reserved": 2 * total}}


if __name__ == "__main__":
    kind, n, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    make = {"kernels": made_up_kernels, "memory": made_up_memory}[kind]
    print(make(out, n))
