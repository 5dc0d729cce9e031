"""What several commands share: the log dir arguments, thresholds, errors, output."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterable
from typing import Any

from tb_diagnostics.analysis.cost.peaks import PEAKS_ENV, PeaksFileError, load_overrides
from tb_diagnostics.analysis.verdict import COMPUTE_BOUND, CPU_HEAVY_SELF_US, LOW_BUSY, Thresholds
from tb_diagnostics.cache import CacheLocationError, TraceCache, cache_for_logdir
from tb_diagnostics.engine import MAX_WORKERS, build_document
from tb_diagnostics.errors import LogDirError
from tb_diagnostics.executors import ExecutorError, open_executor
from tb_diagnostics.logdir import LogDir, scan_logdir


class CommandError(Exception):
    """A usage problem or an unreadable log dir: one line on stderr, exit code 2."""


def fraction(text: str) -> float:
    """``0.8`` or ``80%``."""
    try:
        v = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (or 0% and 100%): {text!r}")
    return v


def finite_us(text: str) -> float:
    """A duration in µs: a finite number, at least 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of µs, at least 0: {text!r}")
    return v


def add_logdir_arguments(p: argparse.ArgumentParser, *, run: bool = True) -> None:
    """LOGDIR, --run, the cache and pool switches and the verdict thresholds."""
    p.add_argument("logdir", metavar="LOGDIR",
                   help="the log dir given to tensorboard_trace_handler (path or fsspec URL)")
    if run:
        p.add_argument("--run", help="only this run (its path relative to LOGDIR)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the cache of parsed traces "
                        "(TB_DIAGNOSTICS_CACHE, default ~/.cache/tb-diagnostics)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="analyse up to N files in parallel (default: one per core, at most 8)")
    p.add_argument("--executor", default=None, metavar="local|dask://HOST:PORT",
                   help="where files are analysed: the local process pool (default) or a "
                        "Dask scheduler (env TB_DIAGNOSTICS_EXECUTOR; needs tb-diagnostics[dask])")
    p.add_argument("--peaks", default=None, metavar="FILE.json",
                   help="device peak TFLOP/s and GB/s that update or add to the shipped "
                        "table (also $TB_DIAGNOSTICS_PEAKS; a \"cpu\" entry gives CPU-only "
                        "traces a roofline); see docs/peaks.md")
    th = p.add_argument_group("verdict thresholds")
    th.add_argument("--compute-bound", type=fraction, default=COMPUTE_BOUND, metavar="FRACTION",
                    help="compute busy (device activity that is not a collective kernel, "
                         "over the step without the profiler's time and one-time costs) at "
                         f"or above this is compute-bound (default {COMPUTE_BOUND})")
    th.add_argument("--low-busy", type=fraction, default=LOW_BUSY, metavar="FRACTION",
                    help="compute busy below this lets the main idle cause name the verdict "
                         f"(default {LOW_BUSY})")
    th.add_argument("--cpu-heavy-self-us", type=finite_us, default=CPU_HEAVY_SELF_US,
                    metavar="US",
                    help="CPU-only traces: op calls with at least this self time count as "
                         f"device work (default {CPU_HEAVY_SELF_US:g})")


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    try:
        return Thresholds(compute_bound=args.compute_bound, low_busy=args.low_busy,
                          cpu_heavy_self_us=args.cpu_heavy_self_us)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def open_logdir(logdir: str, run: str | None = None) -> LogDir:
    try:
        ld = scan_logdir(logdir)
    except LogDirError as exc:
        raise CommandError(str(exc)) from None
    if run is not None and ld.run(run) is None:
        known = ", ".join(r.name for r in ld.runs) or "none"
        raise CommandError(f"no run {run!r} in {logdir} (runs: {known})")
    return ld


def open_cache(args: argparse.Namespace, logdir: str) -> TraceCache | None:
    """The cache for analysing ``logdir``, None with ``--no-cache``; a cache directory inside
    the log dir is refused (nothing is ever written there)."""
    if args.no_cache:
        return None
    try:
        return cache_for_logdir(logdir)
    except CacheLocationError as exc:
        raise CommandError(f"{exc} (or use --no-cache)") from None


def progress_printer():
    """A one-line progress display on a terminal; silent when stderr is a file or a pipe."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int, f) -> None:
        end = "\n" if done == total else ""
        name = f.relpath if len(f.relpath) < 60 else "…" + f.relpath[-59:]
        sys.stderr.write(f"\r\x1b[Kanalysed {done}/{total}: {name}{end}")
        sys.stderr.flush()

    return show


def use_peaks_file(path: str | None) -> None:
    """Check ``--peaks`` and hand it to the analysis (and its worker processes) through
    ``$TB_DIAGNOSTICS_PEAKS``, the variable the tab reads too."""
    if not path:
        return
    try:
        load_overrides(path)
    except PeaksFileError as exc:
        raise CommandError(str(exc)) from None
    os.environ[PEAKS_ENV] = os.path.abspath(path)


def check_output_path(path: str | None) -> None:
    """Refuse an output path that cannot be written before the analysis starts, not after."""
    if not path:
        return
    if os.path.isdir(path):
        raise CommandError(f"cannot write the output to {path}: it is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CommandError(f"cannot write the output to {path}: no directory {parent}")
    if not os.access(parent if not os.path.exists(path) else path, os.W_OK):
        raise CommandError(f"cannot write the output to {path}: permission denied")


def analyse(args: argparse.Namespace, logdir: str | None = None,
            run: str | None = None) -> dict[str, Any]:
    """The report document of ``logdir`` (default ``args.logdir``), honouring the flags."""
    if args.workers is not None and args.workers < 1:
        raise CommandError("--workers must be at least 1")
    if args.workers is not None and args.workers > MAX_WORKERS:
        print(f"tb-diagnostics: note: --workers {args.workers} capped at {MAX_WORKERS} "
              "(each worker holds a model in memory)", file=sys.stderr)
        args.workers = MAX_WORKERS
    if not (logdir or args.logdir):
        raise CommandError("LOGDIR is empty: give the log dir to analyse")
    check_output_path(getattr(args, "output", None))
    use_peaks_file(getattr(args, "peaks", None))
    thresholds = thresholds_from(args)
    ld = open_logdir(logdir or args.logdir, run)
    cache = open_cache(args, logdir or args.logdir)
    try:
        with open_executor(getattr(args, "executor", None)) as executor:
            return build_document(ld, run=run, thresholds=thresholds, cache=cache,
                                  workers=args.workers, executor=executor,
                                  progress=progress_printer())
    except ExecutorError as exc:
        raise CommandError(str(exc)) from None


def write_output(text: str | Iterable[bytes], path: str | None) -> None:
    """Write ``text`` (a string, or UTF-8 byte chunks in order) to ``path`` or stdout."""
    if path:
        try:
            if isinstance(text, str):
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
            else:  # bytes as they are: no decoded copy of gigabytes of JSON
                with open(path, "wb") as fb:
                    for chunk in text:
                        fb.write(chunk)
        except OSError as exc:
            raise CommandError(f"cannot write the output to {path}: "
                               f"{exc.strerror or exc}") from None
    elif isinstance(text, str):
        sys.stdout.write(text)
    else:
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:  # a text-only stdout (a test's capture): the decoded text
            sys.stdout.write("".join(chunk.decode() for chunk in text))
            return
        sys.stdout.flush()
        for chunk in text:
            buffer.write(chunk)
        buffer.flush()
