"""A training loop that leaks memory across steps, versus the same loop without the leak.

``--leak`` (default) keeps every step's network output in a Python list "to look at later"
(``outputs.append(out)``), a common bug: each kept tensor (batch x hidden floats, 1 MiB with
the defaults) and its autograd node stay alive, so the allocator's total grows step after
step. ``--no-leak`` keeps only ``loss.item()``, a Python float.

``profile_memory`` is on by default for this script (it is the experiment): the trace gets
``[memory]`` events whose "Total Allocated" climbs by about one output per step with
``--leak`` and stays flat with ``--no-leak``. Ten steps are profiled by default so the slope
is obvious.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import harness
import torch
from torch import nn

BASE = "memory_growth"


def build_parser() -> argparse.ArgumentParser:
    """Script flags plus the harness's common profiling flags (memory profiling on)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--leak",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep every step's output tensor alive (--no-leak: keep loss.item() only)",
    )
    p.add_argument("--hidden", type=int, default=1024, help="MLP width")
    p.add_argument("--batch-size", type=int, default=256)
    harness.add_common_args(p, active=10, profile_memory=True)
    return p


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, harness.ProfileSettings]:
    """Parse flags and resolve profiler settings (``args.run`` is filled in)."""
    args = build_parser().parse_args(argv)
    if args.hidden < 1 or args.batch_size < 1:
        raise SystemExit("--hidden and --batch-size must be >= 1")
    parts = ["leak" if args.leak else "noleak"]
    if args.hidden != 1024:
        parts.append(f"hidden{args.hidden}")
    if args.batch_size != 256:
        parts.append(f"bs{args.batch_size}")
    return harness.finish_args(args, BASE, parts)


def allocated_bytes(device: torch.device) -> int | None:
    """Bytes held by the caching allocator (CUDA only; the CPU has no such counter)."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def main(argv: Sequence[str] | None = None) -> int:
    """Train an MLP, keeping (or not) each step's output; write the trace."""
    args, settings = parse_args(argv)
    harness.prepare(args)
    device = settings.device
    h = args.hidden
    model = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch_size, h, device=device)
    target = torch.randn(args.batch_size, h, device=device)
    outputs: list[torch.Tensor] = []  # the leak: grows by one batch x hidden tensor per step
    losses: list[float] = []

    def train_step() -> None:
        with harness.record_function("forward"):
            out = model(x)
            loss = nn.functional.mse_loss(out, target)
        with harness.record_function("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with harness.record_function("optimizer"):
            opt.step()
        with harness.record_function("keep_history"):
            if args.leak:
                outputs.append(out)
            else:
                losses.append(loss.item())

    for _ in range(settings.untimed):
        train_step()
    harness.synchronize(device)
    before = allocated_bytes(device)
    with harness.profiling(settings) as prof:
        for _ in range(settings.steps):
            train_step()
            prof.step()
    kept = sum(t.numel() * t.element_size() for t in outputs)
    extra = f"kept {len(outputs)} output tensors ({kept / 2**20:.1f} MiB) across steps"
    after = allocated_bytes(device)
    if before is not None and after is not None:
        extra += f"; CUDA allocated {before / 2**20:.1f} -> {after / 2**20:.1f} MiB"
    harness.announce(settings, extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
