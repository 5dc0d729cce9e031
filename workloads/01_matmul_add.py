"""The profiling guide's first example: ``torch.add(torch.matmul(x, w), b)``.

The same two ops are overhead-bound or compute-bound depending only on their size, which is
what makes them the seed walk-through of the diagnosis:

* ``--size 64``: each call does ~0.5 MFLOP, a few microseconds of arithmetic against tens of
  microseconds of Python, dispatcher and profiler bookkeeping per step -> ``overhead-bound``.
* Large sizes: ``aten::mm`` runs for milliseconds, the per-step overhead is noise ->
  ``compute-bound``. Measured with the engine on the 2-core CPU development machine (one
  intra-op thread, the harness default), three runs per size:

  ====  ===========================  =====================================================
  N     step wall                    verdicts
  ====  ===========================  =====================================================
  128   ~0.1 ms                      overhead-bound
  256   ~0.5 ms                      on the line: mixed or compute-bound (busy 0.61-0.88)
  512   ~3 ms                        compute-bound with ``--warmup`` (busy 0.86-0.96; one
                                     noisy step in 15 dipped to 0.77); cold step 0 is mixed
  1024  ~15 ms                       compute-bound in every step, cold or warm (>= 0.90)
  2048  ~0.11 s                      compute-bound (>= 0.98)
  4096  ~0.9-1.4 s                   compute-bound (>= 0.99)
  ====  ===========================  =====================================================

  So the smallest size that is compute-bound is **512** (warm); **1024** is the smallest that
  is compute-bound even in the cold first step. The tests use 2048 for margin.
* Without ``--warmup`` the first profiled step is the slowest (about 1.5-2 ms against 50 us
  at size 64): it pays for the first call of every op (dispatch, oneDNN/MKL kernel
  selection, allocator growth) and for starting the profiler. ``--warmup 3`` runs the step
  three times before anything is recorded (see harness.py for how the profiler's own start-up
  is absorbed), and the spike is gone.
* ``--compile`` wraps the function in ``torch.compile``. The first profiled call then contains
  the whole compilation (0.5-1 s of Dynamo tracing and Inductor, which shows up as a huge
  step 0) unless ``--warmup`` is also given. Inductor turns matmul + bias add into a single
  ``aten::addmm`` extern call here, so no C++ is generated and no compiler is needed for this
  graph (``05_tiny_ops.py --compile`` is the one that needs g++); at size 64 the compiled step
  is *slower* than eager (~100 us vs ~50 us), because Dynamo's guard check and wrappers cost
  more than the one add they save.
* ``--batched`` uses 3-D inputs ``(4, size, size)``, so ``aten::matmul`` dispatches to
  ``aten::bmm`` instead of ``aten::mm``.
* On CUDA every step ends with ``torch.cuda.synchronize()`` so that a step's wall time
  contains its own kernels, as a benchmark would measure it (``03_sync_in_loop.py`` is where
  synchronisation itself is the experiment).

Run ``python workloads/01_matmul_add.py --help`` for the flags; the profiling flags are
described in ``workloads/harness.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

import harness
import torch

BASE = "matmul_add"
BATCH = 4  # leading dimension of --batched inputs
COMPILE_FAILED = (
    "torch.compile failed ({exc}).\n"
    "On CPU, Inductor generates C++ and needs a working C++ compiler (g++ or clang++) on PATH "
    "plus the Python development headers. Rerun without --compile to profile eagerly."
)


def build_parser() -> argparse.ArgumentParser:
    """Script flags plus the harness's common profiling flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64, help="matrix size N (x, w are N x N)")
    p.add_argument("--compile", action="store_true", help="torch.compile the function")
    p.add_argument(
        "--batched", action="store_true", help=f"3-D inputs ({BATCH}, N, N): matmul -> bmm"
    )
    harness.add_common_args(p)
    return p


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, harness.ProfileSettings]:
    """Parse flags and resolve profiler settings (``args.run`` is filled in)."""
    args = build_parser().parse_args(argv)
    if args.size < 1:
        raise SystemExit("--size must be >= 1")
    parts = [f"size{args.size}"]
    if args.compile:
        parts.append("compile")
    if args.batched:
        parts.append("batched")
    return harness.finish_args(args, BASE, parts)


def matmul_add(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The guide's function. The ``matmul_add`` label is put around the *call* (not inside),
    because torch.compile drops record_function blocks that are inside the compiled code."""
    return torch.add(torch.matmul(x, w), b)


def make_inputs(
    size: int, batched: bool, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random inputs; ``b`` broadcasts over rows like a bias."""
    shape = (BATCH, size, size) if batched else (size, size)
    x = torch.randn(shape, device=device)
    w = torch.randn(shape, device=device)
    b = torch.randn(size, device=device)
    return x, w, b


def main(argv: Sequence[str] | None = None) -> int:
    """Profile ``--steps`` calls of matmul_add and write the trace; returns an exit code."""
    args, settings = parse_args(argv)
    harness.prepare(args)
    device = settings.device
    x, w, b = make_inputs(args.size, args.batched, device)

    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] = matmul_add
    if args.compile:
        fn = torch.compile(matmul_add)

    try:
        t0 = time.perf_counter()
        for _ in range(settings.untimed):
            fn(x, w, b)
        harness.synchronize(device)
        if args.compile and settings.untimed:
            print(f"warm-up (including compilation) took {time.perf_counter() - t0:.1f} s")

        with harness.profiling(settings) as prof:
            for _ in range(settings.steps):
                with harness.record_function("matmul_add"):
                    fn(x, w, b)
                harness.synchronize(device)
                prof.step()
    except Exception as exc:
        if not args.compile:
            raise
        harness.discard_run(settings)  # no half-written trace of a failed run
        print(COMPILE_FAILED.format(exc=f"{type(exc).__name__}: {exc}"), file=sys.stderr)
        return 2
    harness.announce(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
