"""The Operators view's document (``/view?name=ops``, ``tb-diagnostics ops``).

``{group, sort, step, module, stacks_recorded, totals: {calls, host_self_us, device_self_us},
total_rows, offset, rows}``; each row: ``name``, ``input_dims`` (grouped by shapes),
``calls``, ``host_total_us``, ``host_self_us``, ``device_total_us``, ``device_self_us``,
``mean_us`` (host total per call), ``device_mean_us``, ``host_self_mean_us``,
``device_self_mean_us``, ``stack`` (the most common call stack, innermost frame first,
at most :data:`MAX_FRAMES`; null without ``with_stack``), ``stack_calls`` (the calls
with it), ``stacks`` (distinct stacks), and ``rows``/``steps``: the group's first calls
(model rows, their step numbers) for the tab to open in the dispatch chain and timeline.

Extra parameter ``module=<node id>`` (a node of the Modules view): only the ops under
that module's frames.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.cost.shapes import parse_json
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.modules import module_tree, node_path, ops_within
from tb_diagnostics.analysis.views.operators import GROUPINGS, OpGroups, op_calls, op_groups
from tb_diagnostics.analysis.views.pystack import python_stack
from tb_diagnostics.output import displayable
from tb_diagnostics.report.views import SpanView, ViewParamError, ViewParams, step_window

MAX_FRAMES = 24
#: Columns a row can be sorted by (the figures; ``name`` alphabetically).
_FIGURES = ("calls", "host_total_us", "host_self_us", "device_total_us", "device_self_us",
            "mean_us", "device_mean_us", "host_self_mean_us", "device_self_mean_us")
COLUMNS = ("name", "input_dims", "calls", "host_total_us", "host_self_us", "device_total_us",
           "device_self_us", "mean_us", "device_mean_us")


def _r(x: float) -> float:
    return round(float(x), 3)


def _figure(g: OpGroups, col: str) -> np.ndarray:
    calls = np.maximum(g.calls, 1)
    if col == "calls":
        return g.calls
    if col.endswith("_mean_us") or col == "mean_us":
        base = {"mean_us": g.host_total_us, "device_mean_us": g.device_total_us,
                "host_self_mean_us": g.host_self_us,
                "device_self_mean_us": g.device_self_us}[col]
        return base / calls
    return getattr(g, col)


def _order(analysis: SpanAnalysis, g: OpGroups, sort: str) -> np.ndarray:
    desc = sort.startswith("-")
    col = sort[1:] if desc else sort
    if col == "name":
        names = np.asarray([analysis.model.strings[int(i)] for i in g.name_ids], dtype=object)
        order = np.argsort(names, kind="stable")
        return order[::-1] if desc else order
    if col not in _FIGURES:
        raise ViewParamError(f"sort: no column {col!r} (one of name, {', '.join(_FIGURES)})")
    v = _figure(g, col).astype(np.float64)
    # Ties by name id: the order does not depend on the numpy sort's whims.
    return np.lexsort((g.name_ids, -v if desc else v))


def _stack(analysis: SpanAnalysis, g: OpGroups, i: int) -> list[str] | None:
    row = int(g.stack_row[i])
    if row < 0:
        return None
    frames = [name for _, name in python_stack(analysis, row)]
    return frames[:MAX_FRAMES]


def _module_filter(analysis: SpanAnalysis, raw: str | None) -> tuple[int | None, np.ndarray | None]:
    if raw in (None, ""):
        return None, None
    try:
        node = int(raw)
    except ValueError:
        raise ViewParamError(f"module must be a module node id, not {raw!r}") from None
    if not 0 <= node < len(module_tree(analysis)):
        raise ViewParamError(f"no module node {node} in this span")
    return node, ops_within(analysis, node, op_calls(analysis).rows)


def ops_document(analysis: SpanAnalysis, params: ViewParams) -> dict[str, Any]:
    by = params.group or "name"
    if by not in GROUPINGS:
        raise ViewParamError(f"group must be one of {', '.join(GROUPINGS)}, not {by!r}")
    window = step_window(analysis, params.step)
    node, within = _module_filter(analysis, (params.extra or {}).get("module"))
    g = op_groups(analysis, by, window, within, within_key=("module", node) if within is not None
                  else None)
    m = analysis.model
    default = "-host_total_us" if analysis.cpu_only else "-device_total_us"
    sort = params.sort or default
    order = _order(analysis, g, sort)
    if params.q:
        needle = params.q.casefold()
        ids = sorted_sets.unique(g.name_ids)
        hit = {int(i) for i in ids if needle in m.strings[int(i)].casefold()}
        order = order[np.isin(g.name_ids[order], np.fromiter(hit, dtype=np.int64,
                                                             count=len(hit)))]
    total = int(order.shape[0])
    windows = analysis.windows
    calls = op_calls(analysis)
    figures = {col: _figure(g, col) for col in _FIGURES}  # once, not per row
    out = []
    for i in order[params.offset:params.offset + params.limit].tolist():
        rows = g.first_rows(i)
        wins = calls.window[np.searchsorted(calls.rows, rows)]
        row: dict[str, Any] = {"name": m.strings[int(g.name_ids[i])]}
        if by == "shapes":
            row["input_dims"] = parse_json(m.string(int(g.dims_ids[i])))
        row.update({col: (int(g.calls[i]) if col == "calls" else _r(figures[col][i]))
                    for col in _FIGURES})
        row.update({"stack": _stack(analysis, g, i), "stack_calls": int(g.stack_calls[i]),
                    "stacks": int(g.stacks[i]), "rows": rows.tolist(),
                    "steps": [windows[w].step if w >= 0 else None for w in wins.tolist()]})
        out.append(row)
    doc: dict[str, Any] = {
        "group": by, "sort": sort, "step": None if window is None else windows[window].step,
        "module": None, "stacks_recorded": op_calls(analysis).stacks_recorded,
        "totals": {"calls": int(g.calls.sum()), "host_self_us": _r(g.host_self_us.sum()),
                   "device_self_us": _r(g.device_self_us.sum())},
        "groups": len(g), "total_rows": total, "offset": params.offset, "rows": out,
    }
    if node is not None:
        doc["module"] = {"id": node, "path": node_path(analysis, node)}
    return doc


def _text(doc: dict[str, Any]) -> str:
    head = f"{doc['total_rows']} op groups by {doc['group']}"
    if doc["step"] is not None:
        head += f" · step {doc['step']}"
    if doc["module"]:
        head += " · under " + " / ".join(doc["module"]["path"])
    lines = [head, f"{'calls':>8} {'host tot ms':>11} {'host self':>10} {'dev tot ms':>10} "
                   f"{'dev self':>9}  name"]
    for r in doc["rows"]:
        name = r["name"] + (f"  {r['input_dims']}" if r.get("input_dims") else "")
        lines.append(f"{r['calls']:>8} {r['host_total_us'] / 1e3:>11.3f} "
                     f"{r['host_self_us'] / 1e3:>10.3f} {r['device_total_us'] / 1e3:>10.3f} "
                     f"{r['device_self_us'] / 1e3:>9.3f}  {name}")
    if len(doc["rows"]) < doc["total_rows"]:
        lines.append(f"… {doc['total_rows'] - len(doc['rows'])} more (--limit)")
    return "\n".join(displayable(ln) for ln in lines)


VIEW = SpanView(name="ops", title="Operators", document=ops_document, columns=COLUMNS,
                text=_text)
