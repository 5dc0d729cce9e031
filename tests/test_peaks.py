"""The device peaks table and its loader: every row cited and sane, real trace names
resolving to the right rows, and override files (good and bad) applied as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_diagnostics.analysis.cost import peaks as P
from tb_diagnostics.analysis.cost.peaks import (
    PEAK_KEYS,
    PEAKS_ENV,
    PRECISIONS,
    DevicePeaks,
    PeaksFileError,
    load_overrides,
    lookup,
    overrides_from_env,
    table,
)


def write(tmp_path: Path, data: object, name: str = "peaks.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return p


# --- the table ------------------------------------------------------------------------


def test_peak_keys_are_the_precisions_then_bandwidth():
    # fp6 and fp4 were added for Blackwell (issue 24); keys are only ever added.
    assert PRECISIONS == ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4",
                          "int8")
    assert PEAK_KEYS[:-1] == PRECISIONS
    assert PEAK_KEYS[-1] == "hbm_gbps"


@pytest.mark.parametrize("row", table(), ids=lambda r: r["name"])
def test_every_row_is_named_cited_and_complete(row):
    assert isinstance(row["name"], str) and row["name"].strip()
    assert isinstance(row["source"], str) and row["source"].strip()
    assert row["match"] and all(isinstance(m, str) and m.strip() for m in row["match"])
    assert set(row["peaks"]) == set(PEAK_KEYS)
    for key, value in row["peaks"].items():
        assert value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                 and value > 0), (key, value)
    fp32 = row["peaks"]["fp32"]
    for half in ("bf16", "fp16"):
        if row["peaks"][half] is not None and fp32 is not None:
            assert row["peaks"][half] >= fp32, half
    # A cited figure is one whose page is named: a URL, or the admission it was not found.
    assert "http" in row["source"] or "not found in the stored copy" in row["source"]


def test_every_row_has_a_memory_bandwidth_and_an_fp32_peak_or_says_why_not():
    for row in table():
        # A part whose figures no stored page gives (the A10G's FLOPs, the B100's
        # bandwidth) keeps them null and says so, rather than borrowing a sibling's: a
        # wrong peak misleads more than none.
        notes = row.get("notes", "")
        for key in ("hbm_gbps", "fp32"):
            assert (row["peaks"][key] is not None or "not found in the stored copy" in notes
                    or f"{key} is null" in notes), (row["name"], key)


def test_table_returns_a_copy():
    rows = table()
    rows[0]["peaks"]["fp32"] = -1
    assert table()[0]["peaks"]["fp32"] != -1


def test_the_required_devices_are_all_present():
    names = " | ".join(r["name"] for r in table())
    for part in ("V100 SXM2", "V100 PCIe", "V100 DGXS", "T4", "A10", "A100 SXM4 40GB",
                 "A100 SXM4 80GB", "A100 PCIe 40GB", "A100 PCIe 80GB", "PG509-200", "L4",
                 "L40S", "H100 SXM5", "H100 PCIe", "H100 NVL", "H800", "H200", "GH200",
                 "B200", "GB200", "RTX 2080 Ti", "RTX 3090", "RTX 4090", "MI250X", "MI250 ",
                 "MI300X", "MI325X"):
        assert part in names, part


# --- names from real traces -----------------------------------------------------------


@pytest.mark.parametrize(("device", "row", "bf16", "hbm"), [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB", 989.4, 3350),
    ("Tesla V100-DGXS-32GB", "NVIDIA Tesla V100 DGXS", None, 900),
    ("Tesla V100-SXM2-16GB", "NVIDIA Tesla V100 SXM2", None, 900),
    ("Tesla V100-SXM2-32GB", "NVIDIA Tesla V100 SXM2", None, 900),
    ("Tesla V100-PCIE-32GB", "NVIDIA Tesla V100 PCIe", None, 900),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB", 312, 2039),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB", 312, 1555),
    ("NVIDIA A100-PG509-200", "NVIDIA A100 SXM4 (PG509-200)", 312, 1555),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB", 312, 1555),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB", 312, 1935),
    ("NVIDIA A10", "NVIDIA A10", 125, 600),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe", 756.5, 2000),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL", 835.5, 3900),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090", 165.2, 1008),
    ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090", 71, 936),
    ("NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 2080 Ti", None, 616),
    ("Tesla T4", "NVIDIA Tesla T4", None, 320),
    ("NVIDIA L4", "NVIDIA L4", 121, 300),
    ("NVIDIA L40S", "NVIDIA L40S", 362.05, 864),
    ("NVIDIA H800", "NVIDIA H800 SXM5", 989.4, 3350),
    ("NVIDIA H200", "NVIDIA H200 SXM", 989.4, 4800),
    ("NVIDIA GH200 480GB", "NVIDIA GH200 Grace Hopper (96GB HBM3)", 989.4, 4000),
    ("NVIDIA B200", "NVIDIA B200 (HGX)", 2250, 7700),
    ("NVIDIA GB200", "NVIDIA GB200 (per Blackwell GPU)", 2500, 8000),
    ("AMD Instinct MI250X / MI250", "AMD Instinct MI250X (per GCD)", 191.5, 1600),
    ("AMD Instinct MI250", "AMD Instinct MI250 (per GCD)", 181.05, 1600),
    ("AMD Instinct MI300X", "AMD Instinct MI300X", 1307.4, 5300),
    ("AMD Instinct MI325X", "AMD Instinct MI325X", 1307.4, 6000),
])
def test_real_device_names_resolve_to_their_rows(device, row, bf16, hbm):
    got = lookup(device)
    assert got is not None
    assert got.name == row
    assert got.peak("bf16") == bf16
    assert got.bandwidth_gbps == hbm
    assert got.source and got.source == next(r["source"] for r in table() if r["name"] == row)


def test_a10_and_a100_do_not_take_each_other():
    assert lookup("NVIDIA A10").peak("fp32") == 31.2
    assert lookup("NVIDIA A100-SXM4-40GB").peak("fp32") == 19.5
    # A10G is another part (AWS) with its own row: the A10's tensor rates never reach it.
    a10g = lookup("NVIDIA A10G")
    assert a10g.name == "NVIDIA A10G" and a10g.peak("bf16") is None
    assert a10g.bandwidth_gbps == 600


def test_h100_pcie_is_not_the_sxm_part():
    assert lookup("NVIDIA H100 PCIe").peak("fp16") == 756.5
    assert lookup("NVIDIA H100 80GB HBM3").peak("fp16") == 989.4


def test_a100_names_without_a_specific_pattern_get_the_common_compute_peaks():
    got = lookup("NVIDIA A100 Tensor Core")
    assert got is not None and got.peak("bf16") == 312


@pytest.mark.parametrize("device", [
    "NVIDIA H800 PCIe",
    "Intel(R) Data Center GPU Max 1550",
    "AMD Radeon Graphics",
    "",
])
def test_unknown_devices_resolve_to_none(device):
    assert lookup(device) is None


def test_no_device_name_is_a_cpu_trace_with_no_peaks():
    assert lookup(None) is None
    assert lookup(None, {"gcnArchName": "gfx942"}) is None


def test_name_matching_ignores_case_and_extra_spaces():
    assert lookup("nvidia  h100   80gb hbm3").name == "NVIDIA H100 SXM5 80GB"


def test_a_generic_amd_name_falls_back_to_the_architecture_and_says_so():
    got = lookup("AMD Radeon Graphics", {"gcnArchName": "gfx942:sramecc+:xnack-"})
    assert got is not None and got.name == "AMD Instinct MI300X"
    assert got.source.endswith("matched by gcnArchName gfx942, not by name")


def test_gfx90a_is_ambiguous_and_maps_to_no_row():
    assert lookup("AMD Radeon Graphics", {"gcnArchName": "gfx90a:sramecc+:xnack-"}) is None


def test_the_name_wins_over_the_architecture():
    got = lookup("AMD Instinct MI325X", {"gcnArchName": "gfx942"})
    assert got.name == "AMD Instinct MI325X" and "gcnArchName" not in got.source


def test_device_peaks_accessors_and_dict():
    got = lookup("NVIDIA H100 80GB HBM3")
    assert got.peak("fp8") == 1978.9
    assert got.peak("hbm_gbps") == got.bandwidth_gbps == 3350
    d = got.to_dict()
    # identified_by/identification were added by issue 24 (keys are only ever added).
    assert set(d) == {"name", "peaks", "source", "identified_by", "identification"}
    assert d["identified_by"] == "name" and d["identification"] is None
    assert list(d["peaks"]) == list(PEAK_KEYS)
    assert got.peak(None) is None  # the cost model's "precision unknown"
    with pytest.raises(KeyError, match="fp33"):
        got.peak("fp33")


# --- overrides ------------------------------------------------------------------------


def test_an_override_updates_one_key_and_keeps_the_rest(tmp_path):
    path = write(tmp_path, {"devices": {"H100 80GB": {"fp32": 60.0}}})
    got = lookup("NVIDIA H100 80GB HBM3", overrides=load_overrides(path))
    assert got.peak("fp32") == 60.0
    assert got.peak("bf16") == 989.4  # untouched keys keep the table's value
    assert got.name == "NVIDIA H100 SXM5 80GB"
    row_source = lookup("NVIDIA H100 80GB HBM3").source
    assert got.source == f"{row_source}; override: {path}"


def test_an_override_that_changes_nothing_keeps_the_row_source(tmp_path):
    path = write(tmp_path, {"h100": {"bf16": 989.4}})
    got = lookup("NVIDIA H100 80GB HBM3", overrides=load_overrides(path))
    assert got.source == lookup("NVIDIA H100 80GB HBM3").source


def test_an_override_replacing_every_key_is_its_own_source(tmp_path):
    entry = dict.fromkeys(PEAK_KEYS, 1.0)
    path = write(tmp_path, {"A100": entry})
    got = lookup("NVIDIA A100-SXM4-40GB", overrides=load_overrides(path))
    assert got.peaks == entry and got.source == f"override: {path}"


def test_an_override_gives_an_unknown_device_peaks(tmp_path):
    path = write(tmp_path, {"devices": {"Max 1550": {"bf16": 832, "hbm_gbps": 3276.8,
                                                     "name": "Intel Data Center GPU Max 1550"}}})
    got = lookup("Intel(R) Data Center GPU Max 1550", overrides=load_overrides(path))
    assert got.name == "Intel Data Center GPU Max 1550"
    assert got.peak("bf16") == 832 and got.bandwidth_gbps == 3276.8
    assert got.peak("fp32") is None and got.peak("fp64") is None
    assert got.source == f"override: {path}"


def test_an_unknown_device_without_an_override_name_keeps_its_trace_name(tmp_path):
    path = write(tmp_path, {"Max 1550": {"fp32": 52.4}})
    got = lookup("Intel(R) Data Center GPU Max 1550", overrides=load_overrides(path))
    assert got.name == "Intel(R) Data Center GPU Max 1550"


def test_the_cpu_override_gives_cpu_traces_peaks(tmp_path):
    path = write(tmp_path, {"cpu": {"fp32": 3.2, "fp64": 1.6, "hbm_gbps": 200}})
    ov = load_overrides(path)
    got = lookup(None, overrides=ov)
    assert got is not None and got.peak("fp32") == 3.2 and got.bandwidth_gbps == 200
    assert got.name == "CPU" and got.source == f"override: {path}"
    # "cpu" is a key of its own, not a substring to look for in GPU names.
    assert lookup("NVIDIA H100 80GB HBM3", overrides=ov).source == \
        lookup("NVIDIA H100 80GB HBM3").source


def test_the_wildcard_applies_when_nothing_more_specific_does(tmp_path):
    path = write(tmp_path, {"*": {"hbm_gbps": 100}, "L4": {"hbm_gbps": 250}})
    ov = load_overrides(path)
    assert lookup("NVIDIA L4", overrides=ov).bandwidth_gbps == 250
    assert lookup("NVIDIA H100 PCIe", overrides=ov).bandwidth_gbps == 100
    unknown = lookup("Some Future GPU", overrides=ov)
    assert unknown.bandwidth_gbps == 100 and unknown.peak("fp32") is None
    # A CPU-only trace is not "any device": "*" figures meant for GPUs would be absurd.
    assert lookup(None, overrides=ov) is None


def test_the_longest_override_key_wins(tmp_path):
    path = write(tmp_path, {"A100": {"fp32": 1}, "A100-SXM4-80GB": {"fp32": 2}})
    ov = load_overrides(path)
    assert lookup("NVIDIA A100-SXM4-80GB", overrides=ov).peak("fp32") == 2
    assert lookup("NVIDIA A100-SXM4-40GB", overrides=ov).peak("fp32") == 1


def test_override_keys_match_case_insensitively(tmp_path):
    path = write(tmp_path, {"geforce rtx 4090": {"fp16": 330.3}})
    got = lookup("NVIDIA GeForce RTX 4090", overrides=load_overrides(path))
    assert got.peak("fp16") == 330.3


def test_an_override_may_blank_a_figure_with_null(tmp_path):
    path = write(tmp_path, {"H100": {"fp8": None}})
    got = lookup("NVIDIA H100 80GB HBM3", overrides=load_overrides(path))
    assert got.peak("fp8") is None and "override:" in got.source


def test_overrides_from_env(tmp_path):
    path = write(tmp_path, {"devices": {"T4": {"fp16": 60}}})
    ov = overrides_from_env({PEAKS_ENV: str(path)})
    assert ov is not None and ov.path == str(path)
    assert lookup("Tesla T4", overrides=ov).peak("fp16") == 60
    assert overrides_from_env({}) is None
    assert overrides_from_env({PEAKS_ENV: "  "}) is None


def test_overrides_from_env_reads_the_real_environment_by_default(tmp_path, monkeypatch):
    path = write(tmp_path, {"T4": {"fp16": 60}})
    monkeypatch.setenv(PEAKS_ENV, str(path))
    assert overrides_from_env().path == str(path)
    monkeypatch.delenv(PEAKS_ENV)
    assert overrides_from_env() is None


# --- bad override files ---------------------------------------------------------------


@pytest.mark.parametrize(("content", "problem"), [
    ("{not json", "invalid JSON"),
    ('{"H100": {"fp32": NaN}}', "NaN"),
    ({"H100": {"fp33": 1}}, "unknown key 'fp33'"),
    ({"devices": {"H100": {"tflops": 1}}}, "unknown key 'tflops'"),
    ({"H100": {"fp32": -1}}, "positive"),
    ({"H100": {"fp32": 0}}, "positive"),
    ({"H100": {"fp32": "fast"}}, "must be a number"),
    ({"H100": {"fp32": True}}, "must be a number"),
    ({"H100": 5}, "must be an object"),
    ([1, 2], "JSON object"),
    ({"devices": [1]}, "devices must be an object"),
    ({"devices": {}, "extra": 1}, "unknown top-level keys"),
    ({"H100": {}, "h100": {}}, "matching ignores case"),
    ({"": {"fp32": 1}}, "empty device key"),
    ('{"H100": {"fp32": 1}, "H100": {"fp32": 2}}', "appears twice"),
])
def test_bad_override_files_raise_an_error_naming_the_file(tmp_path, content, problem):
    path = write(tmp_path, content)
    with pytest.raises(PeaksFileError) as err:
        load_overrides(path)
    assert str(path) in str(err.value)
    assert problem in str(err.value)


def test_a_missing_override_file_is_named(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(PeaksFileError, match="not found") as err:
        load_overrides(path)
    assert str(path) in str(err.value)
    with pytest.raises(PeaksFileError):
        overrides_from_env({PEAKS_ENV: str(path)})


def test_peaks_file_error_is_a_value_error():
    assert issubclass(PeaksFileError, ValueError)


# --- the table validator --------------------------------------------------------------


def _valid_row(**changes):
    row = {"name": "X", "match": ["X1"], "source": "a page, https://example.invalid",
           "peaks": dict.fromkeys(PEAK_KEYS, 1.0)}
    row.update(changes)
    return row


@pytest.mark.parametrize(("rows", "problem"), [
    ([_valid_row(source="")], "source"),
    ([_valid_row(match=[])], "match"),
    ([_valid_row(peaks={"fp32": 1})], "lacks"),
    ([_valid_row(peaks={**dict.fromkeys(PEAK_KEYS, 1.0), "fp2": 1})], "unknown peak key"),
    ([_valid_row(peaks={**dict.fromkeys(PEAK_KEYS, 1.0), "fp32": -2})], "positive"),
    ([_valid_row(), _valid_row(name="Y")], "also on"),
    ([_valid_row(gcn_arch=["gfx1"]), _valid_row(name="Y", match=["Y1"], gcn_arch=["gfx1"])],
     "gcn_arch"),
    ([_valid_row(colour="red")], "unknown keys"),
])
def test_the_table_validator_rejects_bad_rows(rows, problem):
    with pytest.raises(PeaksFileError, match=problem):
        P._validate_table("t.json", {"version": 1, "devices": rows})


def test_the_shipped_table_passes_its_own_validator():
    data = json.loads(Path(P.__file__).resolve().parents[2].joinpath(
        "data", "device_peaks.json").read_text(encoding="utf-8"))
    assert P._validate_table("device_peaks.json", data)


def test_device_peaks_is_immutable():
    got = lookup("Tesla T4")
    assert isinstance(got, DevicePeaks)
    with pytest.raises(AttributeError):
        got.name = "other"  # type: ignore[misc]
