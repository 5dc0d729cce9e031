"""The dispatch tree as the tab shows it: pruned to a readable size, with marks.

:meth:`CallNode.to_dict` gives the whole aggregated tree; a transformer step
can have hundreds of distinct ops under one node. Here each node keeps its
``MAX_CHILDREN`` heaviest children and folds the rest into one "more" node
(their times summed, so every level still adds up), and nodes get the marks
a reader looks for in a dispatch chain: dispatcher-level fusions (``addmm``
is bias + GEMM in one call), copies the user did not ask for (a
``Memcpy DtoD`` under ``addmm`` seeds the output with the bias), cuBLAS /
cuDNN occupancy queries before a heavyweight launch, and host syncs.
"""

from __future__ import annotations

import re
from typing import Any

from tb_diagnostics.analysis.dispatch import KIND_LABEL
from tb_diagnostics.trace.categories import SYNC_NAME, Kind

MAX_CHILDREN = 40

#: Ops that fuse an elementwise step into a GEMM at the dispatcher.
FUSED_OPS = frozenset({"aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::addmv",
                       "aten::addr", "aten::_addmm_activation"})
_FUSED_NAME = re.compile(r"fused|^triton_|CompiledFxGraph|_foreach_", re.IGNORECASE)
#: Ops whose whole purpose is to copy: a copy under them is asked for, not hidden.
COPY_OPS = frozenset({"aten::copy_", "aten::to", "aten::_to_copy", "aten::clone",
                      "aten::contiguous", "aten::fill_", "aten::zero_", "aten::zeros",
                      "aten::zeros_like", "aten::ones", "aten::full", "aten::empty_like",
                      "aten::index_put_", "aten::cat", "aten::stack", "aten::pin_memory"})
_OCCUPANCY = re.compile(r"^(?:cuda|hip)Occupancy")


def marks_of(node: dict[str, Any], op_ancestor: str | None) -> list[str]:
    name, kind = node["name"], node["kind"]
    marks = []
    if (kind == "op" and name in FUSED_OPS) or _FUSED_NAME.search(name):
        marks.append("fusion")
    if kind in ("memcpy", "memset") and (op_ancestor is None or op_ancestor not in COPY_OPS):
        marks.append("hidden copy")
    if kind in ("runtime", "driver") and _OCCUPANCY.match(name):
        marks.append("occupancy query")
    if SYNC_NAME.search(name):
        marks.append("sync")
    return marks


def present_tree(tree: dict[str, Any], max_children: int = MAX_CHILDREN) -> dict[str, Any]:
    """A copy of ``tree`` (from ``CallNode.to_dict``) pruned and marked for the tab."""
    counter = iter(range(1 << 30))

    def visit(node: dict[str, Any], op_ancestor: str | None) -> dict[str, Any]:
        out = {k: v for k, v in node.items() if k != "children"}
        out["id"] = next(counter)
        marks = marks_of(node, op_ancestor)
        if marks:
            out["marks"] = marks
        kids = node.get("children") or []
        if not kids:
            return out
        below = node["name"] if node["kind"] == "op" else op_ancestor
        shown = [visit(c, below) for c in kids[:max_children]]
        rest = kids[max_children:]
        if rest:
            shown.append({
                "id": next(counter), "name": f"{len(rest)} more", "kind": "more",
                "count": sum(c["count"] for c in rest),
                "total_us": round(sum(c["total_us"] for c in rest), 3),
                "self_us": round(sum(c["self_us"] for c in rest), 3),
                "device_us": round(sum(c["device_us"] for c in rest), 3),
                "rows": [],
            })
        out["children"] = shown
        return out

    return visit(tree, None)


def heaviest_path(tree: dict[str, Any]) -> list[int]:
    """Node ids from the root down the heaviest child each time: what opens first."""
    path, node = [], tree
    while node is not None:
        path.append(node["id"])
        kids = [c for c in node.get("children", []) if c["kind"] != "more"]
        node = max(kids, key=lambda c: (c["device_us"], c["total_us"]), default=None)
    return path


def path_to_row(model: Any, window: Any, tree: dict[str, Any], row: int) -> list[int]:
    """Node ids from the root of ``tree`` (a :func:`present_tree` of ``window``'s call
    tree) down to the node that merged ``row``: what the tab opens to show one call.

    The call tree merges calls by (kind, name) under their parent, so the row's
    chain of enclosing calls names its node. Rows :func:`call_tree` leaves out
    (Python rows, calls outside the window) end the chain as they end it there;
    a device activity hangs under its launching call. Where the chain reaches a
    pruned ("more") node the path stops there; ``[]`` for a row the tree cannot hold.
    """
    n = len(model)
    if not 0 <= row < n:
        return []

    def placed(r: int) -> bool:
        return (0 <= r < n and bool(model.is_host[r]) and int(model.kind[r]) != Kind.PYTHON
                and r != window.row and window.host_start <= model.start[r] < window.host_end)

    chain: list[int] = []
    r = row
    if not model.is_host[row]:  # a device activity: its node is under its launcher's
        chain.append(row)
        r = int(model.launcher[row])
    elif not placed(row):
        return []
    while placed(r):
        chain.append(r)
        r = int(model.parent[r])
    chain.reverse()
    node, path = tree, [tree["id"]]
    steps = [(KIND_LABEL[Kind(int(model.kind[x]))], model.name_of(x)) for x in chain]
    top = chain[0] if chain else row
    if window.row >= 0 and int(model.lane[top]) != int(model.lane[window.row]) \
            and model.is_host[top]:
        steps.insert(0, ("thread", model.lanes[int(model.lane[top])].label))
    for kind, name in steps:
        kids = node.get("children") or []
        nxt = next((c for c in kids if c["kind"] == kind and c["name"] == name), None)
        if nxt is None:
            nxt = next((c for c in kids if c["kind"] == "more"), None)
            if nxt is not None:
                path.append(nxt["id"])
            break
        node = nxt
        path.append(node["id"])
    return path
