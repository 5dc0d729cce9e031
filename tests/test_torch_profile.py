"""A CPU trace written by torch.profiler itself (the format users actually produce) loads."""

from __future__ import annotations

import multiprocessing

import pytest

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir

torch = pytest.importorskip("torch")


def profile_matmul_add(logdir, size: int, steps: int = 4) -> None:
    from torch.profiler import (
        ProfilerActivity,
        profile,
        record_function,
        schedule,
        tensorboard_trace_handler,
    )

    x, w, b = torch.randn(size, size), torch.randn(size, size), torch.randn(size)
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(logdir / f"mm{size}"),
                                                          worker_name="worker0"),
                 record_shapes=True) as prof:
        for _ in range(steps + 1):
            with record_function("matmul_add"):
                for _ in range(20):
                    torch.add(torch.matmul(x, w), b)
            prof.step()


def _profile_in_a_fresh_process(logdir) -> None:
    torch.set_num_threads(1)
    profile_matmul_add(logdir, 16, steps=6)
    profile_matmul_add(logdir, 1024, steps=3)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Profiled in a child process: threads other tests leave running in this one (the tab's
    background loaders) would hold the GIL while tiny ops wait for it, and a 2 µs op would
    look like 50 µs of work."""
    logdir = tmp_path_factory.mktemp("torchlog")
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_profile_in_a_fresh_process, args=(logdir,))
    proc.start()
    proc.join(timeout=300)
    assert proc.exitcode == 0
    return build_document(scan_logdir(str(logdir)))


def steps_of(report, run):
    (r,) = [r for r in report["runs"] if r["run"] == run]
    (span,) = r["workers"][0]["spans"]
    assert span["errors"] == []
    assert span["device"] == {"kind": "cpu", "name": None}
    return span["steps"]


def test_small_matmul_loop_is_overhead_bound(report):
    # 16 × 16: a matmul of ~1 µs, so even an op preempted on a loaded machine rarely
    # reaches the 50 µs heavy line.
    steps = steps_of(report, "mm16")
    assert len(steps) == 6 and all(s["step"] is not None for s in steps)
    assert all(s["ops"] >= 40 for s in steps)
    # A 10 µs op preempted on a loaded machine can look heavy once; the verdict may not.
    overhead = [s for s in steps if s["verdict"] == "overhead-bound"]
    assert len(overhead) >= 4, [(s["verdict"], s["device_busy"]) for s in steps]
    assert sorted(s["device_busy"] for s in steps)[2] < 0.5


def test_large_matmul_loop_is_compute_bound(report):
    steps = steps_of(report, "mm1024")
    assert len(steps) == 3
    for s in steps:
        assert s["device_busy"] >= 0.8, s
        assert s["verdict"] == "compute-bound"
