"""``tb-diagnostics``: the command line.

    tb-diagnostics report LOGDIR [--run RUN] [--format text|json|markdown]
    tb-diagnostics rules [--format text|markdown]

Exit codes: 0 on success (bad files are reported inside the report), 1 when
trace files were found but none could be read, 2 on a usage error or an
unreadable LOGDIR.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import msgspec

from tb_diagnostics import __version__
from tb_diagnostics.analysis.verdict import (
    COMPUTE_BOUND,
    CPU_HEAVY_SELF_US,
    LOW_BUSY,
    Thresholds,
)
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.errors import LogDirError
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report import build_document
from tb_diagnostics.report.text import render_markdown, render_text


def _fraction(text: str) -> float:
    try:
        v = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (or 0% and 100%): {text!r}")
    return v


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tb-diagnostics",
        description="Explain PyTorch profiler traces step by step: what bounds each step, "
                    "with the evidence and the fix.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rep = sub.add_parser("report", help="analyse a log dir and print the verdict of every step")
    rep.add_argument("logdir", metavar="LOGDIR",
                     help="the log dir given to tensorboard_trace_handler (path or fsspec URL)")
    rep.add_argument("--run", help="only this run (its path relative to LOGDIR)")
    rep.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    rep.add_argument("-o", "--output", help="write the report to this file instead of stdout")
    rep.add_argument("--no-cache", action="store_true",
                     help="neither read nor write the cache of parsed traces "
                          "(TB_DIAGNOSTICS_CACHE, default ~/.cache/tb-diagnostics)")
    rep.add_argument("--workers", type=int, default=None, metavar="N",
                     help="analyse up to N files in parallel (default: one per core, at most 8)")
    th = rep.add_argument_group("verdict thresholds")
    th.add_argument("--compute-bound", type=_fraction, default=COMPUTE_BOUND, metavar="FRACTION",
                    help=f"device busy at or above this is compute-bound (default "
                         f"{COMPUTE_BOUND})")
    th.add_argument("--low-busy", type=_fraction, default=LOW_BUSY, metavar="FRACTION",
                    help=f"below this the main idle cause names the verdict (default {LOW_BUSY})")
    th.add_argument("--cpu-heavy-self-us", type=float, default=CPU_HEAVY_SELF_US, metavar="US",
                    help="CPU-only traces: op calls with at least this self time count as "
                         f"device work (default {CPU_HEAVY_SELF_US:g})")
    rules = sub.add_parser("rules", help="list every rule with what it detects and how to fix it")
    rules.add_argument("--format", choices=("text", "markdown"), default="text")
    return p


def _rules(args: argparse.Namespace) -> int:
    from tb_diagnostics.rules._catalogue import render_markdown, render_text

    sys.stdout.write(render_markdown() if args.format == "markdown" else render_text())
    return 0


def _progress_printer():
    """A one-line progress display on a terminal; silent when stderr is a file or a pipe."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int, f) -> None:
        end = "\n" if done == total else ""
        name = f.relpath if len(f.relpath) < 60 else "…" + f.relpath[-59:]
        sys.stderr.write(f"\r\x1b[Kanalysed {done}/{total}: {name}{end}")
        sys.stderr.flush()

    return show


def _fail(message: str, code: int = 2) -> int:
    print(f"tb-diagnostics: error: {message}", file=sys.stderr)
    return code


def _report(args: argparse.Namespace) -> int:
    try:
        thresholds = Thresholds(compute_bound=args.compute_bound, low_busy=args.low_busy,
                                cpu_heavy_self_us=args.cpu_heavy_self_us)
    except ValueError as exc:
        return _fail(str(exc))
    try:
        logdir = scan_logdir(args.logdir)
    except LogDirError as exc:
        return _fail(str(exc))
    if args.run is not None and logdir.run(args.run) is None:
        known = ", ".join(r.name for r in logdir.runs) or "none"
        return _fail(f"no run {args.run!r} in {args.logdir} (runs: {known})")

    if args.workers is not None and args.workers < 1:
        return _fail("--workers must be at least 1")
    cache = None if args.no_cache else TraceCache()
    doc = build_document(logdir, run=args.run, thresholds=thresholds, cache=cache,
                         workers=args.workers, progress=_progress_printer())
    if args.format == "json":
        text = msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"
    elif args.format == "markdown":
        text = render_markdown(doc)
    else:
        text = render_text(doc)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)

    spans = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    if spans and all(s["errors"] and not s["steps"] for s in spans):
        print("tb-diagnostics: no trace file could be read", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "report":
        return _report(args)
    if args.command == "rules":
        return _rules(args)
    return _fail(f"unknown command {args.command!r}")  # pragma: no cover - argparse guards


if __name__ == "__main__":
    sys.exit(main())
