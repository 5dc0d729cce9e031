"""Train a small CNN on synthetic images through a real ``torch.utils.data.DataLoader``.

This is the guide's "is my training loop input-bound?" experiment. The images are made up
(seeded random tensors built once in the Dataset), so the run needs no download, but they are
served through a real DataLoader, so the trace contains the genuine
``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` (or ``_MultiProcessing...``)
blocks a diagnosis has to recognise.

* default: the data is in memory, ``__getitem__`` is an index; the step is dominated by the
  convolutions' forward/backward (on CPU: compute-bound or close to it).
* ``--slow-input [MS]``: every ``__getitem__`` sleeps MS milliseconds (default 4), as a slow
  decoder or a remote file system would. With ``--num-workers 0`` the main process does the
  sleeping inside ``__next__``: the step is ``input-bound`` (measured: ~138 ms of a
  170-225 ms step). ``--num-workers`` moves the loading into worker processes; a batch then
  takes 32 x 4 ms = 128 ms in one worker against ~30 ms of training, so it takes about
  8 workers (sleeping costs no CPU, so 8 fit on 2 cores) plus ``--warmup 2`` to fill the
  prefetch queue before the steps are compute-bound again; 2 workers only halve the wait.
* ``--pin-memory`` pins the batches (only meaningful when the model is on CUDA; on the CPU it
  is ignored with a note), and batches are copied with ``non_blocking=True``.
* ``--amp`` runs forward and loss under ``torch.autocast`` (bfloat16 on CPU, float16 with a
  GradScaler on CUDA).

Each step is labelled ``forward``, ``backward`` and ``optimizer`` with record_function;
the DataLoader labels its own ``enumerate(DataLoader)...`` blocks.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import harness
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BASE = "train_cnn"
IMAGE_SHAPE = (3, 32, 32)
NUM_CLASSES = 10


class SyntheticImages(Dataset):
    """``n`` seeded random images with labels; optionally slow to read, on purpose.

    The whole set is generated once in ``__init__`` so that ``__getitem__`` costs nothing
    unless ``delay_s`` asks for an artificial per-sample delay (time.sleep: the process is idle
    while waiting, like a blocking read, which is exactly what an input-bound step looks like).
    """

    def __init__(self, n: int, seed: int, delay_s: float = 0.0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn((n, *IMAGE_SHAPE), generator=g)
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.images[i], self.labels[i]


class SmallCNN(nn.Module):
    """Three conv layers and a linear head: ~57k parameters, ~30 ms per batch on one CPU core."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(IMAGE_SHAPE[0], width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * width, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def build_parser() -> argparse.ArgumentParser:
    """Script flags plus the harness's common profiling flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument("--amp", action="store_true", help="autocast (bf16 on CPU, fp16 on CUDA)")
    p.add_argument(
        "--slow-input",
        type=float,
        nargs="?",
        const=4.0,
        default=0.0,
        metavar="MS",
        help="sleep MS milliseconds in every Dataset __getitem__ (default when given: 4)",
    )
    p.add_argument("--width", type=int, default=32, help="channels of the first conv")
    harness.add_common_args(p)
    return p


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[argparse.Namespace, harness.ProfileSettings]:
    """Parse flags and resolve profiler settings (``args.run`` is filled in)."""
    args = build_parser().parse_args(argv)
    if args.batch_size < 1 or args.num_workers < 0 or args.slow_input < 0 or args.width < 1:
        raise SystemExit("--batch-size/--width must be >= 1, --num-workers/--slow-input >= 0")
    parts = [f"bs{args.batch_size}"]
    if args.width != 32:
        parts.append(f"width{args.width}")
    if args.num_workers:
        parts.append(f"workers{args.num_workers}")
    if args.pin_memory:
        parts.append("pin")
    if args.amp:
        parts.append("amp")
    if args.slow_input:
        parts.append(f"slowinput{args.slow_input:g}ms")
    return harness.finish_args(args, BASE, parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Train for warm-up + profiled steps and write the trace; returns an exit code."""
    args, settings = parse_args(argv)
    harness.prepare(args)
    device = settings.device
    total = settings.untimed + settings.steps
    pin = args.pin_memory and device.type == "cuda"
    if args.pin_memory and not pin:
        print("note: --pin-memory only matters when the model is on CUDA; ignored on CPU")

    dataset = SyntheticImages(total * args.batch_size, args.seed, args.slow_input / 1000.0)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
        pin_memory=pin,
        drop_last=True,
        generator=torch.Generator().manual_seed(args.seed),
    )
    model = SmallCNN(args.width).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp and device.type == "cuda")

    def train_step(x: torch.Tensor, y: torch.Tensor) -> None:
        x = x.to(device, non_blocking=pin)
        y = y.to(device, non_blocking=pin)
        with (
            harness.record_function("forward"),
            torch.autocast(device.type, dtype=amp_dtype, enabled=args.amp),
        ):
            loss = loss_fn(model(x), y)
        with harness.record_function("backward"):
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
        with harness.record_function("optimizer"):
            scaler.step(opt)
            scaler.update()

    # One iterator for warm-up and profiled steps, so worker start-up (num_workers > 0) is
    # paid before profiling when --warmup is given, and recorded in step 0 when it is not.
    batches = iter(loader)
    for _ in range(settings.untimed):
        train_step(*next(batches))
    harness.synchronize(device)
    with harness.profiling(settings) as prof:
        for _ in range(settings.steps):
            train_step(*next(batches))
            prof.step()
    harness.synchronize(device)
    del batches  # shut worker processes down before reporting
    harness.announce(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
