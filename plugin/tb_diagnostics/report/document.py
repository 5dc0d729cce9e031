"""The report document: one JSON-ready dict for a whole log dir.

Its shape is the public contract of ``tb-diagnostics report --format json``
and of the tab's routes (documented in the README); add keys, never rename.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tb_diagnostics.analysis import SpanAnalysis, StepWindow
from tb_diagnostics.analysis.headline import span_verdict
from tb_diagnostics.analysis.path_clause import verdict_paths
from tb_diagnostics.analysis.steps import NO_ITERATIONS
from tb_diagnostics.analysis.views.comm import distributed_section, step_comm
from tb_diagnostics.analysis.views.warmth import step_walls, stub_note
from tb_diagnostics.logdir import LogDir, Run, SpanFile
from tb_diagnostics.report.critical_path import critical_path_columns
from tb_diagnostics.report.distributed import add_run_analysis
from tb_diagnostics.report.headline import compile_reason
from tb_diagnostics.report.host_work import host_work_columns
from tb_diagnostics.report.launch_queue import add_activity_coverage, launch_queue_columns
from tb_diagnostics.report.lifetimes import AFTER_RULES, BEFORE_WHATIF
from tb_diagnostics.report.roofline import roofline_section, step_roofline_columns
from tb_diagnostics.report.step_columns import Layer
from tb_diagnostics.report.step_documents import comm_columns, step_documents
from tb_diagnostics.report.step_flags import flag_reason_columns
from tb_diagnostics.report.whatif import whatif_section
from tb_diagnostics.rules import run_rules

SCHEMA_VERSION = 1


def _us(x: float) -> float:
    return round(float(x), 3)


def step_document(w: StepWindow) -> dict[str, Any]:
    return {
        "step": w.step,
        "start_us": _us(w.start),
        "host_start_us": _us(w.host_start),
        "host_end_us": _us(w.host_end),
        "wall_us": _us(w.wall_us),
        "device_busy_us": _us(w.device_busy_us),
        "device_busy": round(w.device_busy, 6),
        # What the verdict reads: device activity that is not a collective kernel.
        "compute_busy_us": _us(w.compute_busy_us),
        "compute_busy": round(w.compute_busy, 6),
        # Collective kernels no compute overlaps (device busy, not compute); with the idle
        # causes they split the time that is not compute: compute + this + idle = wall.
        "exposed_collective_us": _us(w.exposed_collective_us),
        "idle": {f"{c}_us": _us(v) for c, v in w.idle.items()},
        "verdict": w.verdict,
        # Where something other than compute_busy and the main cause decided the verdict
        # (a warm step draining a launch backlog, a step mostly compiling), why, in words;
        # None otherwise.
        "verdict_reason": (compile_reason(w.idle["compile"], w.wall_us)
                           if w.verdict_by == "compilation" else None),
        "main_idle_cause": w.main_idle_cause,
        "self_cpu_us": _us(w.self_cpu_us),
        "self_device_us": None if w.self_device_us is None else _us(w.self_device_us),
        "ops": w.ops,
        "kernels": w.kernels,
        "flags": list(w.flags),
    }


def _cold_columns(analysis: SpanAnalysis, n: int) -> Layer:
    """Per step: whether it ran cold, as the analysis decided it (``views.warmth``): the
    one field the headline, the what-if, the compare and the tab's chart read; and
    whether it is the profiler's trailing stub (``stub``: neither warm nor cold)."""
    sw = step_walls(analysis)
    if sw.cold.shape[0] != n:
        raise ValueError(f"{sw.cold.shape[0]} windows' warmth for {n} steps")
    return ("cold", "stub"), [sw.cold.astype(bool), sw.stub.astype(bool)]


def span_document(f: SpanFile, analysis: SpanAnalysis | None,
                  error: str | None = None, *, owned: bool = False) -> dict[str, Any]:
    """The span's document. ``owned``: nothing reads ``analysis`` after this, so the
    views the later sections do not read are released on the way (``report.lifetimes``)."""
    doc: dict[str, Any] = {
        "span": f.span,
        "file": f.relpath,
        "device": {"kind": None, "name": None},
        "verdict": None,
        # The warm time judged by verdict, most first (see analysis.headline).
        "verdict_split": [],
        "steps": [],
        "findings": [],
        "notes": [],
        "errors": [error] if error else [],
        "distributed": None,
        "roofline": None,
        "whatif": [],
        # Whether the trace recorded all the launched work (views.activity_coverage).
        "activity_complete": None,
        # Its counts: launches, launches with no activity, activities with no launch…
        "activity_coverage": None,
    }
    if analysis is None:
        return doc
    model = analysis.model
    doc["device"] = {"kind": model.device_kind, "name": model.device_name}
    # From the window columns in one pass (a span may hold a million steps): a LazyRows
    # (tb_diagnostics.lazy_rows) of packed columns, each step's dict made when read; each
    # layer below computes its keys for every step at once, one more layer of columns.
    steps = step_documents(analysis)
    n = len(steps)
    steps = steps.with_layer(*comm_columns(step_comm(analysis), n))
    steps = steps.with_layer(*step_roofline_columns(analysis, n))
    doc["roofline"] = roofline_section(analysis)
    doc["distributed"] = distributed_section(analysis, f.relpath.rsplit("/", 1)[-1])
    steps = steps.with_layer(*_cold_columns(analysis, n))
    steps = steps.with_layer(*critical_path_columns(analysis, n))  # what each end waits on
    steps = steps.with_layer(*host_work_columns(analysis, n))  # the launch cause's host work
    findings = run_rules(analysis)
    # Why a step is flagged artefact (analysis.views.step_flags), for every reader.
    steps = steps.with_layer(*flag_reason_columns(analysis, findings, n))
    # The launch queue per step (the last layer): here, so that the launch backlog it
    # reads is not held through the what-if cards (report.lifetimes).
    doc["steps"] = steps.with_layer(*launch_queue_columns(analysis, n))
    doc["findings"] = [f.to_dict() for f in findings]
    if owned:
        analysis.release(AFTER_RULES)
    verdict = span_verdict(analysis)
    doc["verdict"] = verdict.verdict
    # Each verdict's warm steps: what their ends wait on, from their critical paths.
    doc["verdict_split"] = [x.to_dict(verdict.warm_judged_us) | {"critical_path": c.to_dict()}
                            for x, c in zip(verdict.split, verdict_paths(analysis),
                                            strict=True)]
    if owned:
        del verdict  # the span verdict's memo is released below: no local keeps it
        analysis.release(BEFORE_WHATIF)
    doc["whatif"] = whatif_section(analysis, findings, release=owned)  # findings: parts
    # A rule that raised is a bug of that rule: the span says which, never silence.
    doc["notes"].extend(x.note for x in getattr(findings, "failures", ()))
    step_notes = list(analysis.host_steps.notes)  # step events left out or kept apart
    if not len(analysis.host_steps):
        # One sentence: no steps, why none were inferred, and what follows.
        why = next((n for n in step_notes if n.startswith(NO_ITERATIONS)), None)
        reason = f" and {why}" if why else ""
        step_notes = [n for n in step_notes if n is not why]
        doc["notes"].append(f"no ProfilerStep# events{reason}; the span is analysed as one "
                            "window")
    elif analysis.host_steps.inferred:
        doc["notes"].append(analysis.host_steps.note)
    doc["notes"].extend(step_notes)
    # The empty last step a mid-cycle stop leaves (views.warmth): why it is not judged.
    doc["notes"].extend(n for n in [stub_note(analysis)] if n)
    if analysis.cpu_only:
        doc["notes"].append(
            "CPU-only trace: the CPU is the device; busy time is the self time of op calls "
            f"of at least {analysis.thresholds.cpu_heavy_self_us:g} µs"
        )
    add_activity_coverage(doc, analysis)
    doc["notes"].extend(doc["roofline"]["notes"])
    doc["notes"].extend(model.warnings)
    return doc


def logdir_document(logdir: LogDir, runs: Sequence[Run],
                    spans: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The report document of ``runs`` of ``logdir`` from their span documents (``spans``,
    by relpath): the engine analyses the files (``engine.build_document``), this only
    assembles what it returned."""
    return {
        "schema": SCHEMA_VERSION,
        "logdir": logdir.logdir,
        "notes": logdir.notes,  # log-dir-level, e.g. symbolic links not followed
        "runs": [
            add_run_analysis({
                "run": r.name,
                "workers": [
                    {"worker": w.name, "spans": [spans[s.relpath] for s in w.spans]}
                    for w in r.workers
                ],
            })
            for r in runs
        ],
    }
