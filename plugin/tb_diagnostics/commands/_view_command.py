"""``tb-diagnostics ops|kernels|memory|modules LOGDIR``: one table view of every span.

Each view module of ``report/views`` gets its command from :func:`make_view_command`, so
the options, the run/worker/span nesting of the JSON and the CSV export are the same for
every view. The JSON holds the view under the span's key of the view's name::

    {"logdir": ..., "runs": [{"run": ..., "workers": [{"worker": ..., "spans": [
        {"span": ..., "file": ..., "ops": {...the view's document...}}]}]}]}
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from typing import Any

from tb_diagnostics.commands import Command
from tb_diagnostics.commands._common import (
    CommandError,
    add_logdir_arguments,
    open_cache,
    open_logdir,
    thresholds_from,
    write_output,
)
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.opening import open_analysis
from tb_diagnostics.output import displayable, json_text
from tb_diagnostics.report.views import MAX_LIMIT, ViewParamError, ViewParams, all_views


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_logdir_arguments(p)
    p.add_argument("--step", help="one step (ProfilerStep#N's N) instead of the whole span")
    p.add_argument("--group", help="how rows are grouped (the view's choices, e.g. name|shapes)")
    p.add_argument("--sort", help="sort by this column ('-col' for descending)")
    p.add_argument("--filter", dest="q", help="only rows whose name contains this text")
    p.add_argument("--limit", type=int, default=50,
                   help=f"rows per span (at most {MAX_LIMIT}; default 50)")
    p.add_argument("--format", choices=("text", "json", "csv"), default="text")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")


def view_documents(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The log dir's runs → workers → spans, each span with the view's document (or its
    ``error``)."""
    view = all_views()[name]
    ld = open_logdir(args.logdir, args.run)
    cache = open_cache(args, args.logdir)
    thresholds = thresholds_from(args)
    params = ViewParams(step=args.step, group=args.group, sort=args.sort, q=args.q,
                        limit=max(1, min(args.limit, MAX_LIMIT)))
    runs = []
    for r in ld.runs:
        if args.run is not None and r.name != args.run:
            continue
        workers = []
        for w in r.workers:
            spans = []
            for f in w.spans:
                entry: dict[str, Any] = {"span": f.span, "file": f.relpath}
                try:
                    entry[name] = view.document(open_analysis(f, thresholds, cache), params)
                except TraceLoadError as exc:
                    entry["error"] = str(exc)
                except ViewParamError as exc:
                    raise CommandError(f"{f.relpath}: {exc}") from None
                spans.append(entry)
            workers.append({"worker": w.name, "spans": spans})
        runs.append({"run": r.name, "workers": workers})
    return {"logdir": args.logdir, "view": name, "runs": runs}


def _spans(doc: dict[str, Any]):
    for r in doc["runs"]:
        for w in r["workers"]:
            for s in w["spans"]:
                yield r, w, s


def _csv(doc: dict[str, Any], name: str) -> str:
    view = all_views()[name]
    out = io.StringIO()
    cols = ("run", "worker", "span", *view.columns)
    writer = csv.DictWriter(out, fieldnames=cols, extrasaction="ignore")
    writer.writeheader()
    for r, w, s in _spans(doc):
        for row in (s.get(name) or {}).get(view.rows_key, []):
            writer.writerow({"run": r["run"], "worker": w["worker"], "span": s["span"],
                             **{k: row.get(k) for k in view.columns}})
    return out.getvalue()


def _text(doc: dict[str, Any], name: str) -> str:
    view = all_views()[name]
    lines = []
    for r, w, s in _spans(doc):
        lines.append(displayable(f"run {r['run']} · worker {w['worker']} · span {s['span']}"))
        if "error" in s:
            lines.append(f"  error: {s['error']}")
        elif view.text is not None:
            lines.extend("  " + ln for ln in view.text(s[name]).splitlines())
        else:
            rows = s[name].get(view.rows_key, [])
            lines.append("  " + " | ".join(view.columns))
            lines.extend("  " + " | ".join(displayable(str(row.get(c, ""))) for c in view.columns)
                         for row in rows)
        lines.append("")
    return "\n".join(lines)


def make_view_command(name: str, help: str, order: int = 40) -> Command:
    """The command of view ``name`` (a module of ``report/views``)."""
    def run(args: argparse.Namespace) -> int:
        doc = view_documents(name, args)
        fmt = args.format
        text = json_text(doc) if fmt == "json" else _csv(doc, name) if fmt == "csv" \
            else _text(doc, name)
        write_output(text, args.output)
        spans = [s for _, _, s in _spans(doc)]
        if spans and all("error" in s for s in spans):
            print("tb-diagnostics: no trace file could be read", file=sys.stderr)
            return 1
        return 0

    return Command(name=name, help=help, add_arguments=_add_arguments, run=run, order=order)
