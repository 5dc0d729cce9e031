"""Run-level analysis of distributed training: every rank of a run, lined up by step.

It reads only the span documents' compact ``distributed`` sections (never a trace),
so it runs after any executor, local or Dask, and gives the same answer. Ranks come
from ``distributedInfo`` or the file name; a worker with several spans contributes
the steps of all of them (step numbers differ between profiling cycles).
"""

from __future__ import annotations

from typing import Any

from tb_diagnostics.rules_run import RankSteps, RunTable, run_run_rules


def run_table(run: dict[str, Any]) -> RunTable | None:
    """The :class:`RunTable` of one run document, or None when it has no ranks."""
    ranks: list[RankSteps] = []
    world = backend = None
    for w in run["workers"]:
        merged: dict[int, dict[str, Any]] = {}
        rank = None
        spans = []
        for span in w["spans"]:
            d = span.get("distributed")
            if not d or d.get("rank") is None:
                continue
            rank = d["rank"]
            world = world or d.get("world_size")
            backend = backend or d.get("backend")
            spans.append(span["span"])
            for s in d["steps"]:
                if s["step"] is not None:  # each step remembers the span it is in
                    merged.setdefault(int(s["step"]), {**s, "span": span["span"]})
        if rank is not None:
            ranks.append(RankSteps(rank=int(rank), worker=w["worker"],
                                   span=spans[0] if spans else "", steps=merged))
    if not ranks:
        return None
    ranks.sort(key=lambda r: (r.rank, r.worker))
    common = set.intersection(*(set(r.steps) for r in ranks))
    return RunTable(run=run["run"], ranks=ranks, world_size=world, backend=backend,
                    common_steps=sorted(common))


def _cell(step: int, e: dict[str, Any]) -> dict[str, Any]:
    comm = e.get("comm_us") or 0.0
    exposed = e.get("exposed_comm_us") or 0.0
    return {
        "step": step,
        "span": e.get("span"),
        "wall_us": e["wall_us"],
        "comm_us": comm,
        "exposed_comm_us": exposed,
        "compute_us": round(max(e["wall_us"] - exposed, 0.0), 3),
        "overlap": None if comm <= 0 else round(max(0.0, 1.0 - exposed / comm), 6),
        "pre_comm_us": e.get("pre_comm_us"),
        "start_abs_us": e.get("start_abs_us"),
    }


def ranks_document(table: RunTable) -> list[dict[str, Any]]:
    """``run["ranks"]``: one row per rank, one cell per step (the heat map's data)."""
    return [{"rank": r.rank, "worker": r.worker, "span": r.span,
             "world_size": table.world_size, "backend": table.backend,
             "steps": [_cell(s, r.steps[s]) for s in sorted(r.steps)]}
            for r in table.ranks]


def add_run_analysis(run: dict[str, Any]) -> dict[str, Any]:
    """Add ``ranks`` and ``findings`` to a run document (in place; returned)."""
    table = run_table(run)
    run["ranks"] = ranks_document(table) if table else []
    findings = run_run_rules(table) if table else []
    run["findings"] = [f.to_dict() for f in findings]
    # A run rule that raised is a note of the run (added key), never a finding or silence.
    run["notes"] = [x.note for x in getattr(findings, "failures", ())]
    return run
