"""What the tab's routes return, built from the engine's documents.

The loader calls :func:`load_and_summarise` on its pool; the provider calls
:func:`step_detail` for one step. Everything the tab shows comes from the
engine's own documents (``span_document``, ``headline``, the rule
docstrings), so the tab, ``tb-diagnostics report`` and the Markdown report
never disagree; this module only adds what the tab needs to draw them (host
windows, the badges of the steps' flags and their ``flag_why``, rule text by id, a
pruned tree): it decides nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tb_diagnostics.analysis import SpanAnalysis, Thresholds
from tb_diagnostics.analysis.timeline import step_timeline
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.engine import open_analysis, span_summary
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.report.critical_path import ROUTE_SEGMENTS, critical_path_document
from tb_diagnostics.report.document import span_document
from tb_diagnostics.report.text import headline
from tb_diagnostics.server.loader import Progress
from tb_diagnostics.server.path_threads import add_threads
from tb_diagnostics.server.tree import heaviest_path, path_to_row, present_tree


def load_and_summarise(f: SpanFile, progress: Progress, thresholds: Thresholds | None = None,
                       cache: TraceCache | None = None) -> tuple[SpanAnalysis, dict[str, Any]]:
    """Load and analyse one span file through the engine; its analysis and the tab's summary.

    The engine's disk cache makes a second look (another tab, a TensorBoard
    restart) skip the parse and the rules; the summary is the report's own
    document, so the tab and ``tb-diagnostics report`` show the same figures.
    """
    progress.set("reading", 0.05)
    analysis = open_analysis(f, thresholds, cache)  # raises TraceLoadError, naming the file
    progress.set("analysing", 0.6)
    return analysis, summarise(f, analysis, span_summary(f, thresholds, cache, analysis))


def summarise(f: SpanFile, analysis: SpanAnalysis,
              doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """The span document plus what the tab draws from it (host windows, flags, rule texts).

    Every step stays in it (the compare and run routes read them all); the ``/span`` route
    answers with :attr:`~tb_diagnostics.server.loader.Loaded.tab_summary`."""
    doc = dict(doc) if doc is not None else span_document(f, analysis)
    doc["steps"] = [dict(s) for s in doc["steps"]]
    doc["run"], doc["worker"] = f.run, f.worker
    doc["headline"] = headline(doc)
    for s, w in zip(doc["steps"], analysis.windows, strict=False):
        s["index"] = w.index
        # Badges: the step's flags, each flag the analysis gives a reason for (flag_why:
        # views.step_flags decides, the report words it) and "cold", the step's own field.
        cold = {"cold"} if s.get("cold") else set()
        s["flags"] = sorted(set(s.get("flags", ())) | set(s.get("flag_why") or ()) | cold)
    doc["rules"] = rule_texts(x["rule"] for x in doc["findings"])
    m = analysis.model
    doc["trace"] = {"events": len(m), "lanes": len(m.lanes),
                    "threads": sum(not ln.is_device for ln in m.lanes),
                    "streams": sum(ln.is_device for ln in m.lanes)}
    return doc


def rule_texts(rule_ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """Title, what / why / how-to-fix of each rule, from its docstring."""
    from tb_diagnostics.rules import all_rules  # imported late: rules import the analysis

    wanted = set(rule_ids)
    out = {}
    for rule in all_rules():
        if rule.id in wanted:
            sec = rule.doc_sections()
            out[rule.id] = {"title": rule.title, "summary": sec.get("summary", ""),
                            "what": sec.get("what it detects", ""),
                            "why": sec.get("why it matters", ""),
                            "how": sec.get("how to fix", "")}
    return out


def step_detail(analysis: SpanAnalysis, index: int,
                highlight: Iterable[int] = ()) -> dict[str, Any]:
    """One step's dispatch tree and timeline."""
    w = analysis.windows[index]
    tree = present_tree(analysis.call_tree(index).to_dict())
    highlight = list(highlight)
    path = critical_path_document(analysis, index, ROUTE_SEGMENTS, in_time_order=True)
    add_threads(analysis, path)  # for the tree's "path" badges, thread by thread
    return {
        "step": w.step,
        "index": index,
        "verdict": w.verdict,
        "tree": tree,
        "open": heaviest_path(tree),
        # The node of the first highlighted call, root first: the tab opens the tree there.
        "highlight_path": path_to_row(analysis.model, w, tree, highlight[0]) if highlight else [],
        "timeline": step_timeline(analysis, index, highlight),
        # The step's whole critical path, every segment in time order (issue 27).
        "critical_path": path,
    }
