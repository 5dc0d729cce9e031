"""``tb-diagnostics compare LOGDIR --baseline RUN_A --candidate RUN_B``: what changed."""

from __future__ import annotations

import argparse

from tb_diagnostics.commands import Command
from tb_diagnostics.commands._common import add_logdir_arguments, write_output
from tb_diagnostics.commands._sides import add_side_arguments, compare_sides, resolve_sides
from tb_diagnostics.output import json_text
from tb_diagnostics.report.compare import render_compare_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_logdir_arguments(p, run=False)
    add_side_arguments(p, baseline_help="the baseline run (in --baseline-logdir, default "
                                        "LOGDIR), or a JSON file of `report --format json`")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    base, cand = resolve_sides(args)
    doc = compare_sides(args, base, cand, with_times=True)
    if args.format == "json":
        text = json_text(doc)
    else:
        text = render_compare_text(doc, markdown=args.format == "markdown")
    write_output(text, args.output)
    return 0


COMMAND = Command(name="compare", order=20, add_arguments=add_arguments, run=run,
                  help="compare two runs: step deltas, verdict and finding changes, the ops "
                       "and kernels that changed most")
