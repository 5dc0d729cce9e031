"""The step route's ``highlight_path``: the dispatch-tree node of the first highlighted call.

The tab opens the tree there when it shows one call (a roofline point, a finding's
evidence): the tree keeps only three example rows per merged node, so the
server names the node by the call's chain of enclosing calls.
"""

from __future__ import annotations

from pathlib import Path

from conftest import TraceBuilder
from tb_diagnostics.server import DataProvider
from tb_diagnostics.server.tree import MAX_CHILDREN


def write_run(root: Path) -> Path:
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    t.step(1, 0, 1000)
    t.op("forward", 10, 900)
    for i in range(6):  # six calls merge into one aten::mm node that keeps three rows
        t0 = 20 + i * 100
        t.op("aten::mm", t0, 60, **{"Input Dims": [[8, 8], [8, 8]]})
        t.launch(t0 + 5, 5, "gemm_kernel", t0 + 30, 20)
    for i in range(MAX_CHILDREN + 2):  # more names than the tree shows under one parent
        t.op(f"aten::tiny_{i:02d}", 700 + i, 0.9 - i * 0.01)  # lighter and lighter
    t.op("aten::on_another_thread", 50, 10, tid=2)
    return t.write(root / "r" / "w.1.pt.trace.json")


def names(tree: dict, path: list[int]) -> list[str]:
    by_id = {}

    def walk(n: dict) -> None:
        by_id[n["id"]] = n
        for c in n.get("children", []):
            walk(c)

    walk(tree)
    return [by_id[i]["name"] for i in path]


def step(p: DataProvider, rows: list[int]) -> dict:
    code, res = p.step("r", "w", "1", "1", ",".join(map(str, rows)))
    assert code == 200, res
    return res


def test_highlight_path_opens_the_node_of_a_call_the_tree_has_no_example_of(tmp_path):
    write_run(tmp_path)
    p = DataProvider(str(tmp_path))
    f = p.find("r", "w", "1")
    model = p.loader.wait(f).analysis.model
    mm = model.rows_named({"aten::mm"}).tolist()
    assert len(mm) == 6
    res = step(p, [mm[-1]])
    assert names(res["tree"], res["highlight_path"]) == ["ProfilerStep#1", "forward", "aten::mm"]
    # the sixth call is not among the node's example rows: only the path finds it
    node_rows = next(n for n in _walk(res["tree"]) if n["name"] == "aten::mm")["rows"]
    assert mm[-1] not in node_rows
    # without a highlight there is none, and the heaviest chain still opens first
    _, plain = p.step("r", "w", "1", "1")
    assert plain["highlight_path"] == [] and plain["open"]


def test_highlight_path_of_a_kernel_a_pruned_call_and_another_thread(tmp_path):
    write_run(tmp_path)
    p = DataProvider(str(tmp_path))
    model = p.loader.wait(p.find("r", "w", "1")).analysis.model
    kernel = int(model.rows_named({"gemm_kernel"})[3])
    res = step(p, [kernel])
    assert names(res["tree"], res["highlight_path"]) == [
        "ProfilerStep#1", "forward", "aten::mm", "cudaLaunchKernel", "gemm_kernel"]
    # the 42 tiny ops: the lightest are folded into "N more", where the path stops
    tiny = int(model.rows_named({f"aten::tiny_{MAX_CHILDREN + 1}"})[0])
    res = step(p, [tiny])
    got = names(res["tree"], res["highlight_path"])
    assert got[0] == "ProfilerStep#1" and got[-1].endswith(" more")
    other = int(model.rows_named({"aten::on_another_thread"})[0])
    res = step(p, [other])
    path = names(res["tree"], res["highlight_path"])
    assert path[0] == "ProfilerStep#1" and path[-1] == "aten::on_another_thread"
    assert len(path) == 3  # under the thread's grouping node


def _walk(n: dict):
    yield n
    for c in n.get("children", []):
        yield from _walk(c)
