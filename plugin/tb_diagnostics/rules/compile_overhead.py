"""Compile overhead: compilation inside the window, and compiled calls costing more than their work.

What it detects
    Two findings. **Compilation inside the profiled window**: Dynamo/Inductor
    compile work (``… (dynamo_timed)`` spans, ``entire_frame_compile``,
    ``backend_compile``, Inductor's autotuning…) of at least
    ``min_compile_us`` of host time in the window, with the steps it falls in:
    a one-time cost, not the steady state, so it is its own cause and never
    read as launch overhead. **Compiled region too small**: in steps that run
    compiled code and do not compile, the fixed host cost of
    the compiled calls — the ``TorchDynamo Cache Lookup`` before them plus the
    ``Torch-Compiled Region`` / ``CompiledFunction`` span minus the time in the
    graph's own ops — against the graph's work:
    the device time of the kernels they launch, or on a CPU-only trace the
    self time of the ops inside them. Fires when the host time is at least
    ``ratio`` × the work and ``min_excess_us`` more, per step (median).

Why it matters
    A compile takes from hundreds of milliseconds to minutes; inside the window
    it dwarfs every steady-state figure and, read as host time, makes any step
    look overhead-bound. torch.compile removes per-op Python and dispatch, but every call of a
    compiled function pays the guard check, the AOT wrapper and the generated
    code's own Python: a fixed cost that pays off only when the graph does
    enough work. The Hugging Face guide's single ``addmm`` costs ~2× the eager
    CPU time per step compiled.

How to fix
    Compilation in the window: run the compiled function on representative
    inputs before profiling, or let the schedule's ``wait``/``warmup`` steps
    absorb it; if it recurs, see ``recompilation``. Too small a region:
    compile larger regions (the whole model or training step, not a helper
    called many times), remove graph breaks (``torch._dynamo.explain(fn)(*args)``),
    or leave tiny functions eager. With static shapes,
    ``torch.compile(mode="reduce-overhead")`` replays the graph with CUDA graphs
    and removes most of the per-call host cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.intervals import union
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.compiled import (
    FX_GRAPH,
    compile_intervals,
    compile_time_per_window,
    compiled_view,
)
from tb_diagnostics.analysis.views.hierarchy import is_op
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.rules._util import (
    evidence_rows,
    fmt_us,
    name_ids_matched,
    step_numbers,
    steps_text,
    warm_steps,
)
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Host time of the compiled calls at least this many times the graph's work...
    ratio: float = 1.0
    #: ...and at least this much more (µs per step).
    min_excess_us: float = 50.0
    #: Compile work inside the window reported from this much host time (µs).
    min_compile_us: float = 1000.0


def _inside(analysis: SpanAnalysis, rows: np.ndarray, entries: np.ndarray) -> np.ndarray:
    """Which host ``rows`` start inside one of ``entries`` on the same thread."""
    m = analysis.model
    out = np.zeros(rows.size, dtype=bool)
    for lane in sorted_sets.unique(m.lane[entries]).tolist():
        e = entries[m.lane[entries] == lane]
        iv = union(m.start[e], m.end[e])  # nested entries merge into their outer one
        sel = np.flatnonzero(m.lane[rows] == lane)
        if not sel.size:
            continue
        t = m.start[rows[sel]]
        k = np.searchsorted(iv.start, t, side="right") - 1
        out[sel] = (k >= 0) & (t < iv.end[np.maximum(k, 0)])
    return out


#: Children of a compiled call that belong to the wrapper, not to the graph.
_WRAPPER = re.compile(r"^Pregraph bytecode$|^AOTDispatcher Runtime Wrapper")


def _call_overhead(analysis: SpanAnalysis, entries: np.ndarray) -> np.ndarray:
    """Per compiled call: its duration minus the time in the graph's own work.

    The graph's work is its op children and Inductor's ``## Call CompiledFxGraph``
    span; what remains is the fixed cost of calling compiled code (the region's
    own Python, the AOT wrapper, the generated code's bookkeeping).
    """
    m = analysis.model
    ops = is_op(analysis)
    out = m.dur[entries].astype(np.float64).copy()
    for i, r in enumerate(entries.tolist()):
        for k in m.children(r).tolist():
            name = m.name_of(k)
            if (ops[k] and not _WRAPPER.match(name)) or FX_GRAPH.match(name):
                out[i] -= m.dur[k]
    return np.maximum(out, 0.0)


def _compilation_in_window(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    """Compile work anywhere in the trace: one finding, with the steps it falls in."""
    cv = compiled_view(analysis)
    if not cv.compiles.size:
        return []
    total = compile_intervals(analysis).total
    if total < th.min_compile_us:
        return []
    m = analysis.model
    hs = analysis.host_steps
    where = ""
    steps: list[int | None] = [None]
    if len(hs):
        per = compile_time_per_window(analysis, hs.host_start, hs.host_end)
        idx = np.flatnonzero(per > 0)
        steps = step_numbers(analysis, idx) or [w.step for w in analysis.windows[:1]]
        inside = float(per.sum())
        parts = [f"{fmt_us(inside)} of it in {steps_text(step_numbers(analysis, idx))}"
                 ] if idx.size else []
        if total - inside >= th.min_compile_us:
            parts.append(f"{fmt_us(total - inside)} outside the steps")
        where = "".join(f", {p}" for p in parts)
    rows = cv.compiles[np.argsort(-m.dur[cv.compiles], kind="stable")]
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title="Compilation inside the profiled window",
        message=(f"The host spends {fmt_us(total)} compiling in the profiled window{where} "
                 f"(torch.compile: {cv.compiles.size} compile(s), {cv.compile_annotations} "
                 "compile-work annotations): a one-time cost, paid again only on a "
                 "recompile, so it is compilation, not launch overhead or steady-state "
                 "work."),
        steps=steps, evidence=evidence_rows(analysis, rows[:6], "compile work"),
        savings_us=None,
        confirm=("profile again after a warm-up call of the compiled function: the "
                 "compile spans are gone and the steps are shorter"),
        subject="compilation")]


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    return _compilation_in_window(analysis, th) + _too_small(analysis, th)


def _too_small(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    cv = compiled_view(analysis)
    entries = cv.entry_rows
    if not entries.size or not len(analysis.host_steps):
        return []
    m = analysis.model
    windows = analysis.windows
    n = len(windows)
    ewin = window_of_rows(analysis, entries)
    cost = _call_overhead(analysis, entries)
    host = np.bincount(ewin[ewin >= 0], weights=cost[ewin >= 0], minlength=n)
    lw = window_of_rows(analysis, cv.lookups)
    host += np.bincount(lw[lw >= 0], weights=m.dur[cv.lookups][lw >= 0], minlength=n)
    if analysis.cpu_only:
        ops = analysis.op_rows
        inside = ops[_inside(analysis, ops, entries)]
        markers = np.concatenate([entries, cv.lookups, cv.wrappers])
        inside = inside[~np.isin(inside, markers)]
        inside = inside[~np.isin(m.name[inside], name_ids_matched(analysis, _WRAPPER))]
        w = window_of_rows(analysis, inside)
        work = np.bincount(w[w >= 0], weights=m.self_time(inside)[w >= 0], minlength=n)
        what = "CPU time in its ops"
    else:
        acts = m.device_activity_rows
        launcher = m.launcher[acts]
        has = launcher >= 0
        under = np.zeros(acts.size, dtype=bool)
        under[has] = _inside(analysis, launcher[has].astype(np.int64), entries)
        aw = analysis.activity_step
        ok = under & (aw >= 0)
        work = np.bincount(aw[ok], weights=m.dur[acts][ok], minlength=n)
        what = "device time"
    cw = window_of_rows(analysis, cv.compiles)
    compiling = np.zeros(n, dtype=bool)
    compiling[cw[(cw >= 0) & (cw < n)]] = True
    warm = warm_steps(analysis).mask
    steps_idx = np.flatnonzero((host[:n] > 0) & ~compiling & warm).tolist()
    if not steps_idx:
        return []
    h = float(np.median(host[steps_idx]))
    wk = float(np.median(work[steps_idx]))
    if h < th.ratio * wk or h - wk < th.min_excess_us:
        return []
    steps = step_numbers(analysis, steps_idx)
    sel = entries[np.isin(ewin, steps_idx)]
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"Calling compiled code costs the host {fmt_us(h)} per step outside the "
                 f"graph's own ops (guard checks, wrappers, generated Python; median over "
                 f"{steps_text(steps)}) for {fmt_us(wk)} of {what}: "
                 f"{h / max(wk, 1e-9):.1f}× the graph's work. The graph is too small for "
                 "compilation to pay off."),
        steps=steps, evidence=evidence_rows(analysis, sel[:6], "a compiled call"),
        savings_us=None,
        confirm=("profile the same steps without torch.compile: if eager steps take less "
                 "host time, the compiled region is too small"))]


RULE = Rule(id="compile-overhead", title="Compiled region too small to pay off",
            severity="warning", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving=("compile work is paid once per new shape, and the projections leave cold "
                       "steps out"))
