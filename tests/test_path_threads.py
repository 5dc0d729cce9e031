"""Each critical-path segment's thread in the step route (server/path_threads.py): the
dispatch chain's "path" badges match segments to nodes thread by thread."""

from __future__ import annotations

from rules.conftest import shared_analysis

from tb_diagnostics.server.present import step_detail

#: DataLoader in the main process, backward on autograd's own thread.
RESNET = "kineto_resnet50_v100_dataloader_workers0"


def test_segments_carry_the_thread_of_their_op_host_time_its_own():
    a = shared_analysis(RESNET)
    m = a.model
    threads = {ln.label for ln in m.lanes if not ln.is_device}
    streams = {ln.label for ln in m.lanes if ln.is_device}
    detail = step_detail(a, 1)
    segs = detail["critical_path"]["segments"]
    assert segs and all("thread" in g for g in segs)
    for g in segs:
        if g["lane"] in threads and g["op"] is None:
            assert g["thread"] == g["lane"]  # host time outside any op: its own thread
        assert g["thread"] is None or g["thread"] in threads
    # Kernels on the path ran on the GPU but were launched from a host thread; the
    # backward's kernels from autograd's thread, the forward's from the main one.
    launched = {g["thread"] for g in segs if g["kind"] == "device" and g["lane"] in streams}
    assert len(launched - {None}) == 2
    # Every thread named is one the step's dispatch chain groups calls under, or the
    # step's own (the tree's root has no thread node for it).
    tree_threads = {c["name"] for c in detail["tree"].get("children") or []
                    if c["kind"] == "thread"}
    main = m.lanes[int(m.lane[a.windows[1].row])].label
    assert {g["thread"] for g in segs} - {None} <= tree_threads | {main}
