"""First response time of the Memory view after a span is loaded.

    .venv/bin/python bench/run_views_memory.py TRACE [...]
    .venv/bin/python bench/run_views_memory.py --make 1000000 DIR   # write a synthetic one

Per trace: the load time and the span's steps (``analysis.windows``: the tab's summary,
shown before any view, has them), then each document's time in order (the first pays
for the per-step memory figures, the allocation sites and the address matching every
later one shares); nothing else (the report, the rules) has run. ``--make N`` writes a
trace of N ``[memory]`` events (20 steps; on two threads, ops that allocate, free, and
keep a little each step) into DIR: the size profile_memory=True gives a long run (the
bench traces in bench/data have no memory events).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.report.views import ViewParams, all_views
from tb_diagnostics.trace import load_trace

STEPS = 20


def make(n_events: int, out_dir: str) -> str:
    """A trace of ``n_events`` memory events (half allocations, half frees, 1 % kept)."""
    per_step = max(n_events // STEPS, 4)
    path = Path(out_dir) / "memory_bench" / f"worker0.{n_events}.pt.trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 '
                '80GB HBM3", "totalGlobalMem": 85018279936}], "traceEvents": [\n')
        total, addr, t, first = 1e9, 1 << 40, 0.0, True
        for s in range(STEPS):
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
    return str(path)


def _mem(ts: float, nbytes: float, total: float, addr: int, tid: int) -> dict:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
            "tid": tid, "ts": ts, "args": {"Device Type": 1, "Device Id": 0, "Addr": addr,
                                           "Bytes": nbytes, "Total Allocated": total,
                                           "Total Reserved": 2 * total}}


def main(paths: list[str]) -> None:
    for path in paths:
        t0 = time.perf_counter()
        a = SpanAnalysis(load_trace(path))
        loaded = time.perf_counter() - t0
        t1 = time.perf_counter()
        a.windows  # noqa: B018 - the span's steps: the tab's summary has them before a view
        print(f"{path}: {len(a.model):,} rows, {len(a.model.memory):,} memory events, "
              f"loaded in {loaded:.1f} s, steps in {time.perf_counter() - t1:.1f} s")
        cases = [ViewParams(), ViewParams(group="inner"), ViewParams(sort="-count")]
        if a.windows and a.windows[0].step is not None:
            cases.append(ViewParams(step=str(a.windows[len(a.windows) // 2].step)))
        for params in cases:
            t = time.perf_counter()
            doc = all_views()["memory"].document(a, params)
            label = ",".join(f"{k}={v}" for k, v in vars(params).items()
                             if v not in (None, 0, 100) and k != "extra")
            points = sum(d["curve"]["points"] for d in doc["devices"])
            print(f"  memory({label or 'default'}): {time.perf_counter() - t:.3f} s, "
                  f"{doc['total_rows']} rows, {points} curve points")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--make"]:
        print(make(int(sys.argv[2]), sys.argv[3]))
    else:
        main(sys.argv[1:])
