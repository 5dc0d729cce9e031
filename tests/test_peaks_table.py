"""The peak table's shape and its new rows (issue 24 item 1): every row cited, in the
right units, dense, its precisions in the order the hardware gives them; every pattern
resolving to its own row; the data-centre, workstation and Jetson parts added by name
(the strings PyTorch reports) or by properties; and fp6/fp4 answered on Blackwell."""

from __future__ import annotations

import pytest

from tb_diagnostics.analysis.cost import peaks_table
from tb_diagnostics.analysis.cost.identify import why_no_peaks
from tb_diagnostics.analysis.cost.peaks import (
    PEAK_KEYS,
    PRECISIONS,
    PeaksFileError,
    load_overrides,
    lookup,
    table,
)

NOT_FOUND = "not found in the stored copy"
ROWS = table()


def _admits(row: dict, what: str = NOT_FOUND) -> bool:
    return what in row["source"] or what in row.get("notes", "")


def test_precisions_run_from_the_widest_float_to_the_integer_unit():
    assert PRECISIONS == ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4",
                          "int8")
    assert PEAK_KEYS[:-1] == PRECISIONS and PEAK_KEYS[-1] == "hbm_gbps"
    # The old import path keeps answering (peaks.py re-exports the table module's names).
    assert peaks_table.PRECISIONS is PRECISIONS and peaks_table.table is table


# --- every row ---------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_row_is_cited(row):
    # A URL for the page the figures came from; two older rows admit, in their source,
    # that the stored copy lacked the datasheet, and say so rather than cite nothing.
    assert "http" in row["source"] or NOT_FOUND in row["source"], row["name"]
    # Every part has FP32 units and memory: a null there is explained, either as "not
    # found in the stored copy" or as "<key> is null: <why>" (a laptop part's memory clock
    # varies by laptop). Other precisions may be null silently: the part lacks the unit
    # (Volta has no BF16). Either way nothing is made up: null, not a sibling's figure.
    for key in ("fp32", "hbm_gbps"):
        if row["peaks"][key] is None:
            assert _admits(row) or _admits(row, f"{key} is null"), (row["name"], key)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_figure_is_in_the_tables_units(row):
    p = row["peaks"]
    for k in PRECISIONS:
        # TFLOP/s (TOPS for int8): a GFLOP/s or PFLOP/s figure would be 1000x off. The
        # smallest real figure is an A16 GPU's FP64 (0.0675), the largest GB300's FP4.
        assert p[k] is None or 0.05 <= p[k] <= 20_000, (k, p[k])
    # GB/s, not TB/s: from a Jetson Orin Nano's 102 to GB300's 8000.
    assert p["hbm_gbps"] is None or 50 <= p["hbm_gbps"] <= 20_000


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_rows_precisions_are_in_the_order_the_hardware_runs_them(row):
    p = row["peaks"]

    def le(lo: str, hi: str) -> bool:
        # 1 % for rounding: sources round equal rates differently (GeForce TF32 is the
        # FP32 rate: 104.8 vs 104.75 on an RTX 5090).
        return p[lo] is None or p[hi] is None or p[lo] <= p[hi] * 1.01

    # fp64 <= fp32, except AMD CDNA, whose FP64 matrix rate exceeds its vector FP32
    # (MI250X: 47.85 vs 23.95).
    assert le("fp64", "fp32") or row["name"].startswith("AMD"), "fp64 > fp32"
    # Narrower formats never run slower on a matrix unit: fp32 <= tf32 <= bf16,
    # bf16 <= fp16 (equal from Ampere and CDNA2 on; CDNA1 runs bf16 at half rate),
    # fp16 <= fp8 <= fp6 <= fp4.
    for lo, hi in (("fp32", "tf32"), ("tf32", "bf16"), ("bf16", "fp16"), ("fp16", "fp8"),
                   ("fp8", "fp6"), ("fp6", "fp4"), ("fp8", "fp4")):
        assert le(lo, hi), f"{lo} > {hi}"
    if row["name"].startswith("NVIDIA") and None not in (p["bf16"], p["fp16"]):
        assert p["bf16"] == pytest.approx(p["fp16"], rel=0.01), "NVIDIA: BF16 = FP16 rate"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_no_row_holds_a_sparse_figure(row):
    """A figure "with sparsity" is twice its dense one, so it shows against its
    neighbours: every matrix unit so far runs TF32 at half the 16-bit rate and FP8 at
    twice it (A100 156/312, H100 494.7/989.4/1978.9, Ada 90.5/181/362, B200 1100/2250/
    4500, MI300X 653.7/1307.4/2614.9). A sparse 16-bit figure next to a dense TF32 one
    reads 4x, a sparse FP8 figure 4x the FP16 one."""
    p = row["peaks"]

    def ratio(hi: str, lo: str) -> float | None:
        return None if p[hi] is None or p[lo] is None else p[hi] / p[lo]

    for hi, lo in (("bf16", "tf32"), ("fp16", "tf32"), ("fp8", "fp16")):
        r = ratio(hi, lo)
        assert r is None or 1.9 <= r <= 2.1, f"{hi}/{lo} = {r}: a sparse figure?"
    # FP6 runs at the FP8 rate on Blackwell and at the FP4 rate on CDNA4 (MI355X).
    r = ratio("fp6", "fp8")
    assert r is None or r <= 2.1, f"fp6/fp8 = {r}"
    # FP4 is twice FP8 on Blackwell and three times it on Blackwell Ultra (B300 13.1 of
    # 4.5, GB300 15 of 5 PFLOP/s dense); a sparse FP4 figure would read 4x or 6x. GeForce
    # halves FP8 with FP32 accumulate but not FP4, so there FP4 is four times FP8.
    r = ratio("fp4", "fp8")
    limit = 4.2 if "GeForce" in row["name"] else 3.1
    assert r is None or r <= limit, f"fp4/fp8 = {r}"
    # INT8 runs at the FP8 rate, or twice it where FP8 accumulates at half rate
    # (GeForce Ada), and at twice the 16-bit rate on parts without FP8 (A100 312/624).
    r = ratio("int8", "fp8")
    assert r is None or r <= 2.1, f"int8/fp8 = {r}"
    r = ratio("int8", "fp16")
    assert r is None or r <= 4.2, f"int8/fp16 = {r}"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_pattern_resolves_to_its_own_row(row):
    # A pattern another row's longer pattern swallows would never select its row: the
    # pattern's own text (the shortest name it can match) must come back to it.
    for pattern in row["match"]:
        got = lookup(pattern.rstrip("$"))
        assert got is not None and got.name == row["name"], (pattern, got and got.name)


def test_row_names_are_unique():
    names = [r["name"] for r in ROWS]
    assert len(names) == len(set(names))


# --- the rows added for issue 24 item 1, by the names PyTorch reports --------------------


@pytest.mark.parametrize(("device", "row", "fp32", "bf16", "hbm"), [
    ("Tesla P100-SXM2-16GB", "NVIDIA Tesla P100 SXM2 16GB", 10.6, None, 720),
    ("Tesla P100-PCIE-16GB", "NVIDIA Tesla P100 PCIe 16GB", 9.3, None, 732),
    ("Tesla P100-PCIE-12GB", "NVIDIA Tesla P100 PCIe 12GB", 9.3, None, 540),
    ("NVIDIA A2", "NVIDIA A2", 4.53, 18.13, 200.1),
    ("NVIDIA A16", "NVIDIA A16 (per GPU)", 4.5, 17.9, 200),
    ("NVIDIA A30", "NVIDIA A30", 10.32, 165.15, 933.1),
    ("NVIDIA L20", "NVIDIA L20", 59.35, None, 864),
    ("NVIDIA H20", "NVIDIA H20", 44, 148, 4000),
    ("NVIDIA B100", "NVIDIA B100", 60.62, 1750, None),
    ("NVIDIA B300 SXM6 AC", "NVIDIA B300 (HGX)", 75, 2250, 8000),
    ("NVIDIA GB300", "NVIDIA GB300 (per Blackwell Ultra GPU)", 80, 2500, 8000),
    ("NVIDIA RTX A4000", "NVIDIA RTX A4000", 19.2, 76.7, 448),
    ("NVIDIA RTX A4500", "NVIDIA RTX A4500", 23.65, 94.62, 640),
    ("NVIDIA RTX A5000", "NVIDIA RTX A5000", 27.77, 111.08, 768),
    ("NVIDIA RTX A5500", "NVIDIA RTX A5500", 34.1, 136.4, 768),
    ("NVIDIA RTX A6000", "NVIDIA RTX A6000", 38.71, 154.8, 768),
    ("NVIDIA RTX 4000 Ada Generation", "NVIDIA RTX 4000 Ada Generation", 26.73, 106.91, 360),
    ("NVIDIA RTX 5000 Ada Generation", "NVIDIA RTX 5000 Ada Generation", 65.28, 261.12, 576),
    ("NVIDIA RTX 4500 Ada Generation", "NVIDIA RTX 4500 Ada Generation", 39.63, 158.52, 432),
    ("NVIDIA RTX 6000 Ada Generation", "NVIDIA RTX 6000 Ada Generation", 91.1, 364.25, 960),
    ("NVIDIA H200 NVL", "NVIDIA H200 NVL", None, None, 4800),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
     "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 125.95, 503.8, 1792),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
     "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 116, None, 1792),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition",
     "NVIDIA RTX PRO 6000 Blackwell Server Edition", None, 500, 1600),
])
def test_new_rows_resolve_from_the_reported_names(device, row, fp32, bf16, hbm):
    got = lookup(device)
    assert got is not None and (got.name, got.identified_by) == (row, "name")
    assert (got.peak("fp32"), got.peak("bf16"), got.bandwidth_gbps) == (fp32, bf16, hbm)


@pytest.mark.parametrize(("variant", "base"), [
    # Each is a different part (lower clocks or more memory) that an unanchored or
    # substring pattern would hand the base row's figures.
    ("NVIDIA RTX 4000 SFF Ada Generation", "NVIDIA RTX 4000 Ada Generation"),
    ("NVIDIA RTX A4000 Laptop GPU", "NVIDIA RTX A4000"),
    ("NVIDIA RTX A6000 Laptop GPU", "NVIDIA RTX A6000"),
    ("NVIDIA H200", "NVIDIA H20"),
    ("NVIDIA H20 141GB HBM3e", "NVIDIA H20"),
    ("NVIDIA GB300", "NVIDIA B300 (HGX)"),
    ("NVIDIA A2000", "NVIDIA A2"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
     "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
    ("NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 3090"),
    ("NVIDIA H200 NVL", "NVIDIA H200 SXM"),
    ("NVIDIA RTX A5500 Laptop GPU", "NVIDIA RTX A5500"),
    ("NVIDIA RTX 4500 Ada Generation Laptop GPU", "NVIDIA RTX 4500 Ada Generation"),
])
def test_anchored_patterns_keep_variants_off_the_base_row(variant, base):
    got = lookup(variant)
    assert got is None or got.name != base


def test_the_p100_has_no_fp32_accumulate_fp16_unit():
    # GP100's 2x FP16 rate accumulates in FP16; PyTorch accumulates in FP32, at the fp32
    # rate, which the roofline falls back to when fp16 is null.
    got = lookup("Tesla P100-SXM2-16GB")
    assert got.peak("fp16") is None and got.peak("fp64") == 5.3
    assert "21.2" in next(r["notes"] for r in ROWS if r["name"] == got.name)


def test_the_a16_row_is_one_of_the_boards_four_gpus():
    got = lookup("NVIDIA A16")
    assert got.peak("int8") == 35.9 and got.bandwidth_gbps == 200


# --- fp6 and fp4 -------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "fp8", "fp6", "fp4"), [
    ("NVIDIA B200", 4500, 4500, 9000),
    ("NVIDIA GB200", 5000, 5000, 10000),
    ("NVIDIA B100", 3500, None, 7000),
    ("NVIDIA B300 SXM6 AC", 4500, 4500, 13125),
    ("NVIDIA GB300", 5000, 5000, 15000),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1010, None, 2020),
])
def test_blackwell_parts_answer_fp6_and_fp4(device, fp8, fp6, fp4):
    got = lookup(device)
    assert (got.peak("fp8"), got.peak("fp6"), got.peak("fp4")) == (fp8, fp6, fp4)
    assert list(got.to_dict()["peaks"]) == list(PEAK_KEYS)


def test_parts_before_blackwell_have_no_fp4():
    for device in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"):
        got = lookup(device)
        assert got.peak("fp4") is None and got.peak("fp6") is None, device


def test_an_override_may_give_fp4(tmp_path):
    path = tmp_path / "peaks.json"
    path.write_text('{"devices": {"B200": {"fp4": 8000}, "H100": {"fp6": 1}}}')
    ov = load_overrides(path)
    assert lookup("NVIDIA B200", overrides=ov).peak("fp4") == 8000
    assert lookup("NVIDIA H100 80GB HBM3", overrides=ov).peak("fp6") == 1


def test_a_row_without_the_new_keys_is_rejected():
    row = {"name": "X", "match": ["X1"], "source": "a page, https://example.invalid",
           "peaks": {k: 1.0 for k in PEAK_KEYS if k not in ("fp6", "fp4")}}
    with pytest.raises(PeaksFileError, match=r"lacks \['fp6', 'fp4'\]"):
        peaks_table.validate_table("t.json", {"version": 1, "devices": [row]})


@pytest.mark.parametrize("memory", [0, -1, "80", True])
def test_memory_gb_must_be_a_positive_number(memory):
    row = {"name": "X", "match": ["X1"], "source": "a page, https://example.invalid",
           "peaks": dict.fromkeys(PEAK_KEYS, 1.0), "memory_gb": memory}
    with pytest.raises(PeaksFileError, match="memory_gb"):
        peaks_table.validate_table("t.json", {"version": 1, "devices": [row]})


# --- Jetson Orin and other names only properties tell apart ------------------------------

# The deviceQuery record of a Jetson Orin NX 16GB (gist atinfinity/8cede915…): CUDA names
# every Orin module "Orin".
ORIN_NX_16GB = {"name": "Orin", "computeMajor": 8, "computeMinor": 7, "numSms": 8,
                "totalGlobalMem": 15189422080}


def test_an_orin_nx_16gb_is_identified_by_its_sms_and_memory():
    got = lookup("Orin", ORIN_NX_16GB)
    assert (got.name, got.identified_by) == ("NVIDIA Jetson Orin NX 16GB (GPU)", "properties")
    assert got.peak("fp32") == 1.88
    assert "14.1 GiB" in got.identification and "8.7" in got.identification


def test_an_agx_orin_64gb_is_identified_by_its_16_sms():
    block = dict(ORIN_NX_16GB, numSms=16, totalGlobalMem=65_890_000_000)
    got = lookup("Orin", block)
    assert got.name == "NVIDIA Jetson AGX Orin 64GB (GPU)"
    assert (got.peak("fp32"), got.peak("int8")) == (5.3, 85.5)


def test_an_8gb_orin_fits_two_modules_and_gets_no_peaks_with_the_reason():
    # Orin NX 8GB and Orin Nano 8GB: 8 SMs, 8 GB, different clocks.
    block = dict(ORIN_NX_16GB, totalGlobalMem=7_900_000_000)
    assert lookup("Orin", block) is None
    why = why_no_peaks("Orin", block)
    assert "fit parts with different peaks" in why
    assert "Orin NX 8GB" in why and "Orin Nano 8GB" in why


def test_memory_no_row_of_that_size_has_excludes_the_row():
    # 16 SMs with 30 GiB is no AGX Orin 64GB; cc 8.7 has no reference to estimate from.
    block = dict(ORIN_NX_16GB, numSms=16, totalGlobalMem=32_000_000_000)
    assert lookup("Orin", block) is None
    assert "8.7 has no reference" in why_no_peaks("Orin", block)


def test_a_name_word_no_row_has_marks_a_variant_the_table_lacks():
    # The 70 W RTX 4000 SFF Ada has the 130 W card's 48 SMs but lower clocks: it is
    # estimated from the Ada reference rather than handed the 130 W card's figures.
    block = {"computeMajor": 8, "computeMinor": 9, "numSms": 48,
             "totalGlobalMem": 21_000_000_000}
    got = lookup("NVIDIA RTX 4000 SFF Ada Generation", block)
    assert got.identified_by == "estimate"
    assert got.peak("bf16") != lookup("NVIDIA RTX 4000 Ada Generation").peak("bf16")


#: Consumer NVIDIA and AMD parts: each name as torch.cuda.get_device_name() reports it
#: (ROCm's Radeon names with and without the vendor) and the row it must get by name.
CONSUMER_AND_AMD_NAMES = [
    ("NVIDIA GeForce RTX 2060", "NVIDIA GeForce RTX 2060"),
    ("NVIDIA GeForce RTX 2060 SUPER", "NVIDIA GeForce RTX 2060 SUPER"),
    ("NVIDIA GeForce RTX 2070", "NVIDIA GeForce RTX 2070"),
    ("NVIDIA GeForce RTX 2070 SUPER", "NVIDIA GeForce RTX 2070 SUPER"),
    ("NVIDIA GeForce RTX 2080", "NVIDIA GeForce RTX 2080"),
    ("NVIDIA GeForce RTX 2080 SUPER", "NVIDIA GeForce RTX 2080 SUPER"),
    ("NVIDIA TITAN RTX", "NVIDIA TITAN RTX"),
    ("NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060"),
    ("NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3060 Ti"),
    ("NVIDIA GeForce RTX 3070", "NVIDIA GeForce RTX 3070"),
    ("NVIDIA GeForce RTX 3070 Ti", "NVIDIA GeForce RTX 3070 Ti"),
    ("NVIDIA GeForce RTX 3080", "NVIDIA GeForce RTX 3080"),
    ("NVIDIA GeForce RTX 3080 Ti", "NVIDIA GeForce RTX 3080 Ti"),
    ("NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 3090 Ti"),
    ("NVIDIA GeForce RTX 4060", "NVIDIA GeForce RTX 4060"),
    ("NVIDIA GeForce RTX 4060 Ti", "NVIDIA GeForce RTX 4060 Ti"),
    ("NVIDIA GeForce RTX 4070", "NVIDIA GeForce RTX 4070"),
    ("NVIDIA GeForce RTX 4070 SUPER", "NVIDIA GeForce RTX 4070 SUPER"),
    ("NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070 Ti"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", "NVIDIA GeForce RTX 4070 Ti SUPER"),
    ("NVIDIA GeForce RTX 4080", "NVIDIA GeForce RTX 4080"),
    ("NVIDIA GeForce RTX 4080 SUPER", "NVIDIA GeForce RTX 4080 SUPER"),
    ("NVIDIA GeForce RTX 3080 Laptop GPU", "NVIDIA GeForce RTX 3080 Laptop GPU"),
    ("NVIDIA GeForce RTX 3070 Laptop GPU", "NVIDIA GeForce RTX 3070 Laptop GPU"),
    ("NVIDIA GeForce RTX 4080 Laptop GPU", "NVIDIA GeForce RTX 4080 Laptop GPU"),
    ("NVIDIA GeForce RTX 4070 Laptop GPU", "NVIDIA GeForce RTX 4070 Laptop GPU"),
    ("NVIDIA GeForce RTX 4060 Laptop GPU", "NVIDIA GeForce RTX 4060 Laptop GPU"),
    ("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
    ("NVIDIA GeForce RTX 5090 D", "NVIDIA GeForce RTX 5090 D"),
    ("NVIDIA GeForce RTX 5090D", "NVIDIA GeForce RTX 5090 D"),
    ("NVIDIA GeForce RTX 5090 D v2", "NVIDIA GeForce RTX 5090 D v2"),
    ("NVIDIA GeForce RTX 5080", "NVIDIA GeForce RTX 5080"),
    ("NVIDIA GeForce RTX 5070 Ti", "NVIDIA GeForce RTX 5070 Ti"),
    ("NVIDIA GeForce RTX 5070", "NVIDIA GeForce RTX 5070"),
    ("NVIDIA GeForce RTX 5060 Ti", "NVIDIA GeForce RTX 5060 Ti"),
    ("NVIDIA GeForce RTX 5060", "NVIDIA GeForce RTX 5060"),
    ("NVIDIA GeForce RTX 5090 Laptop GPU", "NVIDIA GeForce RTX 5090 Laptop GPU"),
    ("NVIDIA GeForce RTX 5080 Laptop GPU", "NVIDIA GeForce RTX 5080 Laptop GPU"),
    ("AMD Instinct MI100", "AMD Instinct MI100"),
    ("AMD Instinct MI210", "AMD Instinct MI210"),
    ("AMD Instinct MI300A", "AMD Instinct MI300A"),
    ("AMD Instinct MI355X", "AMD Instinct MI355X"),
    ("AMD Instinct MI355X OAM", "AMD Instinct MI355X"),
    ("AMD Instinct MI350X", "AMD Instinct MI350X"),
    ("AMD Instinct MI350 OAM", "AMD Instinct MI350X"),
    ("Radeon RX 7900 XTX", "AMD Radeon RX 7900 XTX"),
    ("AMD Radeon RX 7900 XTX", "AMD Radeon RX 7900 XTX"),
    ("Radeon RX 7900 XT", "AMD Radeon RX 7900 XT"),
    ("AMD Radeon RX 7900 XT", "AMD Radeon RX 7900 XT"),
]


@pytest.mark.parametrize(("device", "row"), CONSUMER_AND_AMD_NAMES)
def test_consumer_and_amd_rows_resolve_from_the_reported_names(device, row):
    got = lookup(device)
    assert got is not None and (got.name, got.identified_by) == (row, "name")


@pytest.mark.parametrize(("variant", "base"), [
    ("NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070"),
    ("NVIDIA GeForce RTX 4070 Laptop GPU", "NVIDIA GeForce RTX 4070"),
    ("NVIDIA GeForce RTX 3080 Ti Laptop GPU", "NVIDIA GeForce RTX 3080 Laptop GPU"),
])
def test_a_sibling_consumer_part_does_not_take_the_base_row(variant, base):
    got = lookup(variant)
    assert got is None or got.name != base


# --- derived Tensor figures: checked against a stated sibling on the same chip -----------


@pytest.mark.parametrize(("part", "sms", "ghz", "sibling", "sibling_sms", "sibling_ghz"), [
    # GA100: the A30 at the A100 SXM4 40GB's stated per-SM rate.
    ("NVIDIA A30", 56, 1.44, "NVIDIA A100 SXM4 40GB", 108, 1.41),
    # GA102 workstation: the A4500, A5000 and A5500 at the RTX A6000's.
    ("NVIDIA RTX A4500", 56, 1.65, "NVIDIA RTX A6000", 84, 1.8),
    ("NVIDIA RTX A5000", 64, 1.695, "NVIDIA RTX A6000", 84, 1.8),
    ("NVIDIA RTX A5500", 80, 1.665, "NVIDIA RTX A6000", 84, 1.8),
    # AD102 / AD104 workstation: the RTX 6000 Ada at the RTX 5000 Ada's, the RTX 4500 Ada
    # at the RTX 4000 Ada's.
    ("NVIDIA RTX 6000 Ada Generation", 142, 2.505, "NVIDIA RTX 5000 Ada Generation", 100, 2.55),
    ("NVIDIA RTX 4500 Ada Generation", 60, 2.58, "NVIDIA RTX 4000 Ada Generation", 48, 2.175),
])
def test_derived_tensor_figures_are_the_siblings_per_sm_rate(part, sms, ghz, sibling,
                                                             sibling_sms, sibling_ghz):
    row = next(r for r in ROWS if r["name"] == part)
    ref = next(r for r in ROWS if r["name"] == sibling)
    # The notes say it is derived and name the sibling whose stated figure it rests on.
    mention = sibling.replace("NVIDIA ", "").replace(" Generation", "")
    assert row["notes"].startswith("derived:") and mention in row["notes"], mention
    assert row["sms"] == sms
    # FLOP per SM per clock, from the sibling's stated dense figures: the derived row runs
    # the same (to the sources' rounding), so only SM count and clock differ.
    for key in ("tf32", "bf16", "fp16", "fp8", "int8"):
        if ref["peaks"][key] is None:
            continue
        rate = ref["peaks"][key] / (sibling_sms * sibling_ghz)
        assert row["peaks"][key] == pytest.approx(rate * sms * ghz, rel=0.005), key


@pytest.mark.parametrize(("device", "gbps"), [
    # 16 Gbps x 128 bit / 8 and 14 Gbps x 256 bit / 8 (videocardz): the memory speed of a
    # laptop part does not follow its TGP, unlike its clock.
    ("NVIDIA GeForce RTX 4070 Laptop GPU", 256),
    ("NVIDIA GeForce RTX 3070 Laptop GPU", 448),
])
def test_laptop_parts_have_the_bandwidth_a_page_states(device, gbps):
    got = lookup(device)
    assert got.identified_by == "name" and got.bandwidth_gbps == gbps
