"""Host↔device copies against the host link, and collectives outside the cost model."""

from __future__ import annotations

from pathlib import Path

import pytest
from rules.conftest import TraceBuilder, shared_analysis

from tb_diagnostics.analysis.cost.collectives import is_collective
from tb_diagnostics.analysis.cost.host_link import LINK_GBPS, host_link
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.report.document import step_document
from tb_diagnostics.report.roofline import add_step_roofline, roofline_section
from tb_diagnostics.trace import load_trace

PAIRS = (Path(__file__).parents[1] / ".." / "shared" / "pairs").resolve()
F32 = "float"
T4 = {"id": 0, "name": "Tesla T4", "totalGlobalMem": 15843721216,
      "computeMajor": 7, "computeMinor": 5, "numSms": 40}


def _section(b: TraceBuilder):
    a = b.analysis()
    steps = [step_document(w) for w in a.windows]
    add_step_roofline(steps, a)
    return a, roofline_section(a), steps


def _copy_trace(tmp_path, props, kind: str = "Pageable", n: int = 1_000_000,
                dur: float = 710.0) -> TraceBuilder:
    b = TraceBuilder(tmp_path, device_properties=[props])
    b.step(1, 0, 2000)
    b.op("aten::copy_", 10, 800, dims=[[n], [n]], types=[F32, F32])
    b.launch(f"Memcpy HtoD ({kind} -> Device)", 12, 20, dur, api="cudaMemcpyAsync",
             api_dur=780, cat="gpu_memcpy", bytes=4 * n)
    return b


def test_pcie_rates_are_the_pci_sig_figures():
    # 8 GT/s × 16 lanes × 128/130 / 8 bits; each generation doubles.
    assert LINK_GBPS["PCIe 3.0 x16"] == pytest.approx(8 * 16 * 128 / 130 / 8, rel=2e-3)
    assert LINK_GBPS["PCIe 4.0 x16"] == pytest.approx(2 * 15.75)
    assert LINK_GBPS["PCIe 5.0 x16"] == pytest.approx(4 * 15.75)


@pytest.mark.parametrize(("name", "props", "link"), [
    ("Tesla T4", None, "PCIe 3.0 x16"),
    ("Tesla V100-SXM2-32GB", None, "PCIe 3.0 x16"),
    ("NVIDIA A100-SXM4-80GB", None, "PCIe 4.0 x16"),
    ("NVIDIA A10G", None, "PCIe 4.0 x16"),
    ("NVIDIA A100", None, "PCIe 4.0 x16"),  # not the A10 pattern's
    ("NVIDIA L40S", None, "PCIe 4.0 x16"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", None, "PCIe 4.0 x16"),
    ("NVIDIA A2", None, "PCIe 4.0 x8"),
    ("NVIDIA GeForce RTX 4060 Ti", None, "PCIe 4.0 x8"),
    ("NVIDIA GeForce RTX 4090 D", None, "PCIe 4.0 x16"),
    ("NVIDIA GeForce RTX 5060", None, "PCIe 5.0 x8"),
    ("NVIDIA GeForce RTX 5090", None, "PCIe 5.0 x16"),
    ("NVIDIA H100", None, "PCIe 5.0 x16"),
    ("NVIDIA H200", None, "PCIe 5.0 x16"),
    ("NVIDIA B200", None, "PCIe 5.0 x16"),
    ("NVIDIA GH200 480GB", None, "NVLink-C2C"),
    ("AMD Instinct MI300X", None, "PCIe 5.0 x16"),
    ("Some Future GPU", {"computeMajor": 8, "computeMinor": 9}, "PCIe 4.0 x16"),
])
def test_each_part_family_has_its_link(name, props, link):
    got = host_link(name, props)
    assert got is not None and got.name == link and got.gbps == LINK_GBPS[link]
    assert got.source and got.by_capability == (props is not None)


def test_integrated_and_unknown_parts_have_no_link():
    assert host_link("Orin (nvgpu)") is None  # one memory with the host
    assert host_link("AMD Instinct MI300A") is None
    assert host_link("Mystery GPU 9000") is None
    assert host_link(None) is None


def test_an_unnamed_amd_part_is_not_given_an_nvidia_link_by_its_capability():
    # ROCm's MI250 GCD: "AMD Radeon Graphics", computeMajor 9 (gfx90a), 64-wide wavefronts.
    # NVIDIA's cc 9.0 means PCIe Gen5; this part's link is Gen4.
    mi250 = {"computeMajor": 9, "computeMinor": 0, "warpSize": 64, "numSms": 104}
    assert host_link("AMD Radeon Graphics", mi250) is None
    assert host_link("Radeon Pro GPU", {"computeMajor": 9, "computeMinor": 0}) is None
    assert host_link("GPU", {"computeMajor": 9, "computeMinor": 0, "gcnArchName": "gfx90a"}) is None
    # The same capability on an NVIDIA part (32-wide warps) still picks Gen5.
    assert host_link("NVIDIA Future", {"computeMajor": 9, "computeMinor": 0,
                                       "warpSize": 32}).name == "PCIe 5.0 x16"


def test_a_pageable_t4_copy_is_rated_against_pcie3_not_hbm(tmp_path):
    # The case: 4 MB pageable HtoD on a T4 in 710 µs ≈ 5.6 GB/s.
    _, sec, steps = _section(_copy_trace(tmp_path, T4))
    (op,) = sec["ops"]
    assert op["bound"] == "host-link" and op["pageable"] is True
    assert op["link_bytes"] == 4_000_000 and op["link_gbps"] == 15.75
    assert op["achieved_link_gbps"] == pytest.approx(4e6 / 710e-6 / 1e9, rel=1e-3)  # 5.634
    ideal = 4e6 / 15.75e3  # 253.97 µs
    assert op["ideal_us"] == pytest.approx(ideal, abs=1e-3)
    assert op["roofline_pct"] == pytest.approx(ideal / 710, abs=1e-4)  # 35.8 %, not 4 %
    assert sec["host_link"]["name"] == "PCIe 3.0 x16"
    assert steps[0]["busy_memory_bound_us"] == 710.0  # link-bound time is not compute


def test_a_pinned_h100_copy_is_rated_against_pcie5(tmp_path):
    props = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
             "numSms": 132, "totalGlobalMem": 85018279936}
    _, sec, _ = _section(_copy_trace(tmp_path, props, kind="Pinned", n=16_000_000, dur=1280))
    (op,) = sec["ops"]
    assert op["bound"] == "host-link" and op["pageable"] is False
    assert op["ideal_us"] == pytest.approx(64e6 / 63e3, abs=1e-3)  # 1015.87 µs
    assert op["roofline_pct"] == pytest.approx(64e6 / 63e3 / 1280, abs=1e-4)


def test_device_side_copies_stay_on_hbm(tmp_path):
    b = TraceBuilder(tmp_path, device_properties=[T4])
    b.step(1, 0, 2000)
    b.op("aten::copy_", 10, 100, dims=[[1000000], [1000000]], types=[F32, F32])
    b.launch("Memcpy DtoD (Device -> Device)", 12, 20, 50, api="cudaMemcpyAsync",
             cat="gpu_memcpy", bytes=4e6)
    _, sec, _ = _section(b)
    (op,) = sec["ops"]
    assert op["bound"] == "memory" and "link_gbps" not in op


def test_collective_names():
    for name in ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                 "ncclKernel_AllGather_RING_LL_Sum_int8_t", "rcclKernel_x",
                 "symm_mem::multimem_all_reduce_", "c10d::allreduce_", "record_param_comms",
                 "void c10d::symmetric_memory::multimem_all_reduce_kernel<float>"):
        assert is_collective(name), name
    for name in ("aten::mm", "sm90_gemm_bf16", "aten::all", "reduce_kernel"):
        assert not is_collective(name), name


def test_collectives_are_communication_not_unmodelled(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 30, dims=[[64, 64], [64, 64]], types=["c10::BFloat16"] * 2)
    b.launch("sm90_gemm_bf16", 12, 50, 10)
    b.op("c10d::allreduce_", 60, 30)
    b.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", 62, 100, 40)
    b.op("symm_mem::multimem_all_reduce_", 200, 30)
    b.launch("void c10d::symmetric_memory::multimem_all_reduce_kernel<float>", 202, 300, 25)
    b.op("my_lib::fancy_op", 400, 30)
    b.launch("fancy_kernel", 402, 500, 7)
    a, sec, _ = _section(b)
    assert sec["unmodelled"] == [{"name": "my_lib::fancy_op",
                                  "reason": "no cost model for this op",
                                  "calls": 1, "device_us": 7.0, "lower_bound_bytes": None,
                                  "lower_bound_us": None}]
    assert sec["unmodelled_device_us"] == 7.0
    assert sec["communication"] == {"activities": 2, "device_us": 65.0}
    assert roofline(a).communication == (2, 65.0)


def test_the_shared_pairs_plain_h100_is_on_pcie5():
    path = (PAIRS / "h100_toyblocks_eager_vs_compile" / "before"
            / "trace_eager.pt.trace.json.gz")
    if not path.is_file():
        pytest.skip("../shared/pairs is not present")
    m = load_trace(str(path))
    assert m.device_name == "NVIDIA H100"
    link = host_link(m.device_name, m.used_device_properties)
    assert link is not None and (link.name, link.gbps) == ("PCIe 5.0 x16", 63.0)


def test_the_shared_nccl_run_counts_its_collectives_as_communication():
    a = shared_analysis("hta_a100_nccl_train_rank0_of2")
    sec = roofline_section(a)
    # Its 21 NCCL kernels (launched under record_param_comms, 46.9 ms) were listed as
    # unmodelled compute; they are communication.
    assert sec["communication"] == {"activities": 21, "device_us": pytest.approx(46876.493)}
    assert all(u["name"] != "record_param_comms" for u in sec["unmodelled"])
    assert sec["unmodelled_device_us"] == pytest.approx(118309.345, abs=0.01)
