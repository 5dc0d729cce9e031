"""Regenerate the sample traces shipped in ``log/`` (or ``--logdir``).

Each sample is one run of a workload script in a fresh Python process: a cold start is only
a cold start in a new process (in-process reruns would find kernels, allocator pools and
compiled graphs already warm), and a crash in one sample does not take the others with it.

The set is curated to show one diagnosis each, small enough that the whole of ``log/`` stays
well under a few MB (gzipped traces, few steps, memory profiling only for the memory run).
Only the runs listed in ``SAMPLES`` are deleted and rewritten; any other run in the log
directory is left alone. ``--list`` prints the runs without running anything.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_LOGDIR = HERE.parent / "log"


@dataclass(frozen=True)
class Sample:
    """One curated run: which script, with which flags, and what it is there to show."""

    script: str
    argv: tuple[str, ...]
    shows: str
    needs_compiler: bool = False


SAMPLES: tuple[Sample, ...] = (
    Sample("01_matmul_add", ("--size", "64"), "overhead-bound steps; step 0 is the cold start"),
    Sample("01_matmul_add", ("--size", "64", "--warmup", "3"), "overhead-bound, no cold start"),
    Sample("01_matmul_add", ("--size", "1024", "--warmup", "2"), "compute-bound (aten::mm)"),
    Sample("01_matmul_add", ("--size", "2048"), "compute-bound, cold first step"),
    Sample("01_matmul_add", ("--size", "64", "--batched", "--warmup", "3"), "aten::bmm path"),
    Sample(
        "01_matmul_add",
        ("--size", "64", "--compile"),
        "torch.compile: the compilation is inside step 0",
        needs_compiler=True,
    ),
    Sample("02_train_cnn", ("--warmup", "1"), "CNN training, convolutions dominate"),
    Sample("02_train_cnn", ("--slow-input",), "input-bound: 4 ms sleep per sample, no workers"),
    Sample(
        "02_train_cnn",
        ("--slow-input", "--num-workers", "8", "--warmup", "2"),
        "the same slow input hidden by 8 DataLoader workers",
    ),
    Sample("03_sync_in_loop", ("--sync",), "print(loss.item()) every iteration"),
    Sample("03_sync_in_loop", ("--no-sync",), "loss kept on the device, read once"),
    Sample("04_memory_growth", ("--leak",), "allocated memory grows ~1 MiB per step"),
    Sample("04_memory_growth", ("--no-leak",), "allocated memory flat"),
    Sample("05_tiny_ops", (), "~600 tiny elementwise ops per step: overhead-bound"),
    Sample("05_tiny_ops", ("--fused",), "the same math as one F.gelu call: compute-bound"),
    Sample("06_distributed", (), "2 ranks (gloo), gradient all-reduce"),
    Sample("06_distributed", ("--straggler", "1"), "rank1 sleeps 30 ms/step, rank0 waits"),
)


def _import_script(name: str) -> object:
    """Import ``workloads/<name>.py`` (names starting with digits need importlib)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return importlib.import_module(name)


def run_name_of(sample: Sample, extra: Sequence[str]) -> str:
    """The run directory the script will write, computed by the script's own parser."""
    module = _import_script(sample.script)
    args, _ = module.parse_args([*sample.argv, *extra])  # type: ignore[attr-defined]
    return str(args.run)


def build_parser() -> argparse.ArgumentParser:
    """Flags of this regeneration script."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default=str(DEFAULT_LOGDIR), help=f"default: {DEFAULT_LOGDIR}")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu")
    p.add_argument("--only", default=None, help="regenerate only runs whose name contains this")
    p.add_argument("--no-compile", action="store_true", help="skip samples that need a compiler")
    p.add_argument("--list", action="store_true", help="print the sample runs and exit")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the samples; returns the number of samples that failed (0 = all good)."""
    opts = build_parser().parse_args(argv)
    logdir = Path(opts.logdir)
    extra = ["--device", opts.device, "--logdir", str(logdir)]
    plan = []
    for sample in SAMPLES:
        if sample.needs_compiler and opts.no_compile:
            continue
        run = run_name_of(sample, extra)
        if opts.only and opts.only not in run:
            continue
        plan.append((sample, run))

    if opts.list:
        for sample, run in plan:
            cmd = " ".join([f"workloads/{sample.script}.py", *sample.argv])
            print(f"{run:48s} {cmd:60s} {sample.shows}")
        return 0

    logdir.mkdir(parents=True, exist_ok=True)
    failures = 0
    t_all = time.perf_counter()
    for sample, run in plan:
        shutil.rmtree(logdir / run, ignore_errors=True)  # a run we own: rewrite it whole
        cmd = [sys.executable, str(HERE / f"{sample.script}.py"), *sample.argv, *extra]
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
            # An empty Inductor cache: a compile sample must record a real compilation, not
            # whatever an earlier run on this machine left in the shared cache.
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        dt = time.perf_counter() - t0
        if proc.returncode == 0:
            size = sum(p.stat().st_size for p in (logdir / run).glob("*") if p.is_file())
            print(f"ok   {dt:5.1f} s {size / 1024:7.1f} KiB  {run}")
        else:
            failures += 1
            shutil.rmtree(logdir / run, ignore_errors=True)
            print(f"FAIL {dt:5.1f} s               {run} (exit {proc.returncode})")
            print("\n".join("     " + line for line in proc.stderr.strip().splitlines()[-15:]))
    total = sum(p.stat().st_size for p in logdir.rglob("*") if p.is_file())
    print(
        f"{len(plan) - failures}/{len(plan)} samples in {time.perf_counter() - t_all:.0f} s; "
        f"{logdir} holds {total / 2**20:.2f} MiB"
    )
    print(f"view them with: tensorboard --logdir {logdir}   or   tb-diagnostics report {logdir}")
    return failures


if __name__ == "__main__":
    raise SystemExit(min(main(), 1))
