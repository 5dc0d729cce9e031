"""One record per critical-path segment of every step of a log dir: what
``Report.critical_path_frame()`` turns into a DataFrame. Each span is analysed again (from
the cache when it is on): the report document holds only each step's longest segments."""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis, Thresholds
from tb_diagnostics.analysis.critpath import KIND_NAMES, critical_paths
from tb_diagnostics.analysis.critpath.names import op_above
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import LogDir

#: The frame's columns, in this order.
CRITICAL_PATH_COLUMNS = ("run", "worker", "span", "file", "step", "kind", "name", "op",
                         "start_us", "dur_us", "row")


def span_records(analysis: SpanAnalysis, step: int | None = None) -> list[dict[str, Any]]:
    """Every segment of every step of the span (of the steps numbered ``step`` only), in
    step and time order: ``step``, ``kind``, ``name``, ``op``, ``start_us``, ``dur_us``,
    ``row``."""
    m = analysis.model
    cp = critical_paths(analysis)
    counts = np.diff(cp.offsets)
    numbers = [w.step for w in analysis.windows]
    keep = np.ones(cp.dur.shape[0], dtype=bool)
    if step is not None:
        chosen = np.asarray([n == step for n in numbers], dtype=bool)
        keep = np.repeat(chosen, counts)
    idx = np.flatnonzero(keep)
    rows = cp.row[idx]
    ops = op_above(analysis, rows)
    step_of = np.repeat(np.arange(len(numbers)), counts)[idx]
    names = [m.strings[i] if r >= 0 else None
             for r, i in zip(rows.tolist(), m.name[np.maximum(rows, 0)].tolist(), strict=True)]
    op_names = [m.strings[i] if o >= 0 else None
                for o, i in zip(ops.tolist(), m.name[np.maximum(ops, 0)].tolist(), strict=True)]
    return [{"step": numbers[k], "kind": KIND_NAMES[c], "name": n, "op": o,
             "start_us": round(s, 3), "dur_us": round(d, 3), "row": r}
            for k, c, n, o, s, d, r in zip(step_of.tolist(), cp.kind[idx].tolist(), names,
                                           op_names, cp.start[idx].tolist(),
                                           cp.dur[idx].tolist(), rows.tolist(), strict=True)]


def critical_path_records(logdir: LogDir, thresholds: Thresholds | None = None,
                          cache: TraceCache | None = None, step: int | None = None,
                          ) -> list[dict[str, Any]]:
    """:func:`span_records` of every span of ``logdir``, with ``run``, ``worker``,
    ``span`` and ``file`` first; files that cannot be read are left out (the report
    names them)."""
    from tb_diagnostics.opening import open_analysis

    out: list[dict[str, Any]] = []
    for r in logdir.runs:
        for w in r.workers:
            for f in w.spans:
                try:
                    analysis = open_analysis(f, thresholds, cache)
                except TraceLoadError:
                    continue
                head = {"run": r.name, "worker": w.name, "span": f.span, "file": f.relpath}
                out.extend({**head, **rec} for rec in span_records(analysis, step))
    return out
