"""``tb-diagnostics rules``: every rule with what it detects, why it matters, how to fix it."""

from __future__ import annotations

import argparse
import sys

from tb_diagnostics.commands import Command


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "markdown"), default="text")


def run(args: argparse.Namespace) -> int:
    from tb_diagnostics.rules._catalogue import render_markdown, render_text

    sys.stdout.write(render_markdown() if args.format == "markdown" else render_text())
    return 0


COMMAND = Command(name="rules", order=20, add_arguments=add_arguments, run=run,
                  help="list every rule with what it detects and how to fix it")
