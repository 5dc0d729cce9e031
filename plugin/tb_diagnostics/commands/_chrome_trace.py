"""``tb-diagnostics export LOGDIR --format chrome-trace [--step N] -o FILE``.

One span (or one step of it) as Chrome-trace JSON for ui.perfetto.dev
(:mod:`tb_diagnostics.trace.chrome_export`): the events as the profiler wrote them.
A log dir of several spans needs ``--run``/``--worker``/``--span`` to name one.
An output name ending in ``.gz`` is gzipped.
"""

from __future__ import annotations

import argparse
import sys

from tb_diagnostics.analysis.span_timeline import file_range
from tb_diagnostics.commands._common import (
    CommandError,
    check_output_path,
    open_cache,
    open_logdir,
    thresholds_from,
)
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.opening import open_analysis
from tb_diagnostics.trace.chrome_export import chrome_trace, gzipped, read_json_bytes


def pick_span(args: argparse.Namespace) -> SpanFile:
    """The one span the flags name (every span of the log dir when it has one)."""
    ld = open_logdir(args.logdir, args.run)
    found = [f for r in ld.runs if args.run in (None, r.name) for w in r.workers
             if args.worker in (None, w.name) for f in w.spans if args.span in (None, f.span)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CommandError("no span matches --run/--worker/--span in " + args.logdir)
    listed = ", ".join(f"{f.run}/{f.worker}/{f.span}" for f in found[:8])
    more = f" and {len(found) - 8} more" if len(found) > 8 else ""
    raise CommandError(f"{len(found)} spans match ({listed}{more}): name one with "
                       "--run, --worker and --span")


def run_chrome_trace(args: argparse.Namespace) -> int:
    check_output_path(args.output)
    f = pick_span(args)
    try:
        rng = None
        if args.step is not None:
            analysis = open_analysis(f, thresholds_from(args), open_cache(args, args.logdir))
            index = next((w.index for w in analysis.windows if str(w.step) == args.step),
                         None)
            if index is None:
                known = ", ".join(str(w.step) for w in analysis.windows if w.step is not None)
                raise CommandError(f"no step {args.step} in {f.relpath} (steps: "
                                   f"{known or 'none'})")
            rng = file_range(analysis, index)
        data = chrome_trace(read_json_bytes(f.url, f.relpath), f.relpath, rng)
    except TraceLoadError as exc:
        raise CommandError(str(exc)) from None
    out = gzipped(data) if args.output.endswith(".gz") else data
    try:
        with open(args.output, "wb") as fh:
            fh.write(out)
    except OSError as exc:
        raise CommandError(f"cannot write the output to {args.output}: "
                           f"{exc.strerror or exc}") from None
    what = f"step {args.step} of " if args.step is not None else ""
    print(f"wrote {what}{f.relpath} to {args.output}: open it at ui.perfetto.dev "
          "(Open trace file)", file=sys.stderr)
    return 0
