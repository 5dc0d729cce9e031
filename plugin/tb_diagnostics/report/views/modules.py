"""The Modules view's document (``/view?name=modules``, ``tb-diagnostics modules``).

``{step, modules_recorded, nodes, omitted, max_depth, max_children, total_rows,
offset, rows}``: the tree in pre-order (children by ``sort``, busiest host first), each
row ``{id, parent, depth, name, module, path, calls, host_us, host_self_us, device_us,
device_self_us, host_mean_us, children, children_omitted}``. The tree is bounded: at
most ``depth`` levels (extra parameter, default :data:`MAX_DEPTH`), ``children`` per
node (default :data:`MAX_CHILDREN`), ``limit`` rows; ``children_omitted`` counts what a
node's row leaves out, ``omitted`` the nodes the caps leave out in all. With ``q`` the
rows are the matching nodes, flat, by ``sort``.
A row's ``id`` is the Operators view's ``module=`` parameter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.modules import (
    MODULE_PREFIX,
    ModuleFigures,
    module_figures,
    module_tree,
)
from tb_diagnostics.output import displayable
from tb_diagnostics.report.views import SpanView, ViewParamError, ViewParams, step_window

MAX_DEPTH = 12
MAX_CHILDREN = 50
_FIGURES = ("calls", "host_us", "host_self_us", "device_us", "device_self_us", "host_mean_us")
COLUMNS = ("id", "parent", "depth", "path", "calls", "host_us", "host_self_us", "device_us",
           "device_self_us")


def _bound(extra: dict[str, str], key: str, default: int) -> int:
    raw = extra.get(key)
    if raw in (None, ""):
        return default
    try:
        return max(1, min(int(raw), 1000))
    except ValueError:
        raise ViewParamError(f"{key} must be an integer, not {raw!r}") from None


def _sort_values(f: ModuleFigures, sort: str) -> tuple[str, bool, np.ndarray | None]:
    desc = sort.startswith("-")
    col = sort[1:] if desc else sort
    if col == "name":
        return col, desc, None
    if col not in _FIGURES:
        raise ViewParamError(f"sort: no column {col!r} (one of name, {', '.join(_FIGURES)})")
    v = f.host_us / np.maximum(f.calls, 1) if col == "host_mean_us" else getattr(f, col)
    return col, desc, np.asarray(v, dtype=np.float64)


def modules_document(analysis: SpanAnalysis, params: ViewParams) -> dict[str, Any]:
    extra = dict(params.extra or {})
    max_depth = _bound(extra, "depth", MAX_DEPTH)
    max_children = _bound(extra, "children", MAX_CHILDREN)
    window = step_window(analysis, params.step)
    t = module_tree(analysis)
    f = module_figures(analysis, window)
    m = analysis.model
    names = [m.strings[int(i)].removeprefix(MODULE_PREFIX) for i in t.node_name]
    col, desc, values = _sort_values(f, params.sort or "-host_us")

    def ordered(nodes: list[int]) -> list[int]:
        if values is None:
            return sorted(nodes, key=lambda n: names[n], reverse=desc)
        return sorted(nodes, key=lambda n: (-values[n] if desc else values[n], n))

    present = f.calls > 0  # a step's rows: the nodes it called
    kids: dict[int, list[int]] = {}
    for n in np.flatnonzero(present).tolist():
        p = int(t.node_parent[n])
        # A step's module whose parent's frame began in an earlier step: a root here.
        kids.setdefault(p if p >= 0 and present[p] else -1, []).append(n)
    paths: dict[int, str] = {}

    def path(n: int) -> str:
        if n not in paths:
            p = int(t.node_parent[n])
            paths[n] = names[n] if p < 0 else f"{path(p)} / {names[n]}"
        return paths[n]

    def row(n: int) -> dict[str, Any]:
        calls = int(f.calls[n])
        children = kids.get(n, [])
        return {"id": n, "parent": int(t.node_parent[n]), "depth": int(t.node_depth[n]),
                "name": names[n], "module": names[n].rsplit("_", 1)[0], "path": path(n),
                "calls": calls, "host_us": round(float(f.host_us[n]), 3),
                "host_self_us": round(float(f.host_self_us[n]), 3),
                "device_us": round(float(f.device_us[n]), 3),
                "device_self_us": round(float(f.device_self_us[n]), 3),
                "host_mean_us": round(float(f.host_us[n]) / max(calls, 1), 3),
                "children": len(children), "children_omitted": 0}

    end = params.offset + params.limit
    if params.q:
        needle = params.q.casefold()
        hits = ordered([n for n in np.flatnonzero(present).tolist()
                        if needle in names[n].casefold()])
        total, rows = len(hits), [row(n) for n in hits[params.offset:end]]
        omitted = 0
    else:
        # Pre-order, children by the sort; the caps counted where they cut.
        flat: list[tuple[int, int]] = []  # (node, children left out)
        omitted = 0
        stack = [(n, 0) for n in reversed(ordered(kids.get(-1, [])))]
        while stack:
            n, d = stack.pop()
            children = ordered(kids.get(n, []))
            keep = children[:max_children] if d + 1 < max_depth else []
            flat.append((n, len(children) - len(keep)))
            omitted += _subtree(kids, children[len(keep):])
            stack.extend((c, d + 1) for c in reversed(keep))
        total, rows = len(flat), []
        for n, left_out in flat[params.offset:end]:
            rows.append(row(n))
            rows[-1]["children_omitted"] = left_out
    return {"step": None if window is None else analysis.windows[window].step,
            "modules_recorded": t.present, "nodes": int(present.sum()),
            "max_depth": max_depth, "max_children": max_children, "omitted": omitted,
            "total_rows": total, "offset": params.offset, "rows": rows,
            "sort": ("-" if desc else "") + col}


def _subtree(kids: dict[int, list[int]], roots: list[int]) -> int:
    """How many nodes ``roots`` and everything under them are."""
    count, todo = 0, list(roots)
    while todo:
        n = todo.pop()
        count += 1
        todo.extend(kids.get(n, []))
    return count


def _text(doc: dict[str, Any]) -> str:
    if not doc["modules_recorded"]:
        return ("no nn.Module frames in this trace: record with "
                "torch.profiler.profile(with_stack=True) or with_modules=True")
    head = f"{doc['nodes']} module nodes"
    if doc["step"] is not None:
        head += f" · step {doc['step']}"
    lines = [head, f"{'calls':>7} {'host ms':>9} {'self ms':>9} {'device ms':>9}  module"]
    for r in doc["rows"]:
        more = f"  (+{r['children_omitted']} not shown)" if r["children_omitted"] else ""
        lines.append(f"{r['calls']:>7} {r['host_us'] / 1e3:>9.3f} {r['host_self_us'] / 1e3:>9.3f} "
                     f"{r['device_us'] / 1e3:>9.3f}  {'  ' * r['depth']}{r['name']}{more}")
    if len(doc["rows"]) < doc["total_rows"]:
        lines.append(f"… {doc['total_rows'] - len(doc['rows'])} more rows (--limit)")
    if doc["omitted"]:
        lines.append(f"… {doc['omitted']} nodes below the depth and children caps")
    return "\n".join(displayable(ln) for ln in lines)


VIEW = SpanView(name="modules", title="Modules", document=modules_document, columns=COLUMNS,
                text=_text)
