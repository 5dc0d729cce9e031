"""A cold report of many small traces with the cache against one without (issue 22, case 7).

    python bench/run_cache_many.py [--files 20000] [--runs 100] [--workers N] [--warm]
                                   [--repeat R]

Writes ``--files`` small valid traces (two ``ProfilerStep#`` windows, a few ops and
kernel launches: about 3 KB each) into a temporary log dir, then times, each as a whole
``tb-diagnostics report --format json`` process: ``--no-cache``, then with a fresh
empty cache (cold: every file parsed, analysed and written to the cache), and with
``--warm`` once more on that cache. Prints the wall times, the CPU seconds (user and
system, the workers' included: less shaken than the wall by other load), the peak RSS of the
processes and the ratio cold/no-cache (the issue's target: at most 1.2× at 20,000
files). The no-cache run goes first, so both read the traces from the page cache;
``--repeat R`` alternates the pair R times (a fresh cache each time) and keeps each
one's fastest, for a machine that others share. Each repeat's cache is kept until
the end: deleting 20,000 files just before the next cold run would slow its file
creations (ext4 without a journal skips recently freed inodes one by one,
``recently_deleted()``), a cost of the benchmark, not of the cache.
Nothing outside the temporary directory is read or written.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def small_trace(i: int) -> dict:
    """Two steps of three ops, each launching one kernel; the numbers vary with ``i``."""
    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0,
                       "args": {"name": "GPU 0"}}]
    t, corr = 1000.0 + i, 1
    for step in (1, 2):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                   "pid": 1, "tid": 1, "ts": t, "dur": 1000})
        for k in range(3):
            o = t + 10 + k * 300
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                       "ts": o, "dur": 200, "args": {"External id": corr}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "pid": 1, "tid": 1, "ts": o + 20, "dur": 20,
                       "args": {"correlation": corr, "External id": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn",
                       "pid": 0, "tid": 7, "ts": o + 50, "dur": 100 + (i + k) % 50,
                       "args": {"correlation": corr, "External id": corr, "stream": 7,
                                "device": 0}})
            corr += 1
        t += 1000
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Tesla V100"}],
            "traceEvents": ev}


def write_logdir(root: Path, n_files: int, n_runs: int) -> None:
    for i in range(n_files):
        run = root / f"run{i % n_runs:04d}"
        run.mkdir(parents=True, exist_ok=True)
        (run / f"worker{i // n_runs}.{1000 + i}.pt.trace.json").write_text(
            json.dumps(small_trace(i)))


Timed = tuple[float, int, int, float]


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed_report(logdir: Path, env: dict[str, str], extra: list[str]) -> Timed:
    """(wall seconds, exit code, peak RSS in MiB of the largest process it waited for, CPU
    seconds of the report and of the workers it waited for)."""
    cpu0 = _children_cpu()
    cmd = [sys.executable, "-m", "tb_diagnostics.cli", "report", str(logdir),
           "--format", "json", *extra]
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE)
        _, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.stderr.write(err.decode(errors="replace")[-2000:])
    # RUSAGE_CHILDREN's maxrss: the largest of the processes waited for so far (KiB).
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    return wall, proc.returncode, peak, _children_cpu() - cpu0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=100, help="run directories the files go in")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--warm", action="store_true", help="also time a warm report")
    ap.add_argument("--repeat", type=int, default=1, help="alternate the pair this often")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tbd-cache-many-"))
    try:
        logdir = tmp / "log"
        t0 = time.perf_counter()
        write_logdir(logdir, args.files, min(args.runs, args.files))
        print(f"{args.files} traces written in {time.perf_counter() - t0:.1f} s")
        extra = ["--workers", str(args.workers)] if args.workers else []
        best: dict[str, Timed] = {}

        def keep(name: str, result: Timed) -> None:
            if name in best and best[name][1]:
                return  # a failure stays shown
            if name not in best or result[0] < best[name][0] or result[1]:
                best[name] = result

        for r in range(max(1, args.repeat)):
            cache = tmp / f"cache{r}"
            env = dict(os.environ, TB_DIAGNOSTICS_CACHE=str(cache),
                       PYTHONPATH=os.pathsep.join(filter(None, [
                           str(REPO / "plugin"), os.environ.get("PYTHONPATH")])))
            plain = timed_report(logdir, env, [*extra, "--no-cache"])
            cold = timed_report(logdir, env, extra)
            keep("--no-cache", plain)
            keep("cache, cold", cold)
            print(f"repeat {r + 1}: --no-cache {plain[0]:.1f} s, cold {cold[0]:.1f} s "
                  f"({cold[0] / plain[0]:.2f}x); CPU {plain[3]:.1f} s, {cold[3]:.1f} s "
                  f"({cold[3] / plain[3]:.2f}x)", flush=True)
            if args.warm:
                keep("cache, warm", timed_report(logdir, env, extra))
            # The store's files are <key>.model and <key>.<variant>.results, side by side.
            names = [p.name for p in cache.glob("tb-diagnostics-cache-v*/*")]
            n_entries = len({n.split(".")[0] for n in names if n.endswith((".model", ".results"))})
            n_models = sum(n.endswith(".model") for n in names)
        rows = [(name, *result) for name, result in best.items()]
        print(f"{'report':<14}{'wall s':>9}{'CPU s':>9}{'rc':>4}{'peak RSS MiB (so far)':>24}")
        for name, wall, rc, peak, cpu in rows:
            print(f"{name:<14}{wall:>9.1f}{cpu:>9.1f}{rc:>4}{peak:>24}")
        ratio = rows[1][1] / rows[0][1]
        print(f"cold with cache / --no-cache: {ratio:.2f}x (target at most 1.2x); "
              f"CPU {rows[1][4] / rows[0][4]:.2f}x")
        # More entries than files: the package's code changed between the runs (the key).
        print(f"cache entries after the last run: {n_entries} ({n_models} with a model: "
              "small traces keep only their results)")
        return 0 if all(r[2] == 0 for r in rows) else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
