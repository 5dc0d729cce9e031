"""torch.compile in a trace: compiled regions, guard checks, graph calls and compiles.

What each generation writes on the host:

- ``Torch-Compiled Region: F/R`` (torch ≥ 2.1) around every call of compiled
  frame ``F``, compile ``R`` of it (``R > 0``: the frame was recompiled);
  ``CompiledFunction`` / ``CompiledFunctionBackward`` (AOTAutograd, 2022+);
- ``TorchDynamo Cache Lookup`` (the guard check before each call) and
  ``AOTDispatcher Runtime Wrapper Prologue`` (AOTAutograd's runtime wrapper);
- ``## Call CompiledFxGraph <hash> ##`` (Inductor's generated code; the same hash
  on every step is a cache hit);
- compile work itself: ``… (dynamo_timed)`` spans, ``entire_frame_compile``,
  ``backend_compile``… (torch ≥ 2.2), and Inductor's ``triton_*`` kernels on the
  device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, covered, union
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.trace.categories import HOST_KINDS, Kind

REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
COMPILED_FUNCTION = re.compile(r"^CompiledFunction(?:Backward)?$")
FX_GRAPH = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
CACHE_LOOKUP = re.compile(r"^TorchDynamo Cache Lookup$")
AOT_WRAPPER = re.compile(r"^AOTDispatcher Runtime Wrapper")
COMPILE_WORK = re.compile(
    r" \(dynamo_timed\)$|^entire_frame_compile$|^_compile\.compile_inner$|^backend_compile$"
    r"|^OutputGraph\.call_user_compiler$|^compile_fx(?:_inner)?$|^inductor_compile$"
    r"|^TorchDynamo Compile"
)
TRITON = re.compile(r"^triton_")


@dataclass(frozen=True)
class Compiled:
    """The torch.compile markers of a span (host rows unless said otherwise)."""

    regions: np.ndarray  # Torch-Compiled Region: F/R
    functions: np.ndarray  # CompiledFunction / CompiledFunctionBackward
    fx_graphs: np.ndarray  # ## Call CompiledFxGraph <hash> ##
    lookups: np.ndarray  # TorchDynamo Cache Lookup
    wrappers: np.ndarray  # AOTDispatcher Runtime Wrapper …
    compiles: np.ndarray  # compile work (dynamo_timed spans…), outermost only
    compile_annotations: int  # every compile-work span, nested ones included
    triton: np.ndarray  # triton_* kernels (device rows)

    @property
    def present(self) -> bool:
        return bool(self.regions.size or self.functions.size or self.fx_graphs.size
                    or self.triton.size)

    @property
    def entry_rows(self) -> np.ndarray:
        """The rows that mark "compiled code ran here" (regions, else CompiledFunction,
        else the graph calls)."""
        for rows in (self.regions, self.functions, self.fx_graphs):
            if rows.size:
                return rows
        return self.regions


def _host(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    kinds = np.asarray(sorted(HOST_KINDS), dtype=np.uint8)
    return rows[np.isin(analysis.model.kind[rows], kinds)]


_PATTERNS = {"regions": REGION, "functions": COMPILED_FUNCTION, "fx_graphs": FX_GRAPH,
             "lookups": CACHE_LOOKUP, "wrappers": AOT_WRAPPER, "compiles": COMPILE_WORK,
             "triton": TRITON}
#: Cheap substrings one of which every marker contains: most names (aten ops,
#: kernels, Python frames) are rejected without running a regular expression.
_HINTS = ("Compiled", "Torch", "AOTDispatcher", "dynamo", "compile", "triton_")


#: Any of the hints, as one pattern: the model's one search over its names finds the few
#: that hold one (a Python ``any`` per name was 10⁶ generators on 10⁶ step names).
_HINT = re.compile("|".join(re.escape(h) for h in _HINTS))


def _name_ids(analysis: SpanAnalysis) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {k: [] for k in _PATTERNS}
    strings = analysis.model.strings
    for i in analysis.model.name_ids_matching(_HINT).tolist():
        s = strings[i]
        for key, pat in _PATTERNS.items():
            if pat.search(s):
                ids[key].append(i)
    return ids


@computed
def compiled_view(analysis: SpanAnalysis) -> Compiled:
    m = analysis.model
    ids = _name_ids(analysis)

    def rows(key: str) -> np.ndarray:
        if not ids[key]:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isin(m.name, np.asarray(ids[key], dtype=np.int32)))

    compiles = _host(analysis, rows("compiles"))
    annotations = int(compiles.size)
    if compiles.size:
        # Keep the outermost compile spans: nested dynamo_timed spans are parts of one compile.
        inside = np.zeros(compiles.size, dtype=bool)
        members = set(compiles.tolist())
        for i, r in enumerate(compiles.tolist()):
            p = int(m.parent[r])
            while p >= 0 and not inside[i]:
                inside[i] = p in members
                p = int(m.parent[p])
        compiles = compiles[~inside]
    triton = rows("triton")
    triton = triton[m.kind[triton] == Kind.KERNEL]
    return Compiled(
        regions=_host(analysis, rows("regions")),
        functions=_host(analysis, rows("functions")),
        fx_graphs=_host(analysis, rows("fx_graphs")),
        lookups=_host(analysis, rows("lookups")),
        wrappers=_host(analysis, rows("wrappers")),
        compiles=compiles,
        compile_annotations=annotations,
        triton=triton,
    )


@computed
def compile_intervals(analysis: SpanAnalysis) -> Intervals:
    """When the host was compiling (Dynamo tracing, AOTAutograd, Inductor codegen and
    autotuning: the outermost compile-work spans): a one-time cost, its own cause of
    device idle time, neither launch overhead nor steady-state work."""
    m = analysis.model
    rows = compiled_view(analysis).compiles
    return union(m.start[rows], m.end[rows])


def compile_time_per_window(analysis: SpanAnalysis, lo: np.ndarray,
                            hi: np.ndarray) -> np.ndarray:
    """Host compile time inside each ``[lo, hi)`` (µs): windows' host or device bounds."""
    return covered(compile_intervals(analysis), lo, hi)


def steps_of(analysis: SpanAnalysis, rows: np.ndarray) -> list[int | None]:
    """The step numbers (None for a span without steps) that host ``rows`` fall in."""
    win = window_of_rows(analysis, rows)
    windows = analysis.windows
    return [windows[k].step for k in sorted(set(win[win >= 0].tolist()))]


def per_window_time(analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
    """Summed duration of host ``rows`` in each step window."""
    win = window_of_rows(analysis, rows)
    ok = win >= 0
    return np.bincount(win[ok], weights=analysis.model.dur[rows][ok],
                       minlength=len(analysis.windows))
