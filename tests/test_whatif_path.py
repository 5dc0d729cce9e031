"""What-if cards name the critical-path segments their change shortens (issue 27 item 3):
``whatif[].path_segments`` and the reports' "on the critical path" line, on hand-made
traces, and on the shared trace whose cards once spoke for the profiler's empty stub."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import SHARED_TRACES, TraceBuilder

from tb_diagnostics.analysis.critpath import KIND_NAMES, critical_paths
from tb_diagnostics.analysis.replay.engine import Change, replay
from tb_diagnostics.analysis.views.whatif_path import path_cut
from tb_diagnostics.engine import open_analysis
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.document import span_document
from tb_diagnostics.report.html import render_html
from tb_diagnostics.report.text import render_text
from tb_diagnostics.report.whatif import path_line, whatif_lines

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _document(root) -> dict:
    f = scan_logdir(str(root)).runs[0].files[0]
    return span_document(f, open_analysis(f))


def _card(doc: dict, card: str) -> dict:
    (w,) = [w for w in doc["whatif"] if w["id"] == card]
    return w


def test_the_input_card_shortens_the_dataloader_segments(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    for s in range(4):  # host-bound steps: a 400 µs DataLoader wait, then one launch
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation(LOADER, t0 + 10, 400)
        b.op("aten::mm", t0 + 420, 20)
        b.launch("gemm", t0 + 425, t0 + 440, 100)
    b.write()
    doc = _document(tmp_path / "log")
    w = _card(doc, "input")
    ps = w["path_segments"]
    # Each warm step's path holds the whole 400 µs wait, and the change takes all of it.
    inputs = [s["critical_path"]["by_kind"]["input"] for s in doc["steps"]
              if s["step"] in w["steps"]]
    assert inputs == [400.0] * len(w["steps"])
    assert ps["shortened_us"] == 400.0 == w["saves_us"]
    assert ps["by_kind"] == {"host": 0.0, "input": 400.0, "device": 0.0, "comm": 0.0,
                             "latency": 0.0}
    assert ps["share"] == pytest.approx(400.0 / ps["path_us"])
    assert ps["freed_us"] == 0.0 and ps["saving_off_path_us"] == 0.0
    assert [(t["name"], t["kind"], t["us"]) for t in ps["top"]] == [(LOADER, "input", 400.0)]
    line = path_line(w)
    assert line == (f"on the critical path: shortens its DataLoader time by 400 µs per step "
                    f"({100 * ps['share']:.0f}% of the path), most in `{LOADER}` (input) 400 µs")
    # Under its card's line in the reports.
    lines = whatif_lines(doc)
    assert lines[lines.index(next(x for x in lines if x.startswith("input:"))) + 1] == \
        f"  {line}"
    report = {"logdir": "log", "notes": [], "runs": [{"run": "run", "workers": [
        {"worker": "w", "spans": [doc]}]}]}
    assert f"        {line}" in render_text(report).splitlines()
    assert "on the critical path: shortens its DataLoader time by 400 µs per step" in \
        render_html(report)


def test_a_change_of_work_the_step_does_not_wait_on_shortens_nothing(tmp_path):
    b = TraceBuilder(tmp_path)
    for s in range(3):  # the host ends every step; its kernels run beside it
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        for i in range(20):
            b.op("aten::add_", t0 + 10 + i * 40, 30)
            b.launch("add_kernel", t0 + 30 + i * 40, t0 + 32 + i * 40, 3)
    a = b.analysis()
    n_act = a.model.device_activity_rows.size
    faster = Change(device_scale=np.full(n_act, 0.5))  # every kernel twice as fast
    cut = path_cut(a, faster, [0, 1, 2])
    cp = critical_paths(a)
    assert cp.by_kind[:, KIND_NAMES.index("device")].sum() == 0.0
    assert cut.cut_us == 0.0 and cut.freed_us == 0.0 and cut.top == ()
    # And the replay agrees: nothing the steps' ends wait on changed, nothing is saved.
    before = np.asarray([w.wall_us for w in a.windows])
    assert replay(a, faster).wall_us == pytest.approx(before)
    card = {"saves_us": 0.0, "steps": [1, 2, 3],
            "path_segments": cut.to_dict(before - replay(a, faster).wall_us)}
    assert path_line(card) == "on the critical path: shortens nothing the step's end waits on"


def test_a_freed_sync_frees_the_device_work_the_host_waited_through(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    for s in range(3):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm", t0 + 12, t0 + 30, 800)
        b.runtime("cudaDeviceSynchronize", t0 + 40, 795)  # waits for the GEMM (ends 830)
        b.op("aten::add", t0 + 850, 20)
        b.launch("add_kernel", t0 + 852, t0 + 870, 10)
        b.op("aten::relu", t0 + 900, 1000)  # host work the sync holds back
    b.write()
    doc = _document(tmp_path / "log")
    w = _card(doc, "syncs")
    ps = w["path_segments"]
    # The path runs through the GEMM while the host waits (40 → 830): 790 µs the host no
    # longer waits through; no segment itself gets shorter. The replay saves the same.
    assert ps["shortened_us"] == 0.0 and ps["top"] == []
    assert ps["freed_us"] == 790.0
    assert [(t["name"], t["kind"]) for t in ps["freed_top"]] == [("aten::mm", "device")]
    assert w["saves_us"] == pytest.approx(790.0, abs=1.0)
    assert ps["saving_off_path_us"] == pytest.approx(0.0, abs=1.0)
    assert path_line(w) == (
        "on the critical path: shortens none of its segments; the host no longer waits "
        "through 790 µs per step of its device work (most in `aten::mm`), which still runs")


def test_a_saving_not_on_the_steps_path_is_said_to_come_from_its_window():
    """A card whose saving its steps' paths do not hold (``saving_off_path_us``: the
    step's window moves with the steps around it) says so under the card."""
    w = {"steps": [2], "saves_us": 49.073,
         "path_segments": {"shortened_us": 0.0, "freed_us": 0.0, "by_kind": {}, "top": [],
                           "saving_off_path_us": 49.073}}
    assert path_line(w) == (
        "on the critical path: shortens nothing the step's end waits on; the 49 µs per step "
        "it saves here are not on it: the step's window moves with the steps around it")


@pytest.mark.shared
def test_no_card_speaks_for_the_profilers_trailing_stub():
    """``hta_amd_mi250_rocm_tiny``: step 2 is a 49 µs stub the profiler's last step()
    opened (no op, no kernel; issue 29). The cards once saved "all of warm step 2's 49 µs",
    time its path did not hold; they speak for step 1, the one step that ran, and what they
    save is on its path."""
    root = SHARED_TRACES / "hta_amd_mi250_rocm_tiny"
    if not root.is_dir():
        pytest.skip("../shared/traces is not present")
    doc = _document(root)
    step1, step2 = doc["steps"]
    assert (step1["cold"], step1["stub"], step2["stub"]) == (False, False, True)
    w = _card(doc, "graphs")
    assert w["steps"] == [1] and w["saves_us"] > 0.05 * step1["wall_us"]
    ps = w["path_segments"]
    assert ps["shortened_us"] > 0 and ps["saving_off_path_us"] == pytest.approx(0.0, abs=1.0)
    assert all(c["steps"] == [1] for c in doc["whatif"])


def test_path_segments_taken_a_few_at_a_time_give_the_same_cards(tmp_path, monkeypatch):
    """``segment_cuts`` takes a span's segments in chunks (a million steps' segments at
    once cost gigabytes of temporaries): each segment's cut is its own, so chunks of one
    segment give the cards, and every figure on them, of one chunk for all."""
    import tb_diagnostics.analysis.views.whatif_path as whatif_path

    b = TraceBuilder(tmp_path / "log" / "run")
    for s in range(6):  # a DataLoader wait, a sync on a GEMM, host work it holds back
        t0 = s * 3000
        b.step(s + 1, t0, 2999)
        b.annotation(LOADER, t0 + 10, 300)
        b.op("aten::mm", t0 + 320, 20)
        b.launch("gemm", t0 + 322, t0 + 340, 800 + 50 * s)
        b.runtime("cudaDeviceSynchronize", t0 + 350, 850 + 50 * s)
        for i in range(5):
            b.op("aten::add_", t0 + 1500 + i * 40, 30)
            b.launch("add_kernel", t0 + 1510 + i * 40, t0 + 1530 + i * 40, 25)
    b.write()
    whole = _document(tmp_path / "log")["whatif"]
    assert {"input", "syncs"} <= {w["id"] for w in whole}
    assert any(w["path_segments"]["shortened_us"] > 0 for w in whole)
    assert any(w["path_segments"]["freed_us"] > 0 for w in whole)
    monkeypatch.setattr(whatif_path, "SEGMENT_CHUNK", 1)
    assert _document(tmp_path / "log")["whatif"] == whole
