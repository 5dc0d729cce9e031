"""Per warm step: self time by op name and device time by kernel name, for ``compare``.

These need the trace models (the report document keeps only per-step totals),
which come from the engine's cache (through :mod:`tb_diagnostics.opening`) when the
report was just built.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis import Thresholds
from tb_diagnostics.analysis.views.tables import kernel_instances, op_table
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.logdir import LogDir
from tb_diagnostics.opening import analysed_spans
from tb_diagnostics.report.compare import cold_steps


def run_times(logdir: LogDir, run_doc: dict[str, Any], thresholds: Thresholds | None = None,
              cache: TraceCache | None = None) -> dict[str, dict[str, float]]:
    """``{"ops": {name: µs}, "kernels": {name: µs}}``, each a mean per warm step.

    Op time is self time (what ``key_averages()`` calls Self CPU), so nested
    ops are not counted twice; kernel time is the kernels' summed duration.
    Only warm step windows count (see :mod:`tb_diagnostics.report.compare`).
    """
    run = logdir.run(run_doc["run"])
    ops: dict[str, float] = {}
    kernels: dict[str, float] = {}
    n_windows = 0
    if run is None:
        return {"ops": ops, "kernels": kernels}
    span_docs = {s["file"]: s for w in run_doc["workers"] for s in w["spans"]}
    for span, analysis in analysed_spans(run.files, span_docs, thresholds, cache):
        cold = cold_steps(span)
        warm = np.asarray([w.step not in cold for w in analysis.windows], dtype=bool)
        if not warm.any():
            warm[:] = True
        n_windows += int(warm.sum())
        m = analysis.model
        table = op_table(analysis)
        rows = analysis.op_rows
        keep = (table.op_window >= 0) & warm[np.maximum(table.op_window, 0)]
        _add(ops, m.strings, table.name_ids[table.op_entry[keep]], m.self_time(rows[keep]))
        k = kernel_instances(analysis)
        keep = (k.window >= 0) & warm[np.maximum(k.window, 0)]
        _add(kernels, m.strings, k.name[keep], m.dur[k.rows[keep]])
    if n_windows:
        ops = {k: v / n_windows for k, v in ops.items()}
        kernels = {k: v / n_windows for k, v in kernels.items()}
    return {"ops": ops, "kernels": kernels}


def _add(out: dict[str, float], strings: list[str], ids: np.ndarray, values: np.ndarray) -> None:
    if not ids.size:
        return
    uniq, inv = np.unique(ids, return_inverse=True)
    sums = np.bincount(inv, weights=values, minlength=uniq.shape[0])
    for sid, v in zip(uniq.tolist(), sums.tolist(), strict=True):
        out[strings[sid]] = out.get(strings[sid], 0.0) + float(v)
