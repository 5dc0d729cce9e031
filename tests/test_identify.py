"""Identification by properties (issue 24): real deviceProperties blocks of ambiguous and
unknown parts, hand-made ones for an unknown Ada part and a part with nothing to go on,
and the new rows the issue names."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tb_diagnostics.analysis.cost.identify import (
    ESTIMATE_REFERENCES,
    compute_capability,
    why_no_peaks,
)
from tb_diagnostics.analysis.cost.peaks import lookup, table

# The deviceProperties block of ../shared/pairs/h100_toyblocks_eager_vs_compile (both
# traces), copied so the test runs without ../shared.
PAIR_H100 = {"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 102085492736,
             "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
             "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
             "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
             "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
# The block of ../shared/traces' ROCm 6.2 MI250 trace: HIP reports cc 9.0 for gfx90a.
MI250_BLOCK = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0,
               "numSms": 104, "totalGlobalMem": 68702699520}

PAIR_DIR = Path(__file__).resolve().parents[2] / "shared" / "pairs"


def test_the_pairs_plain_h100_is_identified_by_its_properties_as_sxm_class():
    got = lookup(PAIR_H100["name"], PAIR_H100)
    assert got.name == "NVIDIA H100 SXM5 80GB"
    assert got.identified_by == "properties"
    assert got.identification.startswith("identified by its properties")
    assert "132 SMs" in got.identification and "9.0" in got.identification
    assert got.peak("bf16") == 989.4 and got.bandwidth_gbps == 3350
    d = got.to_dict()
    assert d["identified_by"] == "properties" and d["identification"] == got.identification


def test_the_shared_pair_traces_carry_that_block():
    traces = sorted(PAIR_DIR.glob("*/*/*.pt.trace.json.gz"))
    if not traces:
        pytest.skip("../shared/pairs is absent")
    for path in traces:
        with gzip.open(path, "rt") as f:
            props = json.load(f)["deviceProperties"][0]
        got = lookup(props["name"], props)
        assert (got.name, got.identified_by) == ("NVIDIA H100 SXM5 80GB", "properties")


def test_a_plain_h100_with_114_sms_is_the_pcie_part():
    block = dict(PAIR_H100, numSms=114, totalGlobalMem=85_000_000_000)
    got = lookup("NVIDIA H100", block)
    assert (got.name, got.identified_by) == ("NVIDIA H100 PCIe", "properties")
    assert got.peak("bf16") == 756.5


def test_a_plain_h100_without_properties_still_gets_nothing():
    assert lookup("NVIDIA H100") is None
    assert "no compute capability" in why_no_peaks("NVIDIA H100", None)


def test_an_unknown_ada_part_is_estimated_from_its_sm_count():
    # Hand-made: an Ada workstation part the table lacks (a made-up model number, so a
    # real row never takes it), 60 SMs at cc 8.9.
    block = {"name": "NVIDIA RTX 4400 Ada Generation", "computeMajor": 8,
             "computeMinor": 9, "numSms": 60, "totalGlobalMem": 25_757_220_864}
    got = lookup(block["name"], block)
    assert got.identified_by == "estimate"
    assert got.name == "NVIDIA RTX 4400 Ada Generation"
    # The RTX 5000 Ada's figures x 60/100 SMs, at its 2.55 GHz; full-rate FP32 accumulate
    # (the L40, at half rate, would have given 76.5).
    assert got.peak("fp32") == round(65.28 * 60 / 100, 3) == 39.168
    assert got.peak("bf16") == round(261.12 * 60 / 100, 3) == 156.672
    assert got.peak("fp8") == round(522.24 * 60 / 100, 3) == 313.344
    assert got.bandwidth_gbps is None  # the bus width is not in the properties
    assert "estimated" in got.identification and "2.55 GHz" in got.identification
    assert got.source.startswith("estimated from NVIDIA RTX 5000 Ada Generation: ")


def test_the_rtx_4500_ada_now_has_a_row_of_its_own():
    # The real 60-SM part: by name, its derived row (the same per-SM rate at its 2.58 GHz).
    block = {"name": "NVIDIA RTX 4500 Ada Generation", "computeMajor": 8,
             "computeMinor": 9, "numSms": 60, "totalGlobalMem": 25_757_220_864}
    got = lookup(block["name"], block)
    assert (got.name, got.identified_by) == ("NVIDIA RTX 4500 Ada Generation", "name")
    assert got.peak("bf16") == round(60 * 2.58 * 1024 / 1000, 2) == 158.52
    assert got.bandwidth_gbps == 432


def test_an_unknown_geforce_part_takes_the_geforce_reference():
    # Hand-made: 64 SMs of Ada on a GeForce name no row has (a made-up model number, so
    # that rows added for real parts never take it): half the RTX 4090's 128.
    block = {"computeMajor": 8, "computeMinor": 9, "numSms": 64}
    got = lookup("NVIDIA GeForce RTX 4075", block)
    assert got.identified_by == "estimate"
    assert (got.peak("fp32"), got.peak("bf16"), got.peak("int8")) == (41.3, 82.6, 330.3)


def test_an_amd_block_with_hip_cc_9_is_not_taken_for_hopper():
    assert lookup(MI250_BLOCK["name"], MI250_BLOCK) is None
    assert "only NVIDIA parts" in why_no_peaks(MI250_BLOCK["name"], MI250_BLOCK)


def test_a_part_with_nothing_to_go_on_gets_no_peaks_and_a_reason():
    # Hand-made: an unknown name whose trace records no compute capability.
    block = {"name": "NVIDIA Mystery GPU", "numSms": 50}
    assert lookup(block["name"], block) is None
    assert why_no_peaks(block["name"], block) == (
        "'NVIDIA Mystery GPU' matches no row of the peaks table, and the trace records "
        "no compute capability or SM count")
    # An architecture with no reference part: Blackwell consumer (cc 12.0).
    block = {"computeMajor": 12, "computeMinor": 0, "numSms": 170}
    assert lookup("NVIDIA GeForce RTX 5090 Laptop", block) is None
    assert "compute capability 12.0 has no reference" in why_no_peaks(
        "NVIDIA GeForce RTX 5090 Laptop", block)
    assert why_no_peaks(None, None).startswith("a CPU-only trace")


def test_a_name_row_wins_over_properties():
    # The SXM5 name with odd properties stays a name match: properties only break ties.
    got = lookup("NVIDIA H100 80GB HBM3", dict(PAIR_H100, numSms=114))
    assert (got.name, got.identified_by, got.identification) == (
        "NVIDIA H100 SXM5 80GB", "name", None)


def test_compute_capability_reads_major_and_minor():
    assert compute_capability({"computeMajor": 8, "computeMinor": 6}) == "8.6"
    assert compute_capability({"computeMajor": 8}) is None
    assert compute_capability({"computeMajor": True, "computeMinor": 0}) is None


@pytest.mark.parametrize("name, bf16, fp32, hbm", [
    ("NVIDIA L40", 181.05, 90.5, 864),
    ("NVIDIA GeForce RTX 4090 D", 147.09, 73.54, 1008),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", 75.88, 37.94, 576),
    ("NVIDIA A10G", None, None, 600),
    ("NVIDIA A40", 149.7, 37.4, 696),
])
def test_the_issues_missing_parts_have_rows(name, bf16, fp32, hbm):
    got = lookup(name)
    assert got.name == name and got.identified_by == "name"
    assert (got.peak("bf16"), got.peak("fp32"), got.bandwidth_gbps) == (bf16, fp32, hbm)


def test_the_l40_row_does_not_take_the_l40s_nor_the_4090_rows_the_d():
    assert lookup("NVIDIA L40S").name == "NVIDIA L40S"
    assert lookup("NVIDIA GeForce RTX 4090").peak("bf16") == 165.2


def test_every_estimate_reference_is_a_row_with_cc_and_sms():
    rows = {r["name"]: r for r in table()}
    for (cc, _geforce), ref in ESTIMATE_REFERENCES.items():
        row = rows[ref.row]
        assert row["cc"] == cc and row["sms"] > 0, ref.row


# The table's shape (units, dense figures, precision order) is tested in
# tests/test_peaks_table.py, with the rest of the table's invariants.
