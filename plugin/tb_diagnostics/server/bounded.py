"""Keep the tab's span document bounded, however many steps a span has.

A trace of a million ``ProfilerStep#`` events gives a span document of a million step
rows (hundreds of MB of JSON) that no browser can draw and no person can read. Past
:data:`MAX_TAB_STEPS` the tab gets the steps a person would look at (the first ones,
where cold steps are; the last; the slowest; those the findings and projections name)
and an even sample of the rest, plus ``steps_summary`` over *all* steps. The CLI's
JSON (``tb-diagnostics report --format json``) and the tab's compare and run routes (which
read the loader's full summary) still see every step.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets

#: The most step rows the tab's span document carries.
MAX_TAB_STEPS = 2000
#: Of those, how many come from each end and from the slowest.
_EDGE = 100
_SLOWEST = 100
#: The most steps named per finding before the sample (the worst are listed first).
_PER_FINDING = 20


def bound_steps(doc: dict[str, Any], limit: int = MAX_TAB_STEPS) -> dict[str, Any]:
    """``doc`` (a span summary), with at most ``limit`` step rows; unchanged when fewer."""
    steps = doc.get("steps") or []
    n = len(steps)
    if n <= limit:
        return doc
    keep = _chosen(doc, steps, limit)
    kept_numbers = {steps[k]["step"] for k in keep}
    out = dict(doc)
    out["steps"] = [_lean_path(steps[k]) for k in keep]
    out["steps_total"] = n
    out["steps_summary"] = _summary(steps)
    out["findings"] = [_bounded_finding(f, kept_numbers) for f in doc.get("findings") or []]
    out["whatif"] = [_bounded_projection(p, kept_numbers) for p in doc.get("whatif") or []]
    out["notes"] = [*doc.get("notes", ()),
                    f"{n:,} steps: the tab shows {len(keep):,} of them (the first and last "
                    f"{_EDGE}, the {_SLOWEST} slowest, those the findings name, and an even "
                    "sample); the summary and the findings count every step, and "
                    "`tb-diagnostics report --format json` lists them all"]
    return out


def _lean_path(step: dict[str, Any]) -> dict[str, Any]:
    """The step row with its critical path's split only: its segments and ops are left to
    the step route (each step's whole path), or 2,000 steps of them would triple the
    document."""
    cp = step.get("critical_path")
    if not cp or not cp.get("segments"):
        return step
    lean = {**cp, "segments": [], "by_op": [], "segments_omitted": cp.get("segments_total", 0)}
    return {**step, "critical_path": lean}


def _chosen(doc: dict[str, Any], steps: list[dict[str, Any]], limit: int) -> list[int]:
    n = len(steps)
    position = {s["step"]: k for k, s in enumerate(steps)}
    wall = np.fromiter((s["wall_us"] for s in steps), dtype=float, count=n)
    picked: dict[int, None] = dict.fromkeys(range(min(_EDGE, n)))
    picked.update(dict.fromkeys(range(max(0, n - _EDGE), n)))
    picked.update(dict.fromkeys(int(k) for k in np.argsort(-wall, kind="stable")[:_SLOWEST]))
    for f in doc.get("findings") or []:
        named = [position[s] for s in f.get("steps") or [] if s in position]
        picked.update(dict.fromkeys(named[:_PER_FINDING]))
    room = limit - len(picked)
    if room > 0:
        rest = sorted_sets.setdiff1d(np.arange(n),
                                     np.fromiter(picked, dtype=int, count=len(picked)))
        take = np.linspace(0, rest.size - 1, num=min(room, rest.size)).round().astype(int)
        picked.update(dict.fromkeys(int(k) for k in rest[take]))
    return sorted(picked)[:limit]


def _summary(steps: list[dict[str, Any]]) -> dict[str, Any]:
    wall = np.fromiter((s["wall_us"] for s in steps), dtype=float, count=len(steps))
    busy = np.fromiter((s["device_busy"] for s in steps), dtype=float, count=len(steps))
    return {
        "steps": len(steps),
        "verdicts": dict(Counter(s["verdict"] for s in steps).most_common()),
        "wall_us": {"median": round(float(np.median(wall)), 3),
                    "p90": round(float(np.percentile(wall, 90)), 3),
                    "max": round(float(wall.max()), 3), "total": round(float(wall.sum()), 3)},
        "device_busy": {"median": round(float(np.median(busy)), 6),
                        "mean": round(float(busy.mean()), 6)},
    }


def _bounded_finding(f: dict[str, Any], kept: set[Any]) -> dict[str, Any]:
    named = f.get("steps") or []
    if len(named) <= _PER_FINDING:
        return f
    out = dict(f)
    out["steps"] = [s for s in named if s in kept]
    out["steps_total"] = len(named)
    numbers = [s for s in named if s is not None]
    out["steps_range"] = [min(numbers), max(numbers)] if numbers else None
    return out


def _bounded_projection(p: dict[str, Any], kept: set[Any]) -> dict[str, Any]:
    per_step = p.get("per_step") or []
    if len(per_step) <= len(kept):
        return p
    out = dict(p)
    out["per_step"] = [x for x in per_step if x.get("step") in kept]
    out["steps"] = [s for s in p.get("steps") or [] if s in kept]
    out["steps_total"] = len(p.get("steps") or [])
    # A card's parts name their findings' steps: bounded as those findings are.
    out["parts"] = [_bounded_finding(x, kept) for x in p.get("parts") or []]
    return out
