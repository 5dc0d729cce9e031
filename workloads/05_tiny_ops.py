"""Many tiny elementwise ops per step (dispatch-overhead bound) versus the same work fused.

The step applies the tanh approximation of GELU,
``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``, to ``--chunks`` small tensors of
``--numel`` elements each.

* default: written out op by op on every chunk, so one step issues ``chunks x 9`` aten calls
  that each touch a few thousand numbers. Every call costs microseconds of Python, dispatcher
  and profiler bookkeeping and almost no arithmetic -> ``overhead-bound``.
* ``--fused``: the chunks are one stacked ``(chunks, numel)`` tensor and the formula is the
  single library op ``F.gelu(x, approximate="tanh")``: the same numbers, one call per step that
  runs long enough to count as real work -> ``compute-bound``.
* ``--compile``: ``torch.compile`` of the op-by-op version (Inductor fuses the nine ops of
  each chunk into generated code). The first call compiles, so combine it with ``--warmup``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

import harness
import torch
import torch.nn.functional as F

BASE = "tiny_ops"
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_by_hand(x: torch.Tensor) -> torch.Tensor:
    """tanh-GELU as nine separate elementwise ops (what un-fused model code often looks like)."""
    inner = x + 0.044715 * x * x * x
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * inner))


def tiny_step(chunks: list[torch.Tensor]) -> list[torch.Tensor]:
    """The overhead-bound step: the hand-written formula on every small chunk."""
    return [gelu_by_hand(c) for c in chunks]


def fused_step(stacked: torch.Tensor) -> torch.Tensor:
    """The same computation as one op over one large tensor."""
    return F.gelu(stacked, approximate="tanh")


def build_parser() -> argparse.ArgumentParser:
    """Script flags plus the harness's common profiling flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, default=64, help="number of small tensors")
    p.add_argument("--numel", type=int, default=16384, help="elements per small tensor")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--fused", action="store_true", help="one F.gelu over the stacked data")
    mode.add_argument("--compile", action="store_true", help="torch.compile the op-by-op step")
    harness.add_common_args(p)
    return p


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, harness.ProfileSettings]:
    """Parse flags and resolve profiler settings (``args.run`` is filled in)."""
    args = build_parser().parse_args(argv)
    if args.chunks < 1 or args.numel < 1:
        raise SystemExit("--chunks and --numel must be >= 1")
    parts = ["fused" if args.fused else "compiled" if args.compile else "unfused"]
    if args.chunks != 64:
        parts.append(f"chunks{args.chunks}")
    if args.numel != 16384:
        parts.append(f"numel{args.numel}")
    return harness.finish_args(args, BASE, parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Profile the tiny-op (or fused) step and write the trace; returns an exit code."""
    args, settings = parse_args(argv)
    harness.prepare(args)
    device = settings.device
    stacked = torch.randn(args.chunks, args.numel, device=device)
    chunks = [c.contiguous() for c in stacked.unbind(0)]

    step: Callable[[], object]
    if args.fused:

        def step() -> object:
            return fused_step(stacked)
    else:
        fn = torch.compile(tiny_step) if args.compile else tiny_step

        def step() -> object:
            return fn(chunks)

    try:
        for _ in range(settings.untimed):
            step()
        harness.synchronize(device)
        with harness.profiling(settings) as prof:
            for _ in range(settings.steps):
                with harness.record_function("gelu_step"):
                    step()
                harness.synchronize(device)
                prof.step()
    except Exception as exc:
        if not args.compile:
            raise
        harness.discard_run(settings)
        print(
            f"torch.compile failed ({type(exc).__name__}: {exc}).\n"
            "On CPU, Inductor needs a C++ compiler (g++ or clang++) on PATH and the Python "
            "development headers; rerun without --compile.",
            file=sys.stderr,
        )
        return 2
    harness.announce(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
