"""First response time of the Kernels view after a span is loaded.

    .venv/bin/python bench/run_views_kernels.py TRACE.json [...]
    .venv/bin/python bench/run_views_kernels.py --kernels 200000   # a made-up GPU trace

The bench data (bench/data/tiny_ops_*) are CPU-only, so ``--kernels N`` writes a trace of
N kernels (3,100 names, 300 launching ops, 40 steps, several launch configurations, an
A100's deviceProperties) into a temporary directory first. Per trace: the load time, the
roofline the view takes precisions from (the tab's summary has computed it before its
first view request), then each document's time in order (the first pays for the per-kernel
columns every later one shares).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.report.views import ViewParams, all_views
from tb_diagnostics.trace import load_trace

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936, "numSms": 108,
        "sharedMemPerBlockOptin": 166912}


def made_up_trace(path: Path, kernels: int, steps: int = 40) -> None:
    rnd = random.Random(1)
    names = [f"void at::native::kernel_{i}<float, {i % 7}>(int, float*)" for i in range(3000)]
    names += [f"ampere_bf16_s16816gemm_bf16_128x128_ldg8_stages_64x3_tn_{i}" for i in range(100)]
    ops = [f"aten::op{i}" for i in range(300)]
    per_step = max(kernels // steps, 1)
    events = []
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [A100],
                                "traceEvents": events}))


CASES = [ViewParams(), ViewParams(group="op"), ViewParams(sort="-registers_per_thread"),
         ViewParams(q="gemm")]


def measure(path: str) -> None:
    t0 = time.perf_counter()
    a = SpanAnalysis(load_trace(path))
    print(f"{path}: {len(a.model):,} rows, loaded in {time.perf_counter() - t0:.1f} s")
    t = time.perf_counter()
    roofline(a)
    print(f"  roofline (precisions): {time.perf_counter() - t:.3f} s")
    cases = list(CASES)
    if a.windows:
        cases.append(ViewParams(step=str(a.windows[len(a.windows) // 2].step)))
    for params in cases:
        t = time.perf_counter()
        doc = all_views()["kernels"].document(a, params)
        label = ",".join(f"{k}={v}" for k, v in vars(params).items()
                         if v not in (None, 0, 100) and k != "extra")
        print(f"  kernels({label or 'default'}): {time.perf_counter() - t:.3f} s, "
              f"{doc['totals']['calls']:,} kernels, {doc['total_rows']} rows")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*")
    p.add_argument("--kernels", type=int, help="also a made-up trace of this many kernels")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = list(args.paths)
        if args.kernels:
            made = Path(tmp) / "run" / "w.1.pt.trace.json"
            made_up_trace(made, args.kernels)
            paths.append(str(made))
        for path in paths:
            measure(path)


if __name__ == "__main__":
    main()
