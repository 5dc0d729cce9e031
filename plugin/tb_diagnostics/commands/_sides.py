"""``compare`` and ``check``: finding the baseline and the candidate run documents."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from typing import Any

from tb_diagnostics.commands._common import (
    CommandError,
    analyse,
    open_cache,
    open_logdir,
    thresholds_from,
)
from tb_diagnostics.report.compare import compare_runs


@dataclass
class Side:
    run: dict[str, Any]  # one entry of a report document's "runs"
    logdir: str | None  # None: read from a JSON file
    source: str  # what the user named, for messages


def add_side_arguments(p: argparse.ArgumentParser, *, baseline_help: str) -> None:
    p.add_argument("--baseline", required=True, metavar="RUN_OR_JSON", help=baseline_help)
    p.add_argument("--baseline-logdir", metavar="LOGDIR",
                   help="the log dir holding the baseline run (default: LOGDIR)")
    p.add_argument("--candidate", metavar="RUN",
                   help="the candidate run in LOGDIR (default: the only run there other than "
                        "the baseline)")


def _run_from_json(path: str, want: str | None) -> dict[str, Any]:
    """The run document of a report JSON (or of a ``check --format json`` output)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CommandError(f"{path}: cannot read the baseline JSON ({exc})") from None
    if isinstance(doc, dict) and doc.get("kind") == "check":
        doc = doc.get("report") or {}
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not runs:
        raise CommandError(f"{path}: not a tb-diagnostics report (no runs)")
    if len(runs) == 1:
        return runs[0]
    named = [r for r in runs if r.get("run") == want]
    if named:
        return named[0]
    raise CommandError(f"{path}: holds {len(runs)} runs; none is named like the candidate "
                       f"{want!r}: write the baseline with --run")


def _is_json_file(text: str) -> bool:
    return text.endswith(".json") and os.path.isfile(text)


def resolve_sides(args: argparse.Namespace) -> tuple[Side, Side]:
    """The baseline and candidate run documents the arguments name."""
    from_json = _is_json_file(args.baseline)
    base_logdir = args.baseline_logdir or args.logdir
    same_dir = not from_json and base_logdir == args.logdir
    candidate = args.candidate
    if candidate is None:
        names = [r.name for r in open_logdir(args.logdir).runs]
        others = [n for n in names if not (same_dir and n == args.baseline)]
        if len(others) != 1:
            raise CommandError(f"--candidate is needed: {args.logdir} holds "
                               f"{len(others)} candidate runs ({', '.join(others) or 'none'})")
        candidate = others[0]
    cand_doc = analyse(args, args.logdir, candidate)
    cand = Side(run=cand_doc["runs"][0], logdir=args.logdir, source=candidate)
    if from_json:
        base = Side(run=_run_from_json(args.baseline, candidate), logdir=None,
                    source=args.baseline)
    else:
        base_doc = analyse(args, base_logdir, args.baseline)
        base = Side(run=base_doc["runs"][0], logdir=base_logdir, source=args.baseline)
    return base, cand


def compare_sides(args: argparse.Namespace, base: Side, cand: Side,
                  with_times: bool) -> dict[str, Any]:
    """The compare document; ``with_times`` adds the ops and kernels (reads the models)."""
    times: list[dict[str, dict[str, float]] | None] = [None, None]
    if with_times and base.logdir is not None:
        from tb_diagnostics.report.optimes import run_times

        th = thresholds_from(args)
        times = [run_times(open_logdir(s.logdir), s.run, th,  # type: ignore[arg-type]
                           open_cache(args, s.logdir))  # type: ignore[arg-type]
                 for s in (base, cand)]
    doc = compare_runs(base.run, cand.run, baseline_logdir=base.logdir or base.source,
                       candidate_logdir=cand.logdir, baseline_times=times[0],
                       candidate_times=times[1])
    if with_times and base.logdir is None:
        doc["notes"].append("ops and kernels need the baseline's traces, not a JSON report")
    return doc
