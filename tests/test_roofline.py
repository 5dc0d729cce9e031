"""The roofline: op groups' FLOPs, bytes and device time against the device's peaks, the
step figures (FLOPs, achieved TFLOP/s, FLOP utilisation, busy split) and ``--peaks``."""

from __future__ import annotations

import json

import pytest
from rules.conftest import TraceBuilder, shared_analysis

from tb_diagnostics.analysis.views.op_costs import op_costs
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.cli import main
from tb_diagnostics.report.document import step_document
from tb_diagnostics.report.roofline import add_step_roofline, roofline_section

BF16, F32 = "c10::BFloat16", "float"
H100_BF16, H100_TF32, H100_HBM = 989.4, 494.7, 3350.0  # TFLOP/s, GB/s (shipped table)


def _section(b: TraceBuilder):
    a = b.analysis()
    steps = [step_document(w) for w in a.windows]
    add_step_roofline(steps, a)
    return a, roofline_section(a), steps


def test_a_bf16_gemm_against_the_h100_roofline(tmp_path):
    m, k, n = 2048, 1024, 4096
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 30, dims=[[m, k], [k, n]], types=[BF16, BF16])
    b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 12, 50, 100)
    _, sec, steps = _section(b)
    (op,) = sec["ops"]
    flops = 2.0 * m * n * k
    nbytes = (m * k + k * n + m * n) * 2
    assert op["flops"] == pytest.approx(flops, rel=1e-3)
    assert op["bytes"] == pytest.approx(nbytes, rel=1e-3)
    assert op["precision"] == "bf16" and op["peak_precision"] == "bf16"
    assert op["device_us"] == 100.0 and op["calls"] == 1
    assert op["intensity"] == pytest.approx(flops / nbytes, rel=1e-3)
    assert op["achieved_tflops"] == pytest.approx(flops / 100e-6 / 1e12, rel=1e-3)
    ideal_us = max(flops / (H100_BF16 * 1e6), nbytes / (H100_HBM * 1e3))
    assert op["ideal_us"] == pytest.approx(ideal_us, abs=1e-3)
    assert op["roofline_pct"] == pytest.approx(ideal_us / 100, abs=1e-4)
    assert op["bound"] == "compute"  # 745 FLOP/B, above the 295 FLOP/B ridge
    assert op["rows"] and op["steps"] == [1]
    assert sec["device"]["name"] == "NVIDIA H100 SXM5 80GB" and sec["device"]["source"]
    (s,) = steps
    assert s["flops"] == pytest.approx(flops, rel=1e-3)
    wall = s["wall_us"]
    assert s["achieved_tflops"] == pytest.approx(flops / (wall * 1e6), rel=1e-3)
    assert s["flop_utilisation"] == pytest.approx(flops / (wall * 1e6) / H100_BF16, rel=1e-3)
    assert s["flop_precision"] == "bf16"
    assert s["busy_compute_bound_us"] == 100.0 and s["busy_memory_bound_us"] == 0.0
    assert s["busy_unmodelled_us"] == 0.0


def test_linear_counts_its_addmm_once_and_the_bias_seed_copy_goes_with_it(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("aten::linear", 10, 100, dims=[[64, 256], [512, 256], [512]], types=[BF16] * 3)
    b.op("aten::t", 12, 2, dims=[[512, 256]], types=[BF16])
    b.op("aten::addmm", 20, 80, dims=[[512], [64, 256], [256, 512], [], []],
         types=[BF16, BF16, BF16, "Scalar", "Scalar"])
    b.launch("Memcpy DtoD (Device -> Device)", 22, 200, 5, api="cudaMemcpyAsync", cat="gpu_memcpy")
    b.launch("sm90_gemm_bf16", 40, 210, 20)
    _, sec, steps = _section(b)
    (op,) = sec["ops"]
    assert op["name"] == "aten::addmm" and op["calls"] == 1
    assert op["flops"] == pytest.approx(2.0 * 64 * 512 * 256 + 64 * 512, rel=1e-3)
    assert op["device_us"] == 25.0  # the GEMM and its bias seed copy
    assert steps[0]["flops"] == op["flops"]


def test_fp32_inputs_on_a_tf32_kernel_take_the_tf32_peak(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 30, dims=[[4096, 4096], [4096, 4096]], types=[F32, F32])
    b.launch("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16", 12, 50, 800)
    b.op("aten::mm", 50, 30, dims=[[4096, 4096], [4096, 8192]], types=[F32, F32])
    b.launch("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8", 52, 900, 90)
    _, sec, _ = _section(b)
    by_kernel = {o["input_dims"][1][1]: o for o in sec["ops"]}
    assert by_kernel[4096]["precision"] == "tf32" and by_kernel[4096]["peak_precision"] == "tf32"
    assert by_kernel[8192]["precision"] == "fp32"  # plain fp32 on the CUDA cores
    ideal = 2.0 * 4096**3 / (H100_TF32 * 1e6)
    assert by_kernel[4096]["ideal_us"] == pytest.approx(ideal, abs=1e-3)


def test_elementwise_ops_are_memory_bound_on_the_vector_peak(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("aten::add", 10, 30, dims=[[1024, 1024], [1024, 1024], []], types=[BF16, BF16, "Scalar"])
    b.launch("vectorized_elementwise_kernel", 12, 50, 10)
    _, sec, steps = _section(b)
    (op,) = sec["ops"]
    n = 1024 * 1024
    assert op["flops"] == n and op["bytes"] == pytest.approx(3 * n * 2, rel=1e-3)
    assert op["bound"] == "memory" and op["peak_precision"] == "fp32"
    assert op["ideal_us"] == pytest.approx(3 * n * 2 / (H100_HBM * 1e3), abs=1e-3)
    assert steps[0]["busy_memory_bound_us"] == 10.0


def test_unmodelled_ops_and_unknown_devices_say_so(tmp_path):
    b = TraceBuilder(tmp_path, device_properties=[{"id": 0, "name": "Mystery GPU 9000"}])
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 30, dims=[[64, 64], [64, 64]], types=[BF16, BF16])
    b.launch("gemm", 12, 50, 10)
    b.op("my_lib::fancy_op", 60, 30)
    b.launch("fancy_kernel", 62, 100, 40)
    _, sec, steps = _section(b)
    assert sec["device"]["name"] == "Mystery GPU 9000"
    assert set(sec["device"]["peaks"].values()) == {None}
    assert any("no peak figures for Mystery GPU 9000" in n for n in sec["notes"])
    assert sec["ops"][0]["flops"] == 2.0 * 64**3 and sec["ops"][0]["bound"] is None
    # No shapes recorded for fancy_op: not even a memory lower bound.
    assert sec["unmodelled"] == [{"name": "my_lib::fancy_op", "reason": "no cost model for this op",
                                  "calls": 1, "device_us": 40.0, "lower_bound_bytes": None,
                                  "lower_bound_us": None}]
    assert steps[0]["flop_utilisation"] is None and steps[0]["busy_compute_bound_us"] is None
    assert steps[0]["flops"] == 2.0 * 64**3


def test_without_shapes_there_are_no_flops(tmp_path):
    builder = TraceBuilder(tmp_path)
    builder.step(1, 0, 1000)
    builder.op("aten::mm", 10, 30)
    builder.launch("gemm", 12, 50, 10)
    _, sec, steps = _section(builder)
    assert not sec["shapes_recorded"] and sec["ops"] == []
    assert "record_shapes was off: no FLOPs" in " ".join(sec["notes"])
    assert steps[0]["flops"] == 0


def _cpu_log(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "cpu", device_properties=[])
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 500, dims=[[512, 512], [512, 512]], types=[F32, F32])
    b.write()
    return tmp_path / "log"


def test_peaks_file_gives_a_cpu_trace_a_roofline(tmp_path, monkeypatch, capsys):
    logdir = _cpu_log(tmp_path)
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"devices": {"cpu": {"fp32": 2.0, "hbm_gbps": 100}}}))
    # Set (to "unset") so that the value --peaks writes is undone after the test.
    monkeypatch.setenv("TB_DIAGNOSTICS_PEAKS", "")
    assert main(["report", str(logdir), "--format", "json", "--no-cache",
                 "--peaks", str(peaks)]) == 0
    span = json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["spans"][0]
    (op,) = span["roofline"]["ops"]
    flops = 2.0 * 512**3
    assert op["device_us"] == 500.0 and op["flops"] == pytest.approx(flops, rel=1e-3)
    assert op["ideal_us"] == pytest.approx(flops / 2e6, rel=1e-3)
    assert span["roofline"]["device"]["peaks"]["fp32"] == 2.0
    assert span["roofline"]["device"]["source"].startswith("override: ")
    assert span["steps"][0]["flop_utilisation"] == pytest.approx(
        flops / (span["steps"][0]["wall_us"] * 1e6) / 2.0, rel=1e-3)


def test_a_bad_peaks_file_is_a_clear_error(tmp_path, monkeypatch, capsys):
    logdir = _cpu_log(tmp_path)
    bad = tmp_path / "peaks.json"
    bad.write_text('{"devices": {"cpu": {"fp32": -1}}}')
    # Set (to "unset") so that the value --peaks writes is undone after the test.
    monkeypatch.setenv("TB_DIAGNOSTICS_PEAKS", "")
    assert main(["report", str(logdir), "--no-cache", "--peaks", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err


def test_a_bad_peaks_env_file_is_noted_not_fatal(tmp_path, monkeypatch, capsys):
    logdir = _cpu_log(tmp_path)
    monkeypatch.setenv("TB_DIAGNOSTICS_PEAKS", str(tmp_path / "missing.json"))
    assert main(["report", str(logdir), "--format", "json", "--no-cache"]) == 0
    span = json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["spans"][0]
    assert any("peak overrides ignored" in n for n in span["roofline"]["notes"])
    assert span["steps"][0]["flops"] > 0


H100_RUNS = ["tracelens_h100_bert_small_inference", "tracelens_h100_owlv2_large_inference",
             "tracelens_h100_qwen1.5_0.5b_inference", "tracelens_h100_timesformer_inference"]


@pytest.mark.shared
@pytest.mark.parametrize("run", H100_RUNS)
def test_shared_h100_products_carry_flops(run):
    a = shared_analysis(run)
    rf = roofline(a)
    families = {f.group.cost.family for f in rf.figures if f.modelled and f.flops > 0}
    assert "matmul" in families
    if run != "tracelens_h100_qwen1.5_0.5b_inference":
        assert families & {"conv", "attention"} or run.endswith("bert_small_inference")
    assert rf.peaks is not None and rf.peaks.name == "NVIDIA H100 SXM5 80GB"
    # bf16 models: the products' FLOPs are bf16 (qwen's rotary embedding runs small fp32 bmm's).
    by_precision: dict[str, float] = {}
    for f in rf.figures:
        if f.modelled and f.group.cost.tensor_op:
            by_precision[f.precision] = by_precision.get(f.precision, 0.0) + f.flops
    assert max(by_precision, key=by_precision.get) == "bf16"
    assert set(rf.step_precision) == {"bf16"}
    # Every op call carries a cost or a reason, and no product is counted twice.
    oc = op_costs(a)
    names = {a.model.name_of(int(r)) for r in oc.rows}
    assert "aten::linear" not in names and "aten::matmul" not in names


@pytest.mark.shared
def test_owlv2_step_has_a_flop_utilisation():
    a = shared_analysis("tracelens_h100_owlv2_large_inference")
    steps = [step_document(w) for w in a.windows]
    add_step_roofline(steps, a)
    (s,) = steps
    assert 0 < s["flop_utilisation"] <= 1
    families = {o["family"] for o in roofline_section(a)["ops"]}
    assert {"matmul", "conv"} <= families
