"""``tb-diagnostics report LOGDIR``: the verdict of every step, with the findings."""

from __future__ import annotations

import argparse
import sys

from tb_diagnostics.commands import Command
from tb_diagnostics.commands._common import add_logdir_arguments, analyse, write_output
from tb_diagnostics.output import json_text
from tb_diagnostics.report.text import render_markdown, render_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_logdir_arguments(p)
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("-o", "--output", help="write the report to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    doc = analyse(args, run=args.run)
    if args.format == "json":
        text = json_text(doc)
    elif args.format == "markdown":
        text = render_markdown(doc)
    else:
        text = render_text(doc)
    write_output(text, args.output)
    spans = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    if spans and all(s["errors"] and not s["steps"] for s in spans):
        print("tb-diagnostics: no trace file could be read", file=sys.stderr)
        return 1
    return 0


COMMAND = Command(name="report", order=10, add_arguments=add_arguments, run=run,
                  help="analyse a log dir and print the verdict of every step")
