"""Distributed runs: the comm idle cause, the per-span ``distributed`` section, the run-level
ranks table and findings, the /run route, and the executor switch."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from conftest import SHARED_TRACES, TraceBuilder
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.engine import build_document
from tb_diagnostics.executors import ExecutorError, open_executor
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.server import DataProvider
from tb_diagnostics.trace import load_trace

REPO = Path(__file__).resolve().parents[1]
STRAGGLER = REPO / "log" / "distributed-ws2-straggler1-cpu"


def _gloo_rank(rank: int, late_us: float) -> TraceBuilder:
    """A gloo-like CPU trace: 2 steps of 10 ms; the training thread waits in an all-reduce
    that gloo runs on its own thread; ``late_us`` of extra work before it."""
    b = TraceBuilder(device_properties=[])
    b.top["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
    for n in range(2):
        t0 = n * 10_000
        b.step(n, t0, 10_000)
        b.op("aten::mm", t0 + 100, 1000)  # heavy self time: compute on a CPU trace
        if late_us:
            b.x("user_annotation", "slow_rank_work", t0 + 1100, late_us)
        c = t0 + 1200 + late_us
        b.x("user_annotation", "all_reduce_grads", c, 8700 - late_us)
        b.op("c10d::allreduce_", c + 10, 100)
        b.x("user_annotation", "gloo:all_reduce", c + 20, 8000 - late_us, tid=2)
    return b


def test_comm_idle_cause_takes_the_wait_from_launch(tmp_path):
    path = _gloo_rank(0, 0).write(tmp_path / "r" / "rank0.1.pt.trace.json")
    w = SpanAnalysis(load_trace(str(path))).windows[0]
    # [1210, 9220) is in a collective (c10d on the main thread, gloo on its own): comm,
    # not launch, even though all_reduce_grads (a label) and the op cover it too.
    assert w.idle["comm"] == pytest.approx(8010)
    assert w.device_busy_us == pytest.approx(1000)
    assert w.idle["launch"] == pytest.approx(10_000 - 1000 - 8010 - w.idle["other"])
    assert w.verdict == "communication-bound" and w.main_idle_cause == "comm"


def test_span_document_distributed_section_and_run_findings(tmp_path):
    _gloo_rank(0, 0).write(tmp_path / "r" / "rank0.1.pt.trace.json")
    _gloo_rank(1, 4000).write(tmp_path / "r" / "rank1.1.pt.trace.json")
    doc = build_document(scan_logdir(str(tmp_path)))
    (run,) = doc["runs"]
    d0 = run["workers"][0]["spans"][0]["distributed"]
    assert (d0["rank"], d0["world_size"], d0["backend"]) == (0, 2, "gloo")
    s = d0["steps"][0]
    assert s["pre_comm_us"] == pytest.approx(1210)
    assert s["collectives"][0]["name"] == "c10d::allreduce_"
    step = run["workers"][0]["spans"][0]["steps"][0]
    assert step["comm_us"] == pytest.approx(8010) and step["exposed_comm_us"] == step["comm_us"]
    assert step["overlap"] == 0 and step["idle"]["comm_us"] == pytest.approx(8010)
    assert [r["rank"] for r in run["ranks"]] == [0, 1]
    assert [c["step"] for c in run["ranks"][1]["steps"]] == [0, 1]
    (late,) = [f for f in run["findings"] if f["rule"] == "distributed-straggler"]
    assert late["ranks"] == [1] and "slow_rank_work" in late["message"]


def test_rank_from_file_name_without_distributed_info(tmp_path):
    b = _gloo_rank(0, 0)
    del b.top["distributedInfo"]
    b.write(tmp_path / "r" / "sampled_rank-7.pt.trace.json")
    doc = build_document(scan_logdir(str(tmp_path)))
    d = doc["runs"][0]["workers"][0]["spans"][0]["distributed"]
    assert d["rank"] == 7 and d["world_size"] is None


def test_non_distributed_span_has_no_section(tmp_path, cpu_trace):
    cpu_trace.step(1, 0, 100)
    cpu_trace.op("aten::add", 10, 20)
    cpu_trace.write(tmp_path / "r" / "worker0.1.pt.trace.json")
    doc = build_document(scan_logdir(str(tmp_path)))
    assert doc["runs"][0]["workers"][0]["spans"][0]["distributed"] is None
    assert doc["runs"][0]["ranks"] == [] and doc["runs"][0]["findings"] == []


def test_straggler_sample_rank0_waits_in_gloo():
    doc = build_document(scan_logdir(str(STRAGGLER.parent)), run=STRAGGLER.name)
    rank0 = doc["runs"][0]["workers"][0]["spans"][0]
    assert rank0["verdict"] == "communication-bound"
    assert all(s["idle"]["comm_us"] > 30_000 for s in rank0["steps"])


@pytest.mark.skipif(not (SHARED_TRACES / "hta_sampled_2ranks_of128").is_dir(),
                    reason="../shared/traces absent")
def test_shared_two_nccl_ranks():
    doc = build_document(scan_logdir(str(SHARED_TRACES)), run="hta_sampled_2ranks_of128")
    ranks = doc["runs"][0]["ranks"]
    assert [(r["rank"], r["world_size"], r["backend"]) for r in ranks] == [
        (0, 128, "nccl"), (1, 128, "nccl")]
    assert [[c["step"] for c in r["steps"]] for r in ranks] == [[551, 552], [551, 552]]
    for r in ranks:
        for c in r["steps"]:
            # NCCL kernels: large, partly hidden by compute kernels on the same GPU.
            assert 0 < c["exposed_comm_us"] < c["comm_us"] < c["wall_us"]
            assert 0 < c["overlap"] < 1


def test_run_route(tmp_path):
    shutil.copytree(STRAGGLER, tmp_path / "dist")
    p = DataProvider(str(tmp_path))
    deadline = time.monotonic() + 60
    while True:
        code, res = p.run("dist")
        if code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    p.shutdown()
    assert code == 200 and res["status"] == "ready"
    assert [r["worker"] for r in res["ranks"]] == ["rank0", "rank1"]
    assert any(f["rule"] == "distributed-straggler" and f["ranks"] == [1]
               for f in res["findings"])


def test_run_route_errors(tmp_path):
    shutil.copytree(STRAGGLER, tmp_path / "dist")
    p = DataProvider(str(tmp_path))
    from tb_diagnostics.server.provider import BadRequest, NotFound
    with pytest.raises(BadRequest):
        p.run(None)
    with pytest.raises(NotFound):
        p.run("nope")
    p.shutdown()


def test_executor_specs(monkeypatch):
    with open_executor("local") as ex:
        assert ex is None
    monkeypatch.setenv("TB_DIAGNOSTICS_EXECUTOR", "local")
    with open_executor(None) as ex:
        assert ex is None
    with pytest.raises(ExecutorError, match="unknown executor"), open_executor("ray://x"):
        pass
