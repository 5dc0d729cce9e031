"""The dispatch chain of a step, as an aggregated call tree.

``ProfilerStep#N → record_function → aten::matmul → aten::mm →
cudaLaunchKernel → <the GEMM kernel>``: every host call of the step is placed
under its parent, calls with the same name under the same parent are merged
into one node (with a count), and each runtime/driver call carries the device
activities it launched. A ResNet step's 4,000 op calls fold into a tree a
person can read, while the rows behind each node stay available as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import TraceModel

#: How many example rows each node keeps for evidence links.
EXAMPLE_ROWS = 3
#: Host rows per pass when building a tree.
_CHUNK = 1 << 12

KIND_LABEL = {
    Kind.CPU_OP: "op",
    Kind.USER_ANNOTATION: "annotation",
    Kind.RUNTIME: "runtime",
    Kind.DRIVER: "driver",
    Kind.PYTHON: "python",
    Kind.KERNEL: "kernel",
    Kind.MEMCPY: "memcpy",
    Kind.MEMSET: "memset",
    Kind.GPU_ANNOTATION: "gpu_annotation",
    Kind.GPU_SYNC: "gpu_sync",
    Kind.TRACE: "trace",
    Kind.OVERHEAD: "overhead",
    Kind.OTHER: "other",
}

#: The same labels by the kind's integer value, for per-row lookups without Kind(...).
_LABEL_OF = {int(k): v for k, v in KIND_LABEL.items()}


@dataclass
class CallNode:
    """Calls with one name under one parent, merged."""

    name: str
    kind: str
    count: int = 0
    total_us: float = 0.0  # summed duration of the merged calls (host or device time)
    self_us: float = 0.0  # host nodes: summed self time
    device_us: float = 0.0  # device time launched anywhere below this node
    streams: set[int] = field(default_factory=set)
    rows: list[int] = field(default_factory=list)
    children: dict[tuple[str, str], CallNode] = field(default_factory=dict)

    def child(self, name: str, kind: str) -> CallNode:
        key = (kind, name)
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = CallNode(name=name, kind=kind)
        return node

    def add(self, row: int, dur: float, self_us: float = 0.0) -> None:
        self.count += 1
        self.total_us += dur
        self.self_us += self_us
        if len(self.rows) < EXAMPLE_ROWS:
            self.rows.append(row)

    def walk(self):
        yield self
        for c in self.children.values():
            yield from c.walk()

    def to_dict(self, max_depth: int = 64) -> dict:
        kids = sorted(self.children.values(), key=lambda c: -(c.total_us + c.device_us))
        d = {
            "name": self.name,
            "kind": self.kind,
            "count": self.count,
            "total_us": round(self.total_us, 3),
            "self_us": round(self.self_us, 3),
            "device_us": round(self.device_us, 3),
            "rows": list(self.rows),
        }
        if self.streams:
            d["streams"] = sorted(self.streams)
        if kids and max_depth > 0:
            d["children"] = [c.to_dict(max_depth - 1) for c in kids]
        return d


def call_tree(model: TraceModel, step_row: int, host_start: float, host_end: float,
              activity_rows: np.ndarray) -> CallNode:
    """The aggregated call tree of one step window.

    ``step_row`` is the ProfilerStep#N row (or -1 for a span without steps);
    host calls starting in ``[host_start, host_end)`` are placed under it, calls
    on other threads under a node per thread; ``activity_rows`` are the device
    activities charged to the step, attached under their launching call.
    """
    root_name = model.name_of(step_row) if step_row >= 0 else "(whole span)"
    root = CallNode(name=root_name, kind="step")
    if step_row >= 0:
        root.add(step_row, float(model.dur[step_row]), float(model.self_time()[step_row]))
    else:
        root.count, root.total_us = 1, host_end - host_start

    host = model.host_rows
    host = host[(model.start[host] >= host_start) & (model.start[host] < host_end)]
    host = host[(model.kind[host] != Kind.PYTHON) & (host != step_row)]
    self_t = model.self_time()
    step_lane = int(model.lane[step_row]) if step_row >= 0 else -1
    strings = model.strings
    # The node of each host row, by row offset from the first: the step's rows are one
    # contiguous range of the model (rows are in start order), and a list is a tenth of
    # the memory of a dict over every call of a long step.
    lo = int(host[0]) if host.size else 0
    node_at: list[CallNode | None] = [None] * (int(host[-1]) - lo + 1 if host.size else 0)

    def node_of(row: int) -> CallNode | None:
        i = row - lo
        return node_at[i] if 0 <= i < len(node_at) else None

    # A chunk of rows at a time: the per-row Python lists stay small on huge steps.
    for c0 in range(0, host.shape[0], _CHUNK):
        part = host[c0:c0 + _CHUNK]
        columns = (part.tolist(), model.parent[part].tolist(), model.kind[part].tolist(),
                   model.lane[part].tolist(), model.name[part].tolist(),
                   model.dur[part].tolist(), self_t[part].tolist())
        for r, p, k, ln, name, dur, self_us in zip(*columns, strict=True):
            parent_node = node_of(p)
            if parent_node is None:
                if ln == step_lane or step_row < 0:
                    parent_node = root
                else:
                    label = model.lanes[ln].label
                    parent_node = root.child(label, "thread")
                    if not parent_node.rows:
                        parent_node.rows.append(-1)  # a grouping node, no row of its own
            node = parent_node.child(strings[name], _LABEL_OF[k])
            node.add(r, dur, self_us)
            node_at[r - lo] = node

    for a in activity_rows.tolist():
        launcher = int(model.launcher[a])
        parent_node = node_of(launcher) or root
        node = parent_node.child(model.name_of(a), _LABEL_OF[int(model.kind[a])])
        node.add(a, float(model.dur[a]))
        node.device_us += float(model.dur[a])
        if model.stream[a] >= 0:
            node.streams.add(int(model.stream[a]))

    _roll_up_device_time(root)
    for n in root.walk():
        if n.kind == "thread":
            n.rows = []
            n.count = 1
            n.total_us = sum(c.total_us for c in n.children.values())
    return root


def _roll_up_device_time(node: CallNode) -> float:
    """device_us of a host node = device time launched by it or anything below it."""
    if node.kind in ("kernel", "memcpy", "memset"):
        return node.device_us
    node.device_us = sum(_roll_up_device_time(c) for c in node.children.values())
    return node.device_us


def chains(root: CallNode) -> list[list[CallNode]]:
    """Every root-to-device-activity path of the tree: the dispatch chains."""
    out: list[list[CallNode]] = []

    def visit(node: CallNode, path: list[CallNode]) -> None:
        path = [*path, node]
        if node.kind in ("kernel", "memcpy", "memset"):
            out.append(path)
            return
        for c in node.children.values():
            visit(c, path)

    visit(root, [])
    return out
