"""The step timeline payload (analysis/timeline.py) and the tab's dispatch tree (server/tree.py)."""

from __future__ import annotations

import pytest

from conftest import analyse
from tb_diagnostics.analysis.timeline import TimelineLimits, step_range, step_timeline
from tb_diagnostics.server.tree import heaviest_path, marks_of, present_tree


def two_steps(trace):
    """Step 1 launches a kernel that runs past its host end; step 2 is host-only."""
    trace.step(1, 0, 100)
    trace.op("aten::mm", 10, 50)
    trace.launch(20, 10, "gemm", 40, 150)  # ends at 190, after step 1's host end (100)
    trace.step(2, 100, 100)
    trace.op("aten::relu", 110, 20)
    trace.op("aten::add", 130, 20)
    trace.x("python_function", "model.py(12): forward", 100, 90)
    return trace


def names(tl):
    return [tl["names"][i] for i in tl["events"]["name"]]


def test_range_covers_host_and_device_windows(trace, tmp_path):
    a = analyse(two_steps(trace), tmp_path)
    assert step_range(a, 0) == (0.0, 190.0)  # the kernel's end
    assert step_range(a, 1) == (100.0, 200.0)


def test_events_lanes_depths_and_links(trace, tmp_path):
    a = analyse(two_steps(trace), tmp_path)
    tl = step_timeline(a, 0)
    got = names(tl)
    assert "gemm" in got and "aten::mm" in got
    assert "model.py(12): forward" not in got  # Python frames are not drawn
    ev = tl["events"]
    i_step, i_mm, i_launch, i_k = (got.index(n) for n in
                                   ("ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "gemm"))
    assert (ev["depth"][i_step], ev["depth"][i_mm], ev["depth"][i_launch]) == (0, 1, 2)
    assert tl["lanes"][ev["lane"][i_k]]["device"] is True
    assert [i_launch, i_k] in tl["links"]
    # Step 2's ops overlap the range [0, 190) and are clipped to it.
    i_add = got.index("aten::add")
    assert ev["start_us"][i_add] == 130.0 and ev["dur_us"][i_add] == 20.0
    i_step2 = got.index("ProfilerStep#2")
    assert ev["dur_us"][i_step2] == 90.0 and i_step2 in ev["clipped"]
    assert tl["lanes"][0]["depth"] == 3
    assert tl["step_window"] == {"start_us": 0.0, "end_us": 190.0, "host_start_us": 0.0,
                                 "host_end_us": 100.0}


def test_highlight_widens_the_range_and_is_kept(trace, tmp_path):
    a = analyse(two_steps(trace), tmp_path)
    m = a.model
    py = next(r for r in range(len(m)) if m.name_of(r) == "model.py(12): forward")
    tl = step_timeline(a, 0, highlight=[py, 10_000])  # out-of-range rows are ignored
    assert names(tl)[tl["highlight"][0]] == "model.py(12): forward"
    assert tl["range"]["end_us"] == 190.0


def test_limit_keeps_device_work_launches_and_wanted_rows(trace, tmp_path):
    trace.step(1, 0, 10_000)
    for i in range(200):
        trace.op(f"aten::op{i}", 10 + i * 40, 30)
        trace.launch(12 + i * 40, 5, f"k{i}", 20 + i * 40, 1 + i % 7)
    a = analyse(trace, tmp_path)
    m = a.model
    wanted = next(r for r in range(len(m)) if m.name_of(r) == "aten::op7")
    tl = step_timeline(a, 0, highlight=[wanted], limits=TimelineLimits(max_events=120))
    got = names(tl)
    assert tl["shown"] == len(got) <= 121
    assert tl["total"] == 601
    assert tl["dropped"]["over_limit"] == 601 - tl["shown"]
    assert "aten::op7" in got and "ProfilerStep#1" in got
    kernels = [n for n, k in zip(got, tl["events"]["kind"], strict=True) if k == "kernel"]
    assert len(kernels) >= 35
    # every kept kernel's launch is kept too, so every one has its link
    assert len(tl["links"]) == len(kernels)


def test_depth_and_name_limits(trace, tmp_path):
    trace.step(1, 0, 100)
    for d in range(6):
        trace.op("aten::" + "x" * 30 + str(d), d, 100 - 2 * d)
    a = analyse(trace, tmp_path)
    tl = step_timeline(a, 0, limits=TimelineLimits(max_depth=4, max_name=12))
    assert max(tl["events"]["depth"]) == 3
    assert tl["dropped"]["too_deep"] == 3
    assert all(len(n) <= 12 for n in tl["names"])
    assert tl["names"][1].endswith("…")


# ---- the tree as the tab shows it -----------------------------------------------------------
@pytest.mark.parametrize("node, op, expected", [
    ({"name": "aten::addmm", "kind": "op"}, None, ["fusion"]),
    ({"name": "triton_poi_fused_add_0", "kind": "kernel"}, "aten::add", ["fusion"]),
    ({"name": "Memcpy DtoD (Device -> Device)", "kind": "memcpy"}, "aten::addmm",
     ["hidden copy"]),
    ({"name": "Memcpy HtoD (Pageable -> Device)", "kind": "memcpy"}, "aten::copy_", []),
    ({"name": "Memset (Device)", "kind": "memset"}, "aten::zero_", []),
    ({"name": "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "kind": "runtime"}, "aten::mm",
     ["occupancy query"]),
    ({"name": "cudaStreamSynchronize", "kind": "runtime"}, "aten::item", ["sync"]),
    ({"name": "aten::mm", "kind": "op"}, None, []),
])
def test_marks(node, op, expected):
    assert marks_of(node, op) == expected


def test_present_tree_prunes_and_sums():
    kids = [{"name": f"aten::op{i}", "kind": "op", "count": 1, "total_us": 100.0 - i,
             "self_us": 1.0, "device_us": 0.0, "rows": [i]} for i in range(50)]
    tree = {"name": "ProfilerStep#1", "kind": "step", "count": 1, "total_us": 5000.0,
            "self_us": 0.0, "device_us": 0.0, "rows": [0], "children": kids}
    out = present_tree(tree, max_children=40)
    assert len(out["children"]) == 41
    more = out["children"][-1]
    assert more["kind"] == "more" and more["name"] == "10 more" and more["count"] == 10
    assert more["total_us"] == pytest.approx(sum(100.0 - i for i in range(40, 50)))
    ids = [out["id"]] + [c["id"] for c in out["children"]]
    assert len(set(ids)) == len(ids)
    assert heaviest_path(out) == [out["id"], out["children"][0]["id"]]


def test_heaviest_path_follows_device_time(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.op("aten::relu", 5, 40)
    trace.op("aten::mm", 50, 10)
    trace.launch(52, 2, "gemm", 60, 30)
    a = analyse(trace, tmp_path)
    tree = present_tree(a.call_tree(0).to_dict())
    path = heaviest_path(tree)
    by_id = {}

    def index(n):
        by_id[n["id"]] = n
        for c in n.get("children", []):
            index(c)

    index(tree)
    assert [by_id[i]["name"] for i in path] == ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel",
                                                "gemm"]
