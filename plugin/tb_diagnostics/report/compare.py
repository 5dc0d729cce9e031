"""Compare two runs, and gate a candidate against a baseline: pure functions on documents.

Both sides are *run documents* (one entry of a report document's ``runs``), so
a baseline may come from a log dir or from a JSON file written earlier by
``tb-diagnostics report --format json`` or ``check --format json``.

Definitions (documented in the README's "Sharing runs"):

- **Warm steps** are a run's steps minus the cold ones: those whose ``cold`` field
  is true (the analysis decides it, ``analysis.views.warmth``); in a document written
  before steps had that field, those named by a ``cold-start-step`` finding of their
  span or flagged ``cold`` in the step's own ``flags``. Runs with several workers or
  spans contribute all their warm steps, in worker, span, step order.
- **Median warm step time** is the median ``wall_us`` over the warm steps
  (over all steps when every step is cold, so a one-step run still compares).
- **Steps are matched by position**: the k-th warm step of the baseline with
  the k-th of the candidate, because step numbers depend on each run's
  profiler schedule.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterator
from typing import Any

from tb_diagnostics.analysis.headline import judged_us, verdict_by_time
from tb_diagnostics.output import displayable

SCHEMA_VERSION = 1
_NUMBER = re.compile(r"^[+-]?\d[\d.,]*$")
COLD_RULES = frozenset({"cold-start-step"})
SEVERITIES = ("critical", "warning", "info")
TOP_N = 10


def _spans(run: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for worker in run["workers"]:
        yield from worker["spans"]


def cold_steps(span: dict[str, Any]) -> set[int | None]:
    """Step numbers of ``span`` that ran cold (see the module doc)."""
    if any("cold" in s for s in span["steps"]):
        return {s["step"] for s in span["steps"] if s.get("cold")}
    cold = {s["step"] for s in span["steps"] if "cold" in s.get("flags", ())}
    for f in span["findings"]:
        if f["rule"] in COLD_RULES:
            cold.update(f.get("steps") or [])
    return cold


def warm_steps(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's warm steps, in worker, span, step order."""
    out = []
    for span in _spans(run):
        cold = cold_steps(span)
        # Nor the profiler's empty trailing stub (its "stub" field, views.warmth).
        out.extend(s for s in span["steps"] if s["step"] not in cold and not s.get("stub"))
    return out


def all_steps(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for span in _spans(run) for s in span["steps"]]


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def run_summary(run: dict[str, Any], logdir: str | None = None) -> dict[str, Any]:
    """What a comparison says about one side: medians over warm steps, verdict, counts."""
    steps = all_steps(run)
    warm = warm_steps(run) or steps
    warm_ids = {id(s) for s in warm}
    # As a span's verdict (analysis.headline): the verdict of most of the warm time.
    by_time = verdict_by_time((s["step"], s["verdict"], s["wall_us"],
                               judged_us(s["wall_us"], s.get("idle") or {})) for s in warm)
    return {
        "logdir": logdir,
        "run": run["run"],
        "steps": len(steps),
        "warm_steps": len(warm),
        "cold_steps": sorted((s["step"] for s in steps
                              if id(s) not in warm_ids and not s.get("stub")),
                             key=_step_key),
        "median_warm_wall_us": _median([s["wall_us"] for s in warm]),
        "median_warm_device_busy_us": _median([s["device_busy_us"] for s in warm]),
        "verdict": by_time[0].verdict if by_time else None,
    }


def _step_key(step: int | None) -> int:
    return -1 if step is None else step


def findings_of(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's findings by rule id; the most severe instance of each rule represents it."""
    out: dict[str, dict[str, Any]] = {}
    for span in _spans(run):
        for f in span["findings"]:
            have = out.get(f["rule"])
            if have is None or SEVERITIES.index(f["severity"]) < SEVERITIES.index(
                    have["severity"]):
                out[f["rule"]] = f
    return out


def _finding_brief(f: dict[str, Any]) -> dict[str, Any]:
    return {"rule": f["rule"], "severity": f["severity"], "title": f.get("title", f["rule"]),
            "message": f["message"], "savings_us": f.get("savings_us"),
            "subject": f.get("subject")}


def _change(base: float | None, cand: float | None) -> float | None:
    """Relative change ``cand / base - 1`` (None when either side is missing or base is 0)."""
    if base is None or cand is None or base <= 0:
        return None
    return round(cand / base - 1, 6)


def _top_changes(base: dict[str, float] | None, cand: dict[str, float] | None,
                 n: int = TOP_N) -> list[dict[str, Any]] | None:
    if base is None or cand is None:
        return None
    rows = []
    for name in set(base) | set(cand):
        b, c = base.get(name, 0.0), cand.get(name, 0.0)
        rows.append({"name": name, "baseline_us": round(b, 3), "candidate_us": round(c, 3),
                     "delta_us": round(c - b, 3)})
    rows.sort(key=lambda r: (-abs(r["delta_us"]), r["name"]))
    return [r for r in rows if r["delta_us"] != 0][:n]


def compare_runs(baseline: dict[str, Any], candidate: dict[str, Any], *,
                 baseline_logdir: str | None = None, candidate_logdir: str | None = None,
                 baseline_times: dict[str, dict[str, float]] | None = None,
                 candidate_times: dict[str, dict[str, float]] | None = None,
                 ) -> dict[str, Any]:
    """The compare document of two run documents.

    ``*_times`` are optional ``{"ops": {name: µs per warm step}, "kernels": {...}}``
    (see :mod:`tb_diagnostics.report.optimes`); without them ``ops`` and
    ``kernels`` are null.
    """
    b_sum = run_summary(baseline, baseline_logdir)
    c_sum = run_summary(candidate, candidate_logdir)
    b_warm = warm_steps(baseline) or all_steps(baseline)
    c_warm = warm_steps(candidate) or all_steps(candidate)
    steps = []
    for k, (b, c) in enumerate(zip(b_warm, c_warm, strict=False)):
        steps.append({
            "position": k,
            "baseline_step": b["step"], "candidate_step": c["step"],
            "baseline_wall_us": b["wall_us"], "candidate_wall_us": c["wall_us"],
            "wall_delta_us": round(c["wall_us"] - b["wall_us"], 3),
            "baseline_device_busy_us": b["device_busy_us"],
            "candidate_device_busy_us": c["device_busy_us"],
            "device_busy_delta_us": round(c["device_busy_us"] - b["device_busy_us"], 3),
            "baseline_verdict": b["verdict"], "candidate_verdict": c["verdict"],
            "verdict_changed": b["verdict"] != c["verdict"],
        })
    notes = ["steps are matched by position: the k-th warm step of each run"]
    if len(b_warm) != len(c_warm):
        notes.append(f"the runs have {len(b_warm)} and {len(c_warm)} warm steps; "
                     f"only the first {len(steps)} are paired")
    b_find, c_find = findings_of(baseline), findings_of(candidate)
    bt, ct = baseline_times or {}, candidate_times or {}
    return {
        "schema": SCHEMA_VERSION,
        "kind": "compare",
        "baseline": b_sum,
        "candidate": c_sum,
        "median_warm_wall_change": _change(b_sum["median_warm_wall_us"],
                                           c_sum["median_warm_wall_us"]),
        "median_warm_device_busy_change": _change(b_sum["median_warm_device_busy_us"],
                                                  c_sum["median_warm_device_busy_us"]),
        "verdict_changed": b_sum["verdict"] != c_sum["verdict"],
        "steps": steps,
        "findings": {
            "appeared": [_finding_brief(c_find[r]) for r in sorted(set(c_find) - set(b_find))],
            "disappeared": [_finding_brief(b_find[r])
                            for r in sorted(set(b_find) - set(c_find))],
            "kept": sorted(set(b_find) & set(c_find)),
        },
        "ops": _top_changes(bt.get("ops"), ct.get("ops")),
        "kernels": _top_changes(bt.get("kernels"), ct.get("kernels")),
        "notes": notes,
    }


def check_compare(compare: dict[str, Any], *, max_regression: float,
                  fail_on: str | None) -> dict[str, Any]:
    """The gate's verdict on a compare document: ``ok`` and the readable reasons it failed.

    Fails when the candidate's median warm step time exceeds the baseline's by
    more than ``max_regression`` (a fraction), or when a finding of severity
    ``fail_on`` or worse appears that the baseline did not have.
    """
    reasons = []
    b = compare["baseline"]["median_warm_wall_us"]
    c = compare["candidate"]["median_warm_wall_us"]
    change = compare["median_warm_wall_change"]
    if b is None or c is None:
        reasons.append("no steps to compare: "
                       + ("baseline" if b is None else "candidate") + " has no analysed step")
    elif change is not None and change > max_regression:
        reasons.append(f"median warm step time regressed {100 * change:.1f}% "
                       f"({b / 1000:.3f} ms → {c / 1000:.3f} ms), "
                       f"more than the allowed {100 * max_regression:g}%")
    if fail_on is not None:
        worst = SEVERITIES.index(fail_on)
        for f in compare["findings"]["appeared"]:
            if SEVERITIES.index(f["severity"]) <= worst:
                reasons.append(f"new {f['severity']} finding {f['rule']}: {f['message']}")
    return {"schema": SCHEMA_VERSION, "kind": "check", "ok": not reasons, "reasons": reasons,
            "max_regression": max_regression, "fail_on": fail_on, "compare": compare}


def _ms(us: float | None) -> str:
    return "—" if us is None else f"{us / 1000:.3f} ms"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


#: Widest a name cell of the ops and kernels tables is in text (a shortened name seldom is).
NAME_WIDTH = 60
#: Text lines are wrapped at this width, as the report's are.
TEXT_WIDTH = 100


def table_names(names: list[str], width: int | None = NAME_WIDTH) -> list[str]:
    """Names for a table's first column: demangled kernels shortened to their own name
    (``tb_diagnostics.names``), cut to ``width``; names that shorten alike are numbered
    so that two rows never read the same."""
    from tb_diagnostics.names import short_name, shorten_name

    short = [short_name(n, width) if width else shorten_name(n, 0) for n in names]
    seen: Counter[str] = Counter(short)
    k: Counter[str] = Counter()
    out = []
    for x in short:
        if seen[x] > 1:
            k[x] += 1
            x = f"{x} ({k[x]})"
        out.append(x)
    return out


def render_compare_text(doc: dict[str, Any], markdown: bool = False) -> str:
    """The compare document for a terminal, or (``markdown``) for a pull request."""
    import textwrap

    from tb_diagnostics.report.text import finding_head, md, md_code

    b, c = doc["baseline"], doc["candidate"]
    code = md_code if markdown else str
    text = md if markdown else str
    out = [("## " if markdown else "") + f"Compare {code(b['run'])} → {code(c['run'])}", ""]
    out.append(f"- median warm step: {_ms(b['median_warm_wall_us'])} → "
               f"{_ms(c['median_warm_wall_us'])} ({_pct(doc['median_warm_wall_change'])})")
    out.append(f"- median warm device busy: {_ms(b['median_warm_device_busy_us'])} → "
               f"{_ms(c['median_warm_device_busy_us'])} "
               f"({_pct(doc['median_warm_device_busy_change'])})")
    out.append(f"- verdict: {b['verdict']} → {c['verdict']}"
               + (" (changed)" if doc["verdict_changed"] else ""))
    out.append(f"- warm steps: {b['warm_steps']} vs {c['warm_steps']} "
               f"(cold steps left out: {b['cold_steps'] or 'none'} vs {c['cold_steps'] or 'none'})")
    out.append("")
    rows = [["#", "steps", "wall ms", "Δ wall ms", "busy ms", "Δ busy ms", "verdict"]]
    for s in doc["steps"]:
        verdict = s["baseline_verdict"] + (
            f" → {s['candidate_verdict']}" if s["verdict_changed"] else "")
        rows.append([str(s["position"]), f"{s['baseline_step']}→{s['candidate_step']}",
                     f"{s['baseline_wall_us'] / 1000:.3f}→{s['candidate_wall_us'] / 1000:.3f}",
                     f"{s['wall_delta_us'] / 1000:+.3f}",
                     f"{s['baseline_device_busy_us'] / 1000:.3f}→"
                     f"{s['candidate_device_busy_us'] / 1000:.3f}",
                     f"{s['device_busy_delta_us'] / 1000:+.3f}", verdict])
    out.extend(_table(rows, markdown))
    f = doc["findings"]
    for label, items in (("appeared", f["appeared"]), ("disappeared", f["disappeared"])):
        out.append("")
        out.append(f"Findings {label}:" + ("" if items else " none"))
        for x in items:
            line = f"- [{x['severity']}] {finding_head(x, '`' if markdown else '')}: " \
                f"{text(x['message'])}"
            out.extend([line] if markdown else textwrap.wrap(
                line, width=TEXT_WIDTH, subsequent_indent="  ", break_on_hyphens=False))
    for key, title in (("ops", "Ops (self time per warm step)"),
                       ("kernels", "Kernels (device time per warm step)")):
        if doc[key]:
            out.append("")
            out.append(f"{title}, largest changes:")
            names = table_names([r["name"] for r in doc[key]],
                                None if markdown else NAME_WIDTH)
            rows = [["name", "baseline µs", "candidate µs", "Δ µs"]] + [
                [code(n), f"{r['baseline_us']:.1f}", f"{r['candidate_us']:.1f}",
                 f"{r['delta_us']:+.1f}"] for n, r in zip(names, doc[key], strict=True)]
            out.extend(_table(rows, markdown))
    out.append("")
    out.extend(("> " if markdown else "note: ") + text(n) for n in doc["notes"])
    if any(doc[k] for k in ("ops", "kernels")):
        out.append(("> " if markdown else "note: ") + "names are shortened to the function's "
                   "own; --format json gives them whole")
    # A file name that is not UTF-8 shows with U+FFFD: the text is valid UTF-8 anywhere.
    return displayable("\n".join(out).rstrip() + "\n")


def _table(rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        head = "| " + " | ".join(rows[0]) + " |"
        sep = "|" + "|".join("---" for _ in rows[0]) + "|"
        return [head, sep] + ["| " + " | ".join(r) + " |" for r in rows[1:]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    # Figures right-aligned, so their digits line up; names and verdicts left.
    numeric = [all(_NUMBER.match(r[i]) for r in rows[1:]) for i in range(len(rows[0]))]
    return ["  " + "  ".join(v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i])
                             for i, v in enumerate(r)).rstrip() for r in rows]


def render_check_text(doc: dict[str, Any]) -> str:
    head = "check passed" if doc["ok"] else "check FAILED"
    lines = [head + ":"] + [f"  - {r}" for r in doc["reasons"]]
    if doc["ok"]:
        cmp = doc["compare"]
        lines.append(f"  median warm step {_ms(cmp['baseline']['median_warm_wall_us'])} → "
                     f"{_ms(cmp['candidate']['median_warm_wall_us'])} "
                     f"({_pct(cmp['median_warm_wall_change'])}; allowed "
                     f"+{100 * doc['max_regression']:g}%)")
    return displayable("\n".join(lines) + "\n")
