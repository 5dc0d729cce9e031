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

from tb_diagnostics.trace.categories import SYNC_NAME

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
