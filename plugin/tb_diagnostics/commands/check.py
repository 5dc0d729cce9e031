"""``tb-diagnostics check LOGDIR --baseline RUN_OR_JSON``: a CI regression gate.

Exit 1 with the reasons when the candidate's median warm step time regresses
past ``--max-regression`` or a finding of ``--fail-on`` severity (or worse)
appears; 0 otherwise; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys

from tb_diagnostics.commands import Command
from tb_diagnostics.commands._common import add_logdir_arguments, write_output
from tb_diagnostics.commands._sides import add_side_arguments, compare_sides, resolve_sides
from tb_diagnostics.output import json_text
from tb_diagnostics.report.compare import SEVERITIES, check_compare, render_check_text


def regression(text: str) -> float:
    """``10%`` or ``0.1``: a non-negative fraction (above 100% allowed)."""
    try:
        v = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_logdir_arguments(p, run=False)
    add_side_arguments(p, baseline_help="the baseline: a run (in --baseline-logdir, default "
                                        "LOGDIR) or a JSON file of `report --format json` or "
                                        "`check --format json`")
    p.add_argument("--max-regression", type=regression, default=0.10, metavar="PCT",
                   help="fail when the median warm step time grows by more (default 10%%)")
    p.add_argument("--fail-on", choices=(*SEVERITIES, "none"), default="critical",
                   help="fail when a new finding of this severity or worse appears "
                        "(default critical; none: never)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    base, cand = resolve_sides(args)
    cmp = compare_sides(args, base, cand, with_times=False)
    doc = check_compare(cmp, max_regression=args.max_regression,
                        fail_on=None if args.fail_on == "none" else args.fail_on)
    if args.format == "json":
        # The candidate's report rides along, so this file can be the next baseline.
        doc["report"] = {"schema": 1, "logdir": cand.logdir, "runs": [cand.run]}
        text = json_text(doc)
    else:
        text = render_check_text(doc)
    write_output(text, args.output)
    if not doc["ok"] and args.format == "json" and args.output is None:
        print("tb-diagnostics: check failed: " + "; ".join(doc["reasons"]), file=sys.stderr)
    return 0 if doc["ok"] else 1


COMMAND = Command(name="check", order=30, add_arguments=add_arguments, run=run,
                  help="CI gate: exit 1 when the candidate regresses against a baseline")
