"""``tb-diagnostics export LOGDIR --format html|markdown|chrome-trace -o FILE``: to share.

HTML is one self-contained file (no script, no request: it opens from disk,
offline); Markdown is the summary to paste into a pull request or an issue;
chrome-trace is one span, or with ``--step N`` one step, as Chrome-trace JSON for
ui.perfetto.dev (:mod:`._chrome_trace`).
"""

from __future__ import annotations

import argparse

from tb_diagnostics.commands import Command
from tb_diagnostics.commands._chrome_trace import run_chrome_trace
from tb_diagnostics.commands._common import (
    CommandError,
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
    p.add_argument("--format", choices=("html", "markdown", "chrome-trace"), default="html")
    p.add_argument("-o", "--output", required=True,
                   help="the file to write (chrome-trace: gzipped when it ends in .gz)")
    ct = p.add_argument_group("chrome-trace (one span: name it when the log dir has more)")
    ct.add_argument("--worker", help="the span's worker")
    ct.add_argument("--span", help="the span (its number in the file name)")
    ct.add_argument("--step", help="only this step (ProfilerStep#N's N)")


def run(args: argparse.Namespace) -> int:
    if args.format == "chrome-trace":
        return run_chrome_trace(args)
    if args.step is not None or args.worker is not None or args.span is not None:
        raise CommandError("--worker, --span and --step are for --format chrome-trace")
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
                  help="write a shareable report (one self-contained HTML file or Markdown) "
                       "or a span as a Chrome trace for Perfetto")
