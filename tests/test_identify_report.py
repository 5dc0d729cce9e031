"""The roofline section and summary say how the device was identified (issue 24): by its
properties, estimated, or not at all and why."""

from __future__ import annotations

import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.report.document import step_document
from tb_diagnostics.report.roofline import add_step_roofline, roofline_section, roofline_summary

BF16 = "c10::BFloat16"
PAIR_H100 = {"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 102085492736,
             "computeMajor": 9, "computeMinor": 0, "numSms": 132}


def _span(b: TraceBuilder) -> dict:
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 30, dims=[[2048, 1024], [1024, 4096]], types=[BF16, BF16])
    b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 12, 50, 100)
    a = b.analysis()
    steps = [step_document(w) for w in a.windows]
    add_step_roofline(steps, a)
    return {"roofline": roofline_section(a), "steps": steps}


def test_a_plain_h100_is_reported_as_identified_by_its_properties(tmp_path):
    span = _span(TraceBuilder(tmp_path, device_properties=[PAIR_H100]))
    dev = span["roofline"]["device"]
    assert (dev["name"], dev["identified_by"]) == ("NVIDIA H100 SXM5 80GB", "properties")
    flops = 2.0 * 2048 * 1024 * 4096
    (s,) = span["steps"]
    assert s["flop_utilisation"] == pytest.approx(flops / (s["wall_us"] * 1e6) / 989.4,
                                                  rel=1e-3)
    assert roofline_summary(span).startswith(
        "roofline on NVIDIA H100 SXM5 80GB (identified by its properties): ")


def test_an_estimated_part_is_reported_as_estimated(tmp_path):
    # A made-up model number: a real part (the RTX 4500 Ada) has its own row now.
    block = {"id": 0, "name": "NVIDIA RTX 4400 Ada Generation", "computeMajor": 8,
             "computeMinor": 9, "numSms": 60}
    span = _span(TraceBuilder(tmp_path, device_properties=[block]))
    dev = span["roofline"]["device"]
    assert dev["identified_by"] == "estimate" and dev["peaks"]["bf16"] == 156.672
    assert "(estimated) (estimated)" not in roofline_summary(span)
    assert roofline_summary(span).startswith(
        "roofline on NVIDIA RTX 4400 Ada Generation (estimated): ")


def test_a_part_with_nothing_to_go_on_says_why(tmp_path):
    span = _span(TraceBuilder(tmp_path, device_properties=[{"id": 0, "name": "NVIDIA X1"}]))
    dev = span["roofline"]["device"]
    assert dev["identified_by"] is None
    assert dev["identification"] == ("'NVIDIA X1' matches no row of the peaks table, and "
                                     "the trace records no compute capability or SM count")
    assert dev["identification"] in roofline_summary(span)
