"""Data-parallel training on ``--world-size`` ranks with an explicit gradient all-reduce.

``torch.multiprocessing.spawn`` starts one process per rank on this machine (rendezvous on
127.0.0.1 and a free port). Backend: ``gloo`` on the CPU, ``nccl`` when every rank gets its
own GPU (``--device auto`` picks CUDA only if there are at least ``--world-size`` GPUs).
Each rank trains the same small MLP on its own synthetic batch and, after ``backward``,
all-reduces every gradient (``dist.all_reduce`` + divide by the world size, what DDP does
under the hood) inside a ``all_reduce_grads`` block.

All ranks write into the *same* run directory, one trace file per rank, with the worker
names ``rank0``, ``rank1``, ... so the tab can compare them side by side.

``--straggler RANK`` makes that rank sleep ``--straggler-ms`` (default 30) in every step, in a
block labelled ``simulated_straggler``, as if its input or its GPU were slower. The other
ranks then spend that time waiting inside the all-reduce: a collective is only as fast as
the slowest rank, and their steps turn sync-bound while the straggler's own step looks idle.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import time
from collections.abc import Sequence

import harness
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

BASE = "distributed"


def build_parser() -> argparse.ArgumentParser:
    """Script flags plus the harness's common profiling flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world-size", type=int, default=2, help="number of ranks (processes)")
    p.add_argument(
        "--straggler",
        type=int,
        default=None,
        metavar="RANK",
        help="rank that sleeps --straggler-ms in every step",
    )
    p.add_argument("--straggler-ms", type=float, default=30.0)
    p.add_argument("--hidden", type=int, default=256, help="MLP width")
    p.add_argument("--batch-size", type=int, default=64, help="per-rank batch size")
    harness.add_common_args(p)
    return p


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, harness.ProfileSettings]:
    """Parse flags and resolve profiler settings (``args.run`` is filled in).

    ``--device auto`` means CUDA only when each rank can have a GPU of its own (NCCL needs one
    device per rank); otherwise all ranks run on the CPU with gloo.
    """
    args = build_parser().parse_args(argv)
    if args.world_size < 1 or args.hidden < 1 or args.batch_size < 1:
        raise SystemExit("--world-size, --hidden and --batch-size must be >= 1")
    if args.straggler is not None and not 0 <= args.straggler < args.world_size:
        raise SystemExit(f"--straggler must be a rank in [0, {args.world_size})")
    if args.device == "auto" and torch.cuda.device_count() < args.world_size:
        args.device = "cpu"
    if args.device == "cuda" and torch.cuda.device_count() < args.world_size:
        raise SystemExit(
            f"--device cuda needs one GPU per rank: {torch.cuda.device_count()} GPU(s) for "
            f"--world-size {args.world_size}"
        )
    parts = [f"ws{args.world_size}"]
    if args.straggler is not None:
        parts.append(f"straggler{args.straggler}")
        if args.straggler_ms != 30.0:
            parts.append(f"{args.straggler_ms:g}ms")
    if args.hidden != 256:
        parts.append(f"hidden{args.hidden}")
    if args.batch_size != 64:
        parts.append(f"bs{args.batch_size}")
    return harness.finish_args(args, BASE, parts)


def free_port() -> int:
    """A TCP port that was free a moment ago on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_rank(
    rank: int, args: argparse.Namespace, settings: harness.ProfileSettings, port: int
) -> None:
    """Body of one rank (the target of mp.spawn, so it must be a module-level function)."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    world = args.world_size
    if settings.device.type == "cuda":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        # Ranks share the machine's cores; with --threads 0 each rank gets its share of them
        # instead of torch's default (all cores per rank: oversubscription adds noise).
        harness.set_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
        backend = "gloo"
    dist.init_process_group(
        backend,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        harness.seed_everything(args.seed)  # same initial weights on every rank
        h = args.hidden
        model = nn.Sequential(
            nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1)
        ).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(args.seed * 1000 + rank)  # own data per rank
        x = torch.randn(args.batch_size, h, generator=g).to(device)
        y = torch.randn(args.batch_size, 1, generator=g).to(device)
        slow = args.straggler == rank

        def train_step() -> None:
            if slow:
                with harness.record_function("simulated_straggler"):
                    time.sleep(args.straggler_ms / 1000.0)
            with harness.record_function("forward"):
                loss = nn.functional.mse_loss(model(x), y)
            with harness.record_function("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with harness.record_function("all_reduce_grads"):
                for p in model.parameters():
                    if p.grad is not None:
                        dist.all_reduce(p.grad)
                        p.grad.div_(world)
            with harness.record_function("optimizer"):
                opt.step()

        for _ in range(settings.untimed):
            train_step()
        harness.synchronize(device)
        dist.barrier()  # all ranks start profiling together
        with harness.profiling(settings, worker=f"rank{rank}", clean=False) as prof:
            for _ in range(settings.steps):
                train_step()
                prof.step()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    """Spawn the ranks, wait for them, and report the per-rank trace files."""
    args, settings = parse_args(argv)
    # Clean once here: the ranks write concurrently into the same directory.
    harness.clean_run_dir(settings.run_dir)
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    mp.spawn(run_rank, args=(args, settings, port), nprocs=args.world_size, join=True)
    extra = ""
    if args.straggler is not None:
        extra = f"rank{args.straggler} slept {args.straggler_ms:g} ms per step (straggler)"
    harness.announce(settings, extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
