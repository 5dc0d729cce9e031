"""low-flop-utilisation: compute-bound steps whose priced kernels are far from the roofline."""

from __future__ import annotations

import pytest

from tb_diagnostics.rules.low_flop_utilisation import RULE

BF16 = ["c10::BFloat16", "c10::BFloat16"]
# H100 SXM (the shipped table): bf16 989.4 TFLOP/s dense, 3350 GB/s.
N = 4096
FLOPS = 2.0 * N**3
IDEAL_US = FLOPS / 989.4e6  # compute-bound: 138.9 µs


def _steps(b, kernel_us: float, step_us: float = 1000.0, n: int = 3) -> None:
    for s in range(n):
        t0 = s * step_us
        b.step(s + 1, t0, step_us - 1)
        b.op("aten::mm", t0 + 5, 20, dims=[[N, N], [N, N]], types=BF16)
        b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", t0 + 8, t0 + 40, kernel_us)


def _queued_steps(b, kernel_us: float, host_us: float = 250.0, n: int = 3) -> None:
    """The host runs ahead: each step launches its GEMM and moves on; the GEMMs queue."""
    free = 0.0
    for s in range(n):
        t0 = s * host_us
        b.step(s + 1, t0, host_us - 1)
        b.op("aten::mm", t0 + 5, 20, dims=[[N, N], [N, N]], types=BF16)
        start = max(t0 + 40, free)
        b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", t0 + 8, start, kernel_us)
        free = start + kernel_us


def test_fires_on_a_slow_gemm_and_names_it(builder):
    _queued_steps(builder, kernel_us=900.0)
    (f,) = RULE.run(builder.analysis())
    assert f.steps == [1, 2, 3]
    assert "aten::mm [4096,4096] [4096,4096]" in f.message
    assert "900 µs per step" in f.message and "139 µs" in f.message
    assert "15% of roofline" in f.message and "compute-bound, bf16" in f.message
    # Replayed with the GEMM at 70 % of its roofline (what tuned GEMMs reach): the kernel
    # takes 198 µs, and the steps shrink from 900 µs of queued GEMMs to the host's 250 µs
    # (the first from 940: its GEMM starts 40 µs in); the saving is the three steps' together,
    # per step.
    assert IDEAL_US / 0.7 < 250.0
    assert f.savings_us == pytest.approx((940.0 + 2 * 900.0 - 3 * 250.0) / 3, abs=5.0)
    assert {e.name for e in f.evidence} == {"aten::mm"}


def test_silent_near_the_roofline(builder):
    _steps(builder, kernel_us=200.0, step_us=240.0)
    assert RULE.run(builder.analysis()) == []


def test_silent_when_the_step_is_not_compute_bound(builder):
    _steps(builder, kernel_us=300.0)  # 30 % busy: overhead, not compute
    assert RULE.run(builder.analysis()) == []


def test_silent_without_peaks(make_builder):
    b = make_builder(device_properties=[{"id": 0, "name": "Mystery GPU 9000"}])
    _steps(b, kernel_us=900.0)
    assert RULE.run(b.analysis()) == []


def test_silent_without_shapes(builder):
    for s in range(3):
        builder.step(s + 1, s * 1000, 999)
        builder.op("aten::mm", s * 1000 + 5, 20)
        builder.launch("gemm", s * 1000 + 8, s * 1000 + 40, 900)
    assert RULE.run(builder.analysis()) == []


def test_the_priced_share_is_of_compute_not_of_collectives(builder):
    # 1 ms steps: the priced 4096³ GEMM runs 280 µs (139 µs at the roofline), unpriced
    # kernels 540 µs, then a 170 µs all-reduce kernel that no compute overlaps. 82% compute:
    # compute-bound; the GEMM is 34% of the compute time, but only 28% of the busy time.
    for s in range(3):
        t0 = s * 1000.0
        builder.step(s + 1, t0, 999)
        builder.op("aten::mm", t0 + 2, 10, dims=[[N, N], [N, N]], types=BF16)
        builder.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", t0 + 4, t0 + 10, 280)
        builder.launch("custom_fused_kernel", t0 + 20, t0 + 290, 540)
        builder.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t0 + 30, t0 + 830, 170)
    a = builder.analysis()
    w = a.windows[1]
    assert (w.compute_busy_us, w.exposed_collective_us, w.verdict) == (820.0, 170.0,
                                                                        "compute-bound")
    (f,) = RULE.run(a)
    assert f.steps == [1, 2, 3] and "280 µs per step" in f.message


def test_symmetric_memory_all_reduce_is_not_compute_time(builder):
    # Per step a 300 µs GEMM and an 800 µs symm_mem all-reduce, queued. The all-reduce
    # waits on the other ranks: it is communication, in the step's compute busy as in the
    # roofline (one definition, trace/categories.COMM_KERNEL). So the steps are
    # communication-bound, not compute-bound with a slow GEMM, and this rule, which is about
    # the FLOPs of compute-bound steps, stays silent.
    free = 0.0
    for s in range(3):
        t0 = s * 250.0
        builder.step(s + 1, t0, 249)
        builder.op("aten::mm", t0 + 5, 20, dims=[[N, N], [N, N]], types=BF16)
        start = max(t0 + 40, free)
        builder.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", t0 + 8, start, 300.0)
        builder.op("symm_mem::multimem_all_reduce_", t0 + 30, 10)
        builder.launch("void c10d::symmetric_memory::multimem_all_reduce_kernel<float>",
                       t0 + 32, start + 300, 800.0)
        free = start + 1100
    analysis = builder.analysis()
    warm = analysis.windows[1:]
    assert all(w.verdict == "communication-bound" for w in warm), [w.verdict for w in warm]
    assert all(w.compute_busy_us < 0.3 * w.device_busy_us for w in warm)
    assert RULE.run(analysis) == []
