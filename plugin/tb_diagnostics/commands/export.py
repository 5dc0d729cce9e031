"""``tb-diagnostics export LOGDIR --format html|markdown -o FILE``: a report to share.

HTML is one self-contained file (no script, no request: it opens from disk,
offline); Markdown is the summary to paste into a pull request or an issue.
"""

from __future__ import annotations

import argparse

from tb_diagnostics.commands import Command
from tb_diagnostics.commands._common import (
    add_logdir_arguments,
    analyse,
    open_cache,
    open_logdir,
    thresholds_from,
    write_output,
)
from tb_diagnostics.report.html import dispatch_chains, render_html
from tb_diagnostics.report.text import render_markdown


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_logdir_arguments(p)
    p.add_argument("--format", choices=("html", "markdown"), default="html")
    p.add_argument("-o", "--output", required=True, help="the file to write")


def run(args: argparse.Namespace) -> int:
    doc = analyse(args, run=args.run)
    if args.format == "markdown":
        text = render_markdown(doc)
    else:
        cache = open_cache(args, args.logdir)
        chains = dispatch_chains(open_logdir(args.logdir), doc, thresholds_from(args), cache)
        text = render_html(doc, chains)
    write_output(text, args.output)
    return 0


COMMAND = Command(name="export", order=15, add_arguments=add_arguments, run=run,
                  help="write a shareable report: one self-contained HTML file or Markdown")
