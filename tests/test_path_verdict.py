"""The verdict sentence cites the critical path (issue 27 item 3): the warm steps' paths
summed by kind (``verdict_split[].critical_path``, ``analysis.path_clause``), the main
kind, the op most of it is in and the label around it, in the headline."""

from __future__ import annotations

import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.path_clause import path_clause, verdict_paths
from tb_diagnostics.engine import open_analysis
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.document import span_document
from tb_diagnostics.report.headline import headline
from tb_diagnostics.report.html import render_html
from tb_diagnostics.report.text import render_markdown, render_text


def _document(b: TraceBuilder, root) -> dict:
    b.write()
    f = scan_logdir(str(root)).runs[0].files[0]
    return span_document(f, open_analysis(f))


def _dispatch_steps(b: TraceBuilder, n: int = 3) -> None:
    """Host-bound steps of 1 ms: inside ``forward`` (5-905), 20 ``aten::add_`` of 30 µs
    every 40 µs, each launching a 3 µs kernel 2 µs after its launch."""
    for s in range(n):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation("forward", t0 + 5, 900)
        for i in range(20):
            b.op("aten::add_", t0 + 10 + i * 40, 30)
            b.launch("add_kernel", t0 + 30 + i * 40, t0 + 32 + i * 40, 3)


def test_a_host_bound_span_says_the_op_its_steps_wait_on(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    _dispatch_steps(b)
    doc = _document(b, tmp_path / "log")
    (split,) = doc["verdict_split"]
    cp = split["critical_path"]
    # The kernels never hold the host up: every step's path is its host time, 2,999 µs
    # in all, most of it the adds' dispatch (each op from its start to its launch call).
    assert cp["by_kind"] == {"host": 2999.0, "input": 0.0, "device": 0.0, "comm": 0.0,
                             "latency": 0.0}
    assert cp["total_us"] == 2999.0 and cp["main_kind"] == "host" and cp["main_share"] == 1.0
    total_add = sum(o["us"] for s in doc["steps"] for o in s["critical_path"]["by_op"]
                    if o["op"] == "aten::add_" and o["kind"] == "host")
    assert cp["top"] == {"name": "aten::add_", "what": "op", "kind": "host",
                         "us": pytest.approx(total_add), "segments": 117,
                         "inside": "forward"}
    clause = ("each step's end waits on the host for 100% of its time, mostly in "
              "`aten::add_` dispatch inside `forward`")
    assert headline(doc) == (
        "Steps 1–3 are overhead-bound: the GPU is busy 6% of each step and idle 94%, mostly "
        "while the CPU launches work (89% of the idle time; 20 ops per step); " + clause + ".")
    report = {"logdir": "log", "notes": [], "runs": [{"run": "run", "workers": [
        {"worker": "w", "spans": [doc]}]}]}
    assert f"verdict: {headline(doc)}" in render_text(report)
    # The names quoted in backticks render as code in Markdown (report.text.md_prose).
    assert "mostly in `aten::add_` dispatch inside `forward`" in render_markdown(report)
    assert "mostly in `aten::add_` dispatch inside `forward`" in render_html(report)


def test_a_device_bound_step_names_the_op_whose_kernels_it_waits_on(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 20)
    b.launch("gemm", 20, 30, 900)  # 30-930: the device ends the step's work
    b.op("aten::relu", 40, 10)
    b.launch("relu_kernel", 45, 931, 60)  # 931-991, queued behind the GEMM
    b.runtime("cudaDeviceSynchronize", 60, 935)
    doc = _document(b, tmp_path / "log")
    cp = doc["verdict_split"][0]["critical_path"]
    assert cp["main_kind"] == "device"
    assert cp["by_kind"]["device"] == pytest.approx(960.0)
    # No op or label above aten::mm but the step: nothing to say it is inside.
    assert cp["top"]["name"] == "aten::mm" and cp["top"]["what"] == "op"
    assert cp["top"]["us"] == pytest.approx(900.0) and cp["top"]["inside"] is None
    assert headline(doc).endswith(
        "; the step's end waits on the device for 96% of its time, mostly in `aten::mm`'s "
        "kernels.")


def test_the_largest_part_is_said_with_its_share_when_it_is_not_most(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    # Three ops of 300 µs, 20 µs apart, each launching a 2 µs kernel 10 µs before its end:
    # each op's dispatch up to its launch is on the path (290 µs), the rest the step's
    # (130 µs). The ops tie: the one the trace names first is said.
    for i, name in enumerate(("aten::add", "aten::mul", "aten::div")):
        t = 10 + i * 320
        b.op(name, t, 300)
        b.launch("k", t + 290, t + 292, 2)
    a = b.analysis()
    c = path_clause(a, [0])
    assert c.main_kind == "host" and c.top is not None and c.top.name == "aten::add"
    assert c.top.us == pytest.approx(290.0) and c.top.inside is None
    span = {"steps": [{"step": 1}], "verdict_split": [
        {"verdict": "overhead-bound", "steps": [1], "critical_path": c.to_dict()}]}
    from tb_diagnostics.report.headline import _path_text

    assert _path_text(span, "overhead-bound", span["steps"], [1], "step") == (
        "the step's end waits on the host for 100% of its time, the largest part in "
        "`aten::add` dispatch (29% of it)")
    # For other steps than the verdict's (an older document, a verdict of none warm),
    # nothing is said.
    assert _path_text(span, "overhead-bound", [{"step": 2}], [2], "step") == ""


def test_each_verdict_gets_the_paths_of_its_own_warm_steps(tmp_path):
    b = TraceBuilder(tmp_path)
    _dispatch_steps(b, n=2)
    b.step(3, 2000, 1000)  # a device-bound step: one long kernel the host waits for
    b.op("aten::mm", 2010, 20)
    b.launch("gemm", 2020, 2030, 950)
    b.runtime("cudaDeviceSynchronize", 2040, 945)
    a = b.analysis()
    paths = verdict_paths(a)
    verdicts = [w.verdict for w in a.windows]
    assert verdicts == ["overhead-bound", "overhead-bound", "compute-bound"]
    assert [p.windows for p in paths] == [(0, 1), (2,)]
    assert [p.main_kind for p in paths] == ["host", "device"]
