"""One profiling harness shared by every workload script.

Every experiment in ``workloads/`` records its trace the same way, so that differences between
two runs come from the workload and never from how it was profiled:

* ``torch.profiler.profile`` with ``activities`` chosen from the device actually used:
  CPU always, plus CUDA when the workload runs on a CUDA (or ROCm) device. Tracing CUDA while
  the workload runs on the CPU would only add an empty device track.
* ``schedule(wait, warmup, active, repeat)``. The defaults are **wait=0, warmup=0, active=5,
  repeat=1**: the very first step of the process is recorded on purpose, so the cold start
  (first-call dispatch, allocator growth, kernel selection, lazy init) is visible in the
  trace. torch warns that "Profiler won't be using warmup" when warmup=0; that is the point
  here, so the harness silences that one warning.
* ``--warmup N`` hides the cold start: N untimed iterations before anything is recorded.
  The profiler has a cold start of its own (about 1 ms of set-up inside the first recorded
  step, measured on the 2-core dev machine, which alone makes step 0 the slowest of a 64 x 64
  matmul), so unless ``--sched-warmup`` is given explicitly, ``--warmup N`` runs N - 1
  iterations before the profiler starts and the last one as the schedule's warmup step
  (profiler running, nothing recorded). Either way, N iterations run before the first
  recorded step.
* ``on_trace_ready=tensorboard_trace_handler(LOGDIR/<run>, worker_name=..., use_gzip=...)``
  with deterministic worker names (``worker0``, or ``rank0``/``rank1`` for distributed runs),
  so a run directory always contains the same file names apart from the timestamp torch adds.
* ``record_shapes``, ``profile_memory`` and ``with_stack`` are off unless asked for; they make
  traces several times larger and the profiler slower.
* ``--threads`` (default **1**) sets torch's intra-op thread count. On a CPU-only trace "the
  CPU is the device", and the profiler sees only the calling thread: with one thread, an
  op's duration is exactly the work it did. With several intra-op threads on a small shared
  machine, one busy core stalls every OpenMP barrier: we saw a 64 x 64 matmul take 5 ms
  instead of 10 us while another test suite ran, which turns an overhead-bound step into a
  "compute-bound" one. ``--threads 0`` keeps torch's default (one thread per core).
* The run directory is cleaned (old ``*.pt.trace.json[.gz]`` files of *that run only*) before
  the new trace is written, so reruns never accumulate spans.

``--no-schedule`` profiles without a schedule, as ``torch.profiler.profile()`` is often called:
every iteration is recorded, into one trace written when the profiler exits, and the trace has
no ``ProfilerStep#`` events at all (``prof.step()`` only marks steps under a schedule), so a
diagnosis has to find the iterations itself. The schedule flags are then ignored, except that
``--steps`` still defaults to what they add up to.

Flag names: the profiler schedule uses ``--sched-wait/--sched-warmup/--sched-active/
--sched-repeat`` because ``--warmup N`` already means "run the step N times before profiling".

``--steps`` is the number of loop iterations run under the profiler (each followed by
``prof.step()``); by default it is exactly what the schedule needs,
``(wait + warmup + active) * repeat``, so ``--warmup N`` still means N iterations before the
first recorded step (the one used as the profiler's warmup step counts among ``--steps``).
A smaller ``--steps`` cuts the last cycle short; torch then also records the step that was
opened by the last ``prof.step()`` and is closed, nearly empty, when the profiler exits.

The default run name is derived from the script name and its options (for example
``matmul_add-size64-cpu``, ``matmul_add-size64-warmup3-cpu``), so two different settings never
overwrite each other's traces. Common options appear in the name only when they differ from
their defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shlex
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import (
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)

__all__ = [
    "DEFAULT_LOGDIR",
    "TRACE_SUFFIXES",
    "ProfileSettings",
    "activities_for",
    "add_common_args",
    "announce",
    "clean_run_dir",
    "discard_run",
    "finish_args",
    "prepare",
    "profiling",
    "record_function",
    "resolve_device",
    "run_name",
    "seed_everything",
    "set_threads",
    "synchronize",
    "trace_files",
]

DEFAULT_LOGDIR = "./log"
TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")

#: Schedule defaults; see the module docstring for why warmup is 0.
SCHED_DEFAULTS = {"wait": 0, "warmup": 0, "active": 5, "repeat": 1}


@dataclass(frozen=True)
class ProfileSettings:
    """Everything the profiler needs, resolved from the command line once.

    ``untimed`` iterations run before the profiler starts, then ``steps`` iterations under
    it, each followed by ``prof.step()``.
    """

    logdir: Path
    run: str
    device: torch.device
    wait: int
    warmup: int
    active: int
    repeat: int
    steps: int
    untimed: int
    gzip: bool
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    schedule: bool = True  # False: no schedule, so no ProfilerStep# in the trace

    @property
    def run_dir(self) -> Path:
        """Directory that receives this run's trace files (``LOGDIR/<run>``)."""
        return self.logdir / self.run


def add_common_args(
    parser: argparse.ArgumentParser,
    *,
    active: int = SCHED_DEFAULTS["active"],
    profile_memory: bool = False,
) -> None:
    """Add the flags every workload shares.

    ``active`` lets a script record more steps by default (a memory leak needs a few steps to
    show a slope); ``profile_memory`` lets a script whose experiment *is* memory turn it on by
    default (``--no-profile-memory`` still turns it off).
    """
    g = parser.add_argument_group("profiling (common to all workloads)")
    g.add_argument("--logdir", default=DEFAULT_LOGDIR, help="TensorBoard log directory")
    g.add_argument(
        "--run",
        default=None,
        help="run name (sub-directory of --logdir); default: derived from script and options",
    )
    g.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    g.add_argument(
        "--steps",
        type=int,
        default=None,
        help="iterations run under the profiler; default: what the schedule needs",
    )
    g.add_argument(
        "--warmup",
        type=int,
        default=0,
        metavar="N",
        help="untimed iterations before the profiler starts (hides the cold start)",
    )
    g.add_argument("--sched-wait", type=int, default=SCHED_DEFAULTS["wait"], metavar="N")
    g.add_argument(
        "--sched-warmup",
        type=int,
        default=None,
        metavar="N",
        help="profiler warmup steps (default 0, or 1 taken from --warmup when it is > 0)",
    )
    g.add_argument("--sched-active", type=int, default=active, metavar="N")
    g.add_argument("--sched-repeat", type=int, default=SCHED_DEFAULTS["repeat"], metavar="N")
    g.add_argument(
        "--schedule",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-schedule: record every iteration without a schedule (no ProfilerStep#)",
    )
    g.add_argument(
        "--gzip", action=argparse.BooleanOptionalAction, default=True, help="gzip trace files"
    )
    g.add_argument("--seed", type=int, default=0)
    g.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="torch intra-op threads (default 1, see module doc; 0 = torch's default)",
    )
    g.add_argument("--record-shapes", action=argparse.BooleanOptionalAction, default=False)
    g.add_argument(
        "--profile-memory", action=argparse.BooleanOptionalAction, default=profile_memory
    )
    g.add_argument("--with-stack", action=argparse.BooleanOptionalAction, default=False)
    parser.set_defaults(_profile_memory_default=profile_memory, _active_default=active)


def resolve_device(choice: str) -> torch.device:
    """Map ``auto|cpu|cuda`` to a device, failing loudly when CUDA was asked for but is absent."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda was requested but torch.cuda.is_available() is False")
    return torch.device(choice)


def activities_for(device: torch.device) -> list[ProfilerActivity]:
    """CPU always; CUDA too when the workload runs there (ROCm builds also use CUDA)."""
    acts = [ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def run_name(base: str, parts: Sequence[str], args: argparse.Namespace, device: str) -> str:
    """Build a run name such as ``matmul_add-size64-warmup3-cpu``.

    ``parts`` are the script's own option tags; common options are appended only when they
    differ from their defaults, and the device type always comes last.
    """
    tags = [base, *parts]
    if args.warmup:
        tags.append(f"warmup{args.warmup}")
    explicit = (args.sched_wait, args.sched_warmup, args.sched_active, args.sched_repeat)
    default = (SCHED_DEFAULTS["wait"], None, args._active_default, SCHED_DEFAULTS["repeat"])
    if explicit != default:
        wait, warmup, active, repeat = _schedule(args)[:4]
        tags.append(f"sched{wait}-{warmup}-{active}x{repeat}")
    if not getattr(args, "schedule", True):
        tags.append("nosched")
    if args.steps is not None:
        tags.append(f"steps{args.steps}")
    if args.seed:
        tags.append(f"seed{args.seed}")
    if args.threads != 1:
        tags.append(f"threads{args.threads}" if args.threads else "threadsall")
    if args.record_shapes:
        tags.append("shapes")
    if args.profile_memory != args._profile_memory_default:
        tags.append("mem" if args.profile_memory else "nomem")
    if args.with_stack:
        tags.append("stack")
    tags.append(device)
    return "-".join(t for t in tags if t)


def _schedule(args: argparse.Namespace) -> tuple[int, int, int, int, int]:
    """(wait, warmup, active, repeat, untimed) after the --warmup/--sched-warmup rule."""
    untimed = args.warmup
    warmup = args.sched_warmup
    if warmup is None:
        warmup = 1 if args.warmup > 0 else 0
        untimed = max(0, args.warmup - warmup)
    return args.sched_wait, warmup, args.sched_active, args.sched_repeat, untimed


def _check_run_name(run: str) -> None:
    """A run name is one path component: cleaning must never reach outside LOGDIR/<run>."""
    if not run or run in {".", ".."} or "/" in run or "\\" in run:
        raise SystemExit(f"--run must be a single directory name, got {run!r}")


def finish_args(
    args: argparse.Namespace, base: str, parts: Sequence[str]
) -> tuple[argparse.Namespace, ProfileSettings]:
    """Validate common flags, fill in ``args.run`` and return the resolved settings."""
    for flag in ("sched_wait", "warmup", "threads"):
        if getattr(args, flag) < 0:
            raise SystemExit(f"--{flag.replace('_', '-')} must be >= 0")
    if args.sched_warmup is not None and args.sched_warmup < 0:
        raise SystemExit("--sched-warmup must be >= 0")
    if args.sched_active < 1 or args.sched_repeat < 1:
        raise SystemExit("--sched-active and --sched-repeat must be >= 1")
    wait, warmup, active, repeat, untimed = _schedule(args)
    device = resolve_device(args.device)
    if args.run is None:
        args.run = run_name(base, parts, args, device.type)
    _check_run_name(args.run)
    needed = (wait + warmup + active) * repeat
    steps = needed if args.steps is None else args.steps
    if steps < 1:
        raise SystemExit("--steps must be >= 1")
    if steps < needed and args.schedule:
        print(
            f"note: --steps {steps} < {needed} needed by the schedule; the last profiling "
            "cycle is cut short",
            file=sys.stderr,
        )
    settings = ProfileSettings(
        logdir=Path(args.logdir),
        run=args.run,
        device=device,
        wait=wait,
        warmup=warmup,
        active=active,
        repeat=repeat,
        steps=steps,
        untimed=untimed,
        gzip=args.gzip,
        record_shapes=args.record_shapes,
        profile_memory=args.profile_memory,
        with_stack=args.with_stack,
        schedule=args.schedule,
    )
    return args, settings


def seed_everything(seed: int) -> None:
    """Seed Python and torch so synthetic data and weights are the same on every run."""
    random.seed(seed)
    torch.manual_seed(seed)


def set_threads(threads: int) -> None:
    """Apply ``--threads`` (0 leaves torch's default alone); see the module docstring."""
    if threads > 0:
        torch.set_num_threads(threads)


def prepare(args: argparse.Namespace) -> None:
    """Per-process set-up every workload does before building its data: seed and threads."""
    seed_everything(args.seed)
    set_threads(args.threads)


def trace_files(run_dir: Path, worker: str | None = None) -> list[Path]:
    """Trace files in ``run_dir`` (optionally only one worker's), sorted by name."""
    if not run_dir.is_dir():
        return []
    found = [
        p
        for p in run_dir.iterdir()
        if p.is_file()
        and p.name.endswith(TRACE_SUFFIXES)
        and (worker is None or p.name.startswith(worker + "."))
    ]
    return sorted(found)


def clean_run_dir(run_dir: Path, worker: str | None = None) -> list[Path]:
    """Delete old trace files of this run (only trace files, only in this directory).

    tensorboard_trace_handler adds a timestamp to every file name, so without this a rerun
    would leave the previous trace next to the new one and the run would show twice the spans.
    """
    removed = trace_files(run_dir, worker)
    for p in removed:
        p.unlink()
    return removed


def discard_run(settings: ProfileSettings) -> None:
    """Remove a failed run's half-written traces (and its directory, if nothing else is in it)."""
    clean_run_dir(settings.run_dir)
    with contextlib.suppress(OSError):
        settings.run_dir.rmdir()


@contextlib.contextmanager
def profiling(
    settings: ProfileSettings, worker: str = "worker0", *, clean: bool = True
) -> Iterator[profile]:
    """Yield a started ``torch.profiler.profile``; call ``prof.step()`` after each step.

    ``clean=False`` is for multi-process runs where the parent already cleaned the directory
    and several workers write into it at once.
    """
    run_dir = settings.run_dir
    if clean:
        clean_run_dir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # warmup=0 is deliberate (the cold start is part of the experiment); see module doc.
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
        sched = schedule(
            wait=settings.wait,
            warmup=settings.warmup,
            active=settings.active,
            repeat=settings.repeat,
        )
    prof = profile(
        activities=activities_for(settings.device),
        # Without a schedule torch records every step and writes no ProfilerStep#.
        schedule=sched if settings.schedule else None,
        on_trace_ready=tensorboard_trace_handler(
            str(run_dir), worker_name=worker, use_gzip=settings.gzip
        ),
        record_shapes=settings.record_shapes,
        profile_memory=settings.profile_memory,
        with_stack=settings.with_stack,
    )
    with prof:
        yield prof


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so untimed warm-up really finishes before profiling."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def announce(settings: ProfileSettings, extra: str = "") -> list[Path]:
    """Print where the trace went and how to look at it; return the trace files."""
    files = trace_files(settings.run_dir)
    print(f"run {settings.run!r} on {settings.device}: {len(files)} trace file(s)")
    for p in files:
        print(f"  {p}")
    if extra:
        print(extra)
    logdir = shlex.quote(str(settings.logdir))
    print("view it with:")
    print(f"  tensorboard --logdir {logdir}")
    print(f"  tb-diagnostics report {logdir} --run {shlex.quote(settings.run)}")
    return files
