"""exposed-communication: comm not hidden by compute, on a GPU (NCCL kernels) and a CPU (gloo)."""

from __future__ import annotations

import pytest

from tb_diagnostics.analysis.views.comm import step_comm
from tb_diagnostics.rules.exposed_communication import RULE

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _gpu_step(b, n: int, t0: float, comm_start: float) -> None:
    """Compute [t0+100, t0+400); an all-reduce kernel [t0+comm_start, t0+900)."""
    b.step(n, t0, 1000)
    b.launch("gemm_kernel", t0 + 10, t0 + 100, 300)
    b.op("record_param_comms", t0 + 20, 10)
    b.launch(NCCL, t0 + 22, t0 + comm_start, 900 - comm_start)


def test_gpu_exposed_is_comm_kernel_time_outside_compute(builder):
    for n in range(3):
        _gpu_step(builder, n, n * 1000, 300)
    a = builder.analysis()
    sc = step_comm(a)
    assert sc.comm_us[0] == pytest.approx(600) and sc.exposed_us[0] == pytest.approx(500)
    assert sc.overlap(0) == pytest.approx(100 / 600)
    # NCCL kernels stay device activity: the device is busy 100..900.
    assert a.windows[0].device_busy_us == pytest.approx(800)
    (f,) = RULE.run(a)
    # How much overlap would hide depends on the other ranks: no replayed saving.
    assert f.steps == [0, 1, 2] and f.savings_us is None and "No saving is given" in f.message
    assert "50%" in f.message and "overlap 17%" in f.message
    assert f.evidence[0].name.startswith("ncclDevKernel_AllReduce")


def test_gpu_hidden_comm_does_not_fire(builder):
    for n in range(3):
        builder.step(n, n * 1000, 1000)
        builder.launch("gemm_kernel", n * 1000 + 10, n * 1000 + 100, 800)
        builder.launch(NCCL, n * 1000 + 20, n * 1000 + 200, 600)  # inside the gemm
    a = builder.analysis()
    assert step_comm(a).exposed_us[0] == pytest.approx(0)
    assert RULE.run(a) == []


def test_cpu_gloo_wait_on_another_thread(make_builder):
    b = make_builder(device_properties=[])
    for n in range(2):
        t0 = n * 10_000
        b.step(n, t0, 10_000)
        b.op("aten::mm", t0 + 100, 1000)  # heavy: compute on a CPU trace
        b.op("c10d::allreduce_", t0 + 1200, 100)
        b.annotation("gloo:all_reduce", t0 + 1250, 6000, tid=200)
    (f,) = RULE.run(b.analysis())
    assert f.savings_us is None  # the wait is the other ranks': no honest estimate
    assert "host time blocked in collectives" in f.message
