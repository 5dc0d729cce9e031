"""A training loop that reads the loss back every iteration, versus one that does not.

``--sync`` (default) does what most first training loops do: ``print(f"... {loss.item()}")``
every iteration. On a GPU, ``.item()`` copies a scalar to the host and therefore waits until
every queued kernel has finished: the CPU stops running ahead, the device starves while Python
prepares the next step, and the trace shows ``aten::item`` / ``aten::_local_scalar_dense`` with
``cudaMemcpyAsync`` + a stream synchronisation inside -> ``sync-bound``.

``--no-sync`` keeps a running sum of the loss on the device (``running += loss.detach()``) and
reads it once, after profiling. Nothing in the loop waits for the device.

On a CPU-only machine there is no asynchronous device to wait for: ``.item()`` is a cheap read
and the two runs differ only by the ``log_loss`` block (the ``aten::item`` call and the
``print``). The CPU traces are still useful as the "no sync cost" baseline; the contrast the
guide describes needs ``--device cuda``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import harness
import torch
from torch import nn

BASE = "sync_in_loop"


def build_parser() -> argparse.ArgumentParser:
    """Script flags plus the harness's common profiling flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--sync",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print(loss.item()) every iteration (--no-sync: read the loss once at the end)",
    )
    p.add_argument("--hidden", type=int, default=512, help="MLP width")
    p.add_argument("--batch-size", type=int, default=256)
    harness.add_common_args(p)
    return p


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, harness.ProfileSettings]:
    """Parse flags and resolve profiler settings (``args.run`` is filled in)."""
    args = build_parser().parse_args(argv)
    if args.hidden < 1 or args.batch_size < 1:
        raise SystemExit("--hidden and --batch-size must be >= 1")
    parts = ["sync" if args.sync else "nosync"]
    if args.hidden != 512:
        parts.append(f"hidden{args.hidden}")
    if args.batch_size != 256:
        parts.append(f"bs{args.batch_size}")
    return harness.finish_args(args, BASE, parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Train an MLP on a fixed synthetic batch and write the trace; returns an exit code."""
    args, settings = parse_args(argv)
    harness.prepare(args)
    device = settings.device
    h = args.hidden
    model = nn.Sequential(
        nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch_size, h, device=device)
    y = torch.randn(args.batch_size, 1, device=device)
    running = torch.zeros((), device=device)

    def train_step(i: int) -> None:
        nonlocal running
        with harness.record_function("forward"):
            loss = nn.functional.mse_loss(model(x), y)
        with harness.record_function("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with harness.record_function("optimizer"):
            opt.step()
        with harness.record_function("log_loss"):
            if args.sync:
                print(f"iteration {i}: loss {loss.item():.5f}", flush=True)
            else:
                running = running + loss.detach()

    for i in range(settings.untimed):
        train_step(i)
    harness.synchronize(device)
    with harness.profiling(settings) as prof:
        for i in range(settings.steps):
            train_step(settings.untimed + i)
            prof.step()
    if not args.sync:
        n = settings.untimed + settings.steps
        print(f"mean loss over {n} iterations: {running.item() / n:.5f}")
    harness.announce(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
