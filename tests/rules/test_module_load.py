"""module-load: a kernel's first launch blocking the host, kept out of the launch figures."""

from __future__ import annotations

from tb_diagnostics.analysis.views.launch import launch_delays, module_loads
from tb_diagnostics.rules.launch_delay import RULE as LAUNCH_DELAY
from tb_diagnostics.rules.module_load import RULE


def load_in_step(b, step: int, call_us: float = 420_000.0, steps: int = 4) -> None:
    """``steps`` 1 ms steps of 4 gemm launches; in ``step`` the steps grow by the first
    launch of ``cudnn_kernel``, a ``call_us`` cudaLaunchKernel under aten::cudnn_convolution."""
    t = 0.0
    for s in range(1, steps + 1):
        wall = 1000.0 + (call_us + 100 if s == step else 0.0)
        b.step(s, t, wall - 1)
        if s == step:
            b.op("aten::cudnn_convolution", t + 5, call_us + 20)
            b.launch("cudnn_kernel", t + 10, t + call_us + 20, 50, api_dur=call_us)
            t += call_us + 100
        for k in range(4):
            ts = t + 10 + k * 170
            b.op("aten::mm", ts, 15)
            b.launch("gemm_kernel", ts + 5, ts + 12, 150)
        t += 1000.0


def test_a_first_launch_of_hundreds_of_ms_is_a_module_load(builder):
    load_in_step(builder, step=1)
    a = builder.analysis()
    ml = module_loads(a)
    assert len(ml) == 1 and ml.total_us == 420_000.0
    assert a.model.name_of(int(ml.acts[0])) == "cudnn_kernel"
    (f,) = RULE.run(a)
    # Step 1 is the cold step (421 ms against 1 ms): a one-time cost where it belongs.
    assert f.severity == "info" and f.steps == [1]
    assert f.message.startswith(
        "1 first launch(es) of a kernel block the host for 420.00 ms in all: 420.00 ms in "
        "cudaLaunchKernel for cudnn_kernel (from aten::cudnn_convolution) in step 1.")
    assert [e.name for e in f.evidence] == ["cudaLaunchKernel", "cudnn_kernel"]
    # Kept out of the launch figures.
    ld = launch_delays(a)
    assert ld.module_load.sum() == 1
    assert ld.launcher[ld.module_load][0] == ml.rows[0]


def test_in_a_warm_step_it_is_a_warning(builder):
    load_in_step(builder, step=3, steps=5)
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "warning" and f.steps == [3]
    assert "falls in a warm step, so the profile is not of the steady state" in f.message


def test_a_later_launch_of_a_loaded_kernel_is_not_a_load(builder):
    load_in_step(builder, step=2, call_us=150_000.0)
    # gemm_kernel ran in step 1: a long launch of it in step 3 is not its first.
    builder.step(5, 160_000.0, 200_000.0)
    builder.launch("gemm_kernel", 160_010.0, 310_100.0, 150, api_dur=150_000.0)
    builder.launch("cudnn_kernel", 320_000.0, 320_010.0, 50)
    a = builder.analysis()
    assert len(module_loads(a)) == 1  # only cudnn_kernel's first launch in step 2


def test_a_launch_blocked_by_a_full_queue_is_not_a_load(builder):
    builder.step(1, 0, 400_000)
    # 1024 launches queue behind a 300 ms kernel; the next launch waits for a slot.
    builder.launch("long_kernel", 1, 10, 300_000)
    for i in range(1024):
        builder.launch("small_kernel", 20 + i * 0.05, 300_010 + i, 1, api_dur=0.04)
    builder.launch("other_kernel", 100, 301_100, 5, api_dur=200_000)
    assert len(module_loads(builder.analysis())) == 0


def test_silent_on_normal_launches(builder):
    builder.steady_steps(4)
    a = builder.analysis()
    assert RULE.run(a) == [] and not launch_delays(a).module_load.any()


def test_launch_delay_leaves_the_load_out(builder):
    # Launches onto an idle device with a 303 µs latency, and a 420 ms first launch: the
    # latency finding counts the 15 latency launches only.
    for s in range(3):
        t0 = s * 10000
        builder.step(s + 1, t0, 9999)
        for k in range(5):
            ts = t0 + 100 + k * 1000
            builder.op("aten::relu", ts, 20)
            builder.launch("relu_kernel", ts + 2, ts + 310, 50)
    builder.step(4, 30000, 430_000)
    builder.launch("cudnn_kernel", 30_010, 450_020, 50, api_dur=420_000)
    f = next(f for f in LAUNCH_DELAY.run(builder.analysis()) if f.title == "Launch latency")
    assert "15 of 15 launches" in f.message


def test_shared_traces(shared):
    # AlexNet's first cuDNN launch blocks the host 3.06 s; no other shared trace has one
    # (the counter-mode trace's slow launches record no kernel: not first launches).
    (f,) = RULE.run(shared("hta_a100_alexnet_cuda_sync"))
    assert f.message.startswith("1 first launch(es) of a kernel block the host for 3.06 s "
                                "in all: 3.06 s in cudaLaunchKernel for "
                                "cask_cudnn::computeOffsetsKernel (from "
                                "aten::cudnn_convolution)")
    assert len(module_loads(shared("hta_a100_cupti_counters"))) == 0
    assert len(module_loads(shared("hta_2022_v100_rank1_of2"))) == 0
