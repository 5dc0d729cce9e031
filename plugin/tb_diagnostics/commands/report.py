"""``tb-diagnostics report LOGDIR``: the verdict of every step, with the findings."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from tb_diagnostics.commands import Command
from tb_diagnostics.commands._common import (
    add_logdir_arguments,
    analyse,
    open_cache,
    open_logdir,
    thresholds_from,
    write_output,
)
from tb_diagnostics.lazy_rows import with_values
from tb_diagnostics.output import INDENT_ROWS_AT_MOST, json_chunks
from tb_diagnostics.report.text import render_markdown, render_text
from tb_diagnostics.trace.source import end_idle_readers


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_logdir_arguments(p)
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("-o", "--output", help="write the report to this file instead of stdout")
    p.add_argument("--indent", choices=("auto", "0", "2"), default="auto",
                   help="JSON indent: 2, 0 (compact), or auto (default): 2 up to "
                        f"{INDENT_ROWS_AT_MOST:,} steps in the report, compact beyond")
    p.add_argument("--step", type=int, default=None,
                   help="list the whole critical path of step N (ProfilerStep#N's N; inferred "
                        "iterations count from 0), not only its longest segments")


def _add_whole_paths(doc: dict, args: argparse.Namespace) -> None:
    """Step ``args.step``'s whole critical path in each span that has it (the document,
    cached or not, holds only the longest segments: the span is analysed again)."""
    from tb_diagnostics.opening import analysed_spans
    from tb_diagnostics.report.critical_path import whole_paths

    spans = {s["file"]: s for r in doc["runs"] for w in r["workers"] for s in w["spans"]}
    ld = open_logdir(args.logdir, args.run)
    files = [f for r in ld.runs if args.run is None or r.name == args.run for f in r.files]
    for span, analysis in analysed_spans(files, spans, thresholds_from(args),
                                         open_cache(args, args.logdir)):
        paths = {k: path for k, path in whole_paths(analysis, args.step).items()
                 if k < len(span["steps"])}
        # A layer on the lazy step rows (each read makes its dicts anew), or set in a list.
        span["steps"] = with_values(span["steps"], "critical_path", paths)


def run(args: argparse.Namespace) -> int:
    doc = analyse(args, run=args.run)
    if args.step is not None:
        _add_whole_paths(doc, args)
    if args.format == "json":
        # The loads are over: their idle reader threads end, so that the JSON writer may
        # fork workers to encode the step rows on every core (chunks_on_cores).
        end_idle_readers()
        # Byte chunks, the step lists a chunk of rows at a time: no copy of the whole JSON.
        text: str | Iterable[bytes] = json_chunks(
            doc, indent=args.indent if args.indent == "auto" else int(args.indent))
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
