"""Communication is its own time: collective kernels keep the device busy but are not
compute, and the verdict reads compute (issue 23, item 1). Exact figures on hand-made traces."""

from __future__ import annotations

import pytest

from conftest import TraceBuilder, analyse
from tb_diagnostics.analysis.verdict import cause_times, main_idle_cause
from tb_diagnostics.analysis.views.comm import step_comm
from tb_diagnostics.report.document import step_document

NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
NCCL_ALLTOALL = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
#: RCCL (ROCm) keeps NCCL's kernel names.
RCCL_ALLREDUCE = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"


def _idle(w) -> dict[str, float]:
    return {k: v for k, v in w.idle.items() if v}


def test_a_collective_kernel_that_waits_is_busy_but_not_compute(trace, tmp_path):
    # The shape of ../shared/spec D_exposed_comm, built here so it runs without ../shared.
    trace.step(1, 0, 1000)
    trace.op("aten::mm", 10, 20)
    trace.launch(15, 4, "ampere_sgemm_128x64_tn", 20, 300)
    trace.op("record_param_comms", 40, 20)
    trace.x("user_annotation", "nccl:all_reduce", 41, 18)
    trace.launch(45, 4, NCCL_ALLREDUCE, 50, 900, stream=20)
    a = analyse(trace, tmp_path)
    (w,) = a.windows
    assert (w.device_busy_us, w.compute_busy_us, w.exposed_collective_us) == (930, 300, 630)
    assert (w.device_busy, w.compute_busy) == (pytest.approx(0.93), pytest.approx(0.3))
    # The idle causes are the device's idle time, as before: [0, 10) and [950, 1000) are
    # other, [10, 20) is inside aten::mm.
    assert _idle(w) == {"launch": 10, "other": 60}
    assert (w.main_idle_cause, w.verdict) == ("comm", "communication-bound")
    # The same exposed time the exposed-communication figures use.
    assert step_comm(a).exposed_us[0] == pytest.approx(630)


def test_step_json_splits_the_wall_into_compute_exposed_collectives_and_idle(trace, tmp_path):
    trace.step(1, 0, 1000)
    trace.launch(15, 4, "gemm", 20, 300)
    trace.launch(45, 4, NCCL_ALLREDUCE, 50, 900, stream=20)
    (w,) = analyse(trace, tmp_path).windows
    s = step_document(w)
    assert (s["device_busy_us"], s["device_busy"]) == (930, 0.93)
    assert (s["compute_busy_us"], s["compute_busy"], s["exposed_collective_us"]) == (300, 0.3, 630)
    assert s["compute_busy_us"] + s["exposed_collective_us"] + sum(s["idle"].values()) == 1000


@pytest.mark.parametrize("kernel", [
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16>(...)",
    "void c10d::symmetric_memory::two_shot_all_reduce_kernel<float, 4>(...)",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)",
])
def test_symmetric_memory_and_custom_all_reduce_kernels_are_not_compute(trace, tmp_path, kernel):
    # The same one definition as the roofline's collectives (analysis/cost/collectives.py).
    from tb_diagnostics.analysis.cost.collectives import is_collective

    trace.step(1, 0, 1000)
    trace.launch(15, 4, "gemm", 20, 300)
    trace.launch(45, 4, kernel, 50, 900, stream=20)
    (w,) = analyse(trace, tmp_path).windows
    assert (w.device_busy_us, w.compute_busy_us, w.exposed_collective_us) == (930, 300, 630)
    assert w.verdict == "communication-bound"
    assert is_collective(kernel)


def test_a_collective_hidden_by_compute_is_compute_bound(trace, tmp_path):
    trace.step(1, 0, 1000)
    trace.launch(5, 4, "gemm", 20, 900)
    trace.launch(10, 4, NCCL_ALLREDUCE, 100, 500, stream=20)  # inside the gemm
    (w,) = analyse(trace, tmp_path).windows
    assert (w.device_busy_us, w.compute_busy_us, w.exposed_collective_us) == (900, 900, 0)
    assert w.verdict == "compute-bound"


def test_rccl_rank_whose_steps_are_mostly_collectives_is_communication_bound(tmp_path):
    # Issue 23: a rank of an 8-GPU AMD node, steps of 49, 19 and 18.5 ms of which 32, 11.9
    # and 11.4 ms are collective kernels no compute overlaps; 95-100 % "busy".
    b = TraceBuilder(device_properties=[{"id": 0, "name": "AMD Instinct MI250X",
                                         "gcnArchName": "gfx90a"}])
    b.top["distributedInfo"] = {"backend": "nccl", "rank": 3, "world_size": 8}
    t0 = 0.0
    for n, (wall, compute, alone) in enumerate([(49_000, 15_000, 32_000),
                                                (19_000, 6_000, 11_900),
                                                (18_500, 6_000, 11_400)]):
        b.step(n, t0, wall)
        b.op("aten::mm", t0 + 100, 400)  # [100, 500): the device waits for it (launch)
        b.launch(t0 + 400, 10, "Cijk_Ailk_Bljk_SB_MT64x64x16", t0 + 500, compute,
                 runtime="hipLaunchKernel")
        b.op("record_param_comms", t0 + 600, 50)
        b.launch(t0 + 610, 10, RCCL_ALLREDUCE, t0 + 500 + compute, alone, stream=20,
                 runtime="hipExtLaunchKernel")
        t0 += wall
    windows = analyse(b, tmp_path).windows
    got = [(w.wall_us, w.compute_busy_us, w.exposed_collective_us, w.verdict,
            w.main_idle_cause) for w in windows]
    assert got == [(49_000, 15_000, 32_000, "communication-bound", "comm"),
                   (19_000, 6_000, 11_900, "communication-bound", "comm"),
                   (18_500, 6_000, 11_400, "communication-bound", "comm")]
    # What the old verdict read, "compute-bound at 95-100 % busy", is still device_busy.
    assert [round(w.device_busy, 3) for w in windows] == [0.959, 0.942, 0.941]
    assert [_idle(w) for w in windows] == [{"launch": 400, "other": 1600},
                                           {"launch": 400, "other": 700},
                                           {"launch": 400, "other": 700}]


def test_a_rank_waiting_in_all_to_all_is_communication_bound_not_mixed(trace, tmp_path):
    # Issue 23: rank 1 of an 8-rank V100 job; compute kernels are 1.3 ms of a 19.9 ms step,
    # a 7.6 ms all_to_all waits for rank 7; device busy 62 %, once called "mixed".
    trace.step(1, 0, 19_900)
    trace.op("aten::mm", 200, 800)  # device idle [200, 1000) while it launches: launch 800
    trace.launch(300, 10, "volta_sgemm_128x64_nn", 1000, 800)
    trace.op("aten::add", 1000, 100)
    trace.launch(1010, 10, "elementwise_kernel", 1800, 500)
    # The host is in the collective [2000, 2600); the device idles [2300, 2500) of it
    # (comm, 200) and then runs the all_to_all, which is not idle time at all.
    trace.op("c10d::alltoall_", 2000, 600)
    trace.launch(2050, 10, NCCL_ALLTOALL, 2500, 7600, stream=20)
    trace.op("aten::cat", 10_100, 2950)  # launch 2950
    trace.op("c10d::allreduce_", 13_050, 100)  # comm 100
    trace.launch(13_100, 10, NCCL_ALLREDUCE, 13_200, 3440, stream=20)
    trace.op("aten::zeros", 16_640, 100)  # launch 100; then nothing until 19 900
    a = analyse(trace, tmp_path)
    (w,) = a.windows
    assert (w.device_busy_us, w.compute_busy_us, w.exposed_collective_us) == (12_340, 1300,
                                                                              11_040)
    assert round(w.device_busy, 2) == 0.62 and round(w.compute_busy, 4) == 0.0653
    assert _idle(w) == {"comm": 300, "launch": 3850, "other": 3410}
    # comm = the host's waits while the device idled (300) + collective kernels alone
    # (11 040): disjoint in time, so 11 340 of the 18 600 µs that are not compute.
    assert cause_times(w.idle, w.exposed_collective_us)["comm"] == 11_340
    assert (w.main_idle_cause, w.verdict) == ("comm", "communication-bound")
    sc = step_comm(a)
    assert (sc.comm_us[0], sc.exposed_us[0]) == (11_040, 11_040)


def test_host_waits_and_exposed_collectives_add_up_to_the_comm_cause():
    idle = {"input": 0.0, "sync": 0.0, "comm": 300.0, "launch": 500.0, "other": 100.0,
            "profiler": 900.0}
    assert main_idle_cause(idle) == "launch"  # neither part alone outweighs launch
    assert main_idle_cause(idle, exposed_collective=300.0) == "comm"  # 600 > 500
    # The profiler's own time is never a cause, however large.
    assert cause_times(idle, 300.0) == {"input": 0, "sync": 0, "comm": 600, "launch": 500,
                                        "other": 100}


def test_cpu_only_compute_is_the_heavy_op_time_and_gloo_waits_are_idle(cpu_trace, tmp_path):
    cpu_trace.step(1, 0, 10_000)
    cpu_trace.op("aten::mm", 100, 1000)  # heavy self time: compute on a CPU trace
    cpu_trace.op("c10d::allreduce_", 1200, 8000)  # a collective's self time is waiting
    (w,) = analyse(cpu_trace, tmp_path).windows
    assert (w.device_busy_us, w.compute_busy_us, w.exposed_collective_us) == (1000, 1000, 0)
    assert w.idle["comm"] == 8000
    assert (w.main_idle_cause, w.verdict) == ("comm", "communication-bound")


def test_what_a_collective_op_launches_is_communication_for_the_step_and_the_roofline(
        trace, tmp_path):
    """One definition: a flatten copy inside ``c10d::allgather_`` is communication for the
    step's compute busy, its exposed collectives and the roofline alike (issue 23, item 7)."""
    from tb_diagnostics.analysis.views.roofline import compute_busy_us

    trace.step(1, 0, 1000)
    trace.op("aten::mm", 10, 20)
    trace.launch(15, 4, "ampere_sgemm_128x64_tn", 20, 300)
    trace.op("c10d::allgather_", 40, 30)
    trace.launch(45, 4, "Memcpy DtoD (Device -> Device)", 400, 100, runtime="cudaMemcpyAsync",
                 cat="gpu_memcpy")
    trace.launch(55, 4, NCCL_ALLREDUCE, 500, 200, stream=20)
    a = analyse(trace, tmp_path)
    (w,) = a.windows
    # Device busy [20, 320) ∪ [400, 700): 600; compute is the GEMM alone.
    assert (w.device_busy_us, w.compute_busy_us, w.exposed_collective_us) == (600, 300, 300)
    assert compute_busy_us(a).tolist() == [300]
    assert a.comm_kernel_rows.size == 2
    # The copy launched outside a collective op stays compute.
    trace2 = TraceBuilder()
    trace2.step(1, 0, 1000)
    trace2.op("aten::copy_", 40, 30)
    trace2.launch(45, 4, "Memcpy DtoD (Device -> Device)", 400, 100, runtime="cudaMemcpyAsync",
                  cat="gpu_memcpy")
    (w2,) = analyse(trace2, tmp_path / "2").windows
    assert (w2.device_busy_us, w2.compute_busy_us) == (100, 100)
