"""The Kernels view (report/views/kernels.py): its figures against an independent count of
the raw trace events, on hand-made traces and on the shared real traces."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conftest import TraceBuilder, analyse
from tb_diagnostics.analysis.cost.occupancy import sm_limits, theoretical_occupancy
from tb_diagnostics.analysis.views.kernels import is_tensor_core_kernel
from tb_diagnostics.report.views import ViewParamError, ViewParams, all_views

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936, "numSms": 108,
        "sharedMemPerBlockOptin": 166912}
GEMM = "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_bf16_128x128_32x3_tn_align8>"
ADD = "void at::native::vectorized_elementwise_kernel<4, add>"


def kernels(analysis, **kw):
    return all_views()["kernels"].document(analysis, ViewParams(limit=1000, **kw))


def _kernel(t: TraceBuilder, grid, block, regs, smem, occ) -> None:
    t.events[-1].setdefault("args", {}).update({
        "grid": grid, "block": block, "registers per thread": regs, "shared memory": smem,
        "est. achieved occupancy %": occ})


def built() -> TraceBuilder:
    """Two steps; a matmul launches a GEMM, an add launches an elementwise kernel twice
    (two grids), a copy op launches the same elementwise kernel once on another stream."""
    t = TraceBuilder(device_properties=[A100])
    for n, base in ((1, 0.0), (2, 1000.0)):
        t.step(n, base, 1000)
        t.op("aten::mm", base + 10, 100, **{"Input Dims": [[64, 64], [64, 64]],
                                             "Input type": ["c10::BFloat16", "c10::BFloat16"]})
        t.launch(base + 20, 5, GEMM, base + 40, 30 + n)
        _kernel(t, [4, 4, 1], [128, 1, 1], 232, 49152, 1)
        t.op("aten::add", base + 200, 50)
        t.launch(base + 210, 5, ADD, base + 230, 4)
        _kernel(t, [2048, 1, 1], [128, 1, 1], 20, 0, 100)
        t.launch(base + 220, 5, ADD, base + 240, 6)
        _kernel(t, [64, 1, 1], [128, 1, 1], 20, 0, 4)
        t.op("aten::copy_", base + 300, 50)
        t.launch(base + 310, 5, ADD, base + 330, 2, stream=13)
        _kernel(t, [2048, 1, 1], [128, 1, 1], 20, 0, 100)
    return t


def test_kernels_by_name_count_calls_times_and_the_commonest_configuration(tmp_path):
    a = analyse(built(), tmp_path)
    doc = kernels(a)
    rows = {r["name"]: r for r in doc["rows"]}
    gemm, add = rows[GEMM], rows[ADD]
    assert (gemm["calls"], gemm["total_us"], gemm["min_us"], gemm["max_us"]) == (2, 63.0, 31.0,
                                                                               32.0)
    assert gemm["mean_us"] == 31.5
    assert (add["calls"], add["total_us"], add["min_us"], add["max_us"]) == (6, 24.0, 2.0, 6.0)
    assert add["share_pct"] == round(100 * 24 / 87, 2) and gemm["share_pct"] == round(
        100 * 63 / 87, 2)
    assert add["streams"] == sorted({7, 13} | set(add["streams"])) and len(add["streams"]) == 2
    assert 13 in add["streams"] and gemm["streams"] == [s for s in add["streams"] if s != 13]
    # Two configurations of the add kernel: the commonest (4 of 6 calls) is shown.
    assert (add["configs"], add["config_calls"], add["grid"], add["occupancy_pct"]) == (
        2, 4, [2048, 1, 1], 100.0)
    assert (gemm["grid"], gemm["block"], gemm["registers_per_thread"],
            gemm["shared_memory_bytes"], gemm["occupancy_pct"]) == ([4, 4, 1], [128, 1, 1],
                                                                   232, 49152, 1.0)
    # Theoretical from the rules: 232 registers → 7424 a warp, 16384 // 7424 = 2 warps a
    # sub-partition, 8 an SM: 2 blocks of 4 warps; 50176 B a block → 3 by shared memory.
    occ = theoretical_occupancy(sm_limits(A100), 128, 232, 49152)
    assert occ.blocks == 2 and gemm["theoretical_occupancy_pct"] == round(occ.pct, 1) == 12.5
    assert gemm["occupancy_limited_by"] == ["registers"]
    assert gemm["blocks_per_sm"] == round(16 / 108, 2)
    assert gemm["tensor_core"] is True and add["tensor_core"] is False
    assert gemm["precision"] == "bf16"
    # Launching ops, commonest first; kernels and their ops to open.
    assert add["ops"] == [{"name": "aten::add", "calls": 4}, {"name": "aten::copy_", "calls": 2}]
    assert len(add["rows"]) == 3 and add["steps"] == [1, 1, 1]
    assert [a.model.name_of(r) for r in add["op_rows"]] == ["aten::add", "aten::add",
                                                           "aten::copy_"]
    assert doc["device"]["compute_capability"] == "8.0" and doc["device"]["sms"] == 108
    assert doc["totals"] == {"calls": 8, "total_us": 87.0, "tensor_core_us": 63.0}


def test_kernels_by_launching_op_and_by_step(tmp_path):
    a = analyse(built(), tmp_path)
    by_op = {(r["name"], r["op"]): r for r in kernels(a, group="op")["rows"]}
    assert by_op[(ADD, "aten::add")]["calls"] == 4 and by_op[(ADD, "aten::copy_")]["calls"] == 2
    assert by_op[(GEMM, "aten::mm")]["total_us"] == 63.0
    step2 = {r["name"]: r for r in kernels(a, step="2")["rows"]}
    assert step2[GEMM]["calls"] == 1 and step2[GEMM]["total_us"] == 32.0
    assert step2[ADD]["calls"] == 3 and step2[ADD]["steps"] == [2, 2, 2]


def test_sort_filter_and_bad_parameters(tmp_path):
    a = analyse(built(), tmp_path)
    assert [r["name"] for r in kernels(a, sort="calls")["rows"]] == [GEMM, ADD]
    assert [r["name"] for r in kernels(a, sort="-registers_per_thread")["rows"]] == [GEMM, ADD]
    doc = kernels(a, q="ELEMENTWISE")
    assert doc["total_rows"] == 1 and doc["rows"][0]["name"] == ADD
    with pytest.raises(ViewParamError):
        kernels(a, sort="nope")
    with pytest.raises(ViewParamError):
        kernels(a, group="shapes")
    with pytest.raises(ViewParamError):
        kernels(a, step="9")


def test_no_device_properties_no_theoretical_figure(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.op("aten::add", 10, 50)
    t.launch(20, 5, ADD, 30, 4)
    _kernel(t, [8, 1, 1], [256, 1, 1], 16, 0, 6)
    (row,) = kernels(analyse(t, tmp_path))["rows"]
    assert row["occupancy_pct"] == 6.0 and row["theoretical_occupancy_pct"] is None
    assert "no deviceProperties" in row["theoretical_note"]


def test_cpu_only_trace_has_no_kernels(cpu_trace, tmp_path):
    cpu_trace.step(1, 0, 100)
    cpu_trace.op("aten::add", 10, 50)
    doc = kernels(analyse(cpu_trace, tmp_path))
    assert doc["rows"] == [] and doc["totals"]["calls"] == 0


def test_tensor_core_names():
    for name in (GEMM, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                 "volta_h884gemm_64x64_ldg8_nn", "nvjet_tst_128x256_64x4_1x2_h_bz_TNT",
                 "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>",
                 "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc"):
        assert is_tensor_core_kernel(name), name
    for name in ("volta_sgemm_128x64_nn", "void cutlass::Kernel<cutlass_80_simt_sgemm_128x32>",
                 ADD, "void gemmk1_kernel<float, 256, 5, cublasGemvTensorStridedBatched>"):
        assert not is_tensor_core_kernel(name), name


def _raw(path: Path) -> tuple[dict, dict]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    calls, total = Counter(), defaultdict(float)
    configs: dict[str, Counter] = defaultdict(Counter)
    blocks_per_sm.clear()
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "Kernel"):
            continue
        a = e.get("args") or {}
        calls[e["name"]] += 1
        total[e["name"]] += e.get("dur", 0)
        key = json.dumps([a.get("grid"), a.get("block"), a.get("registers per thread"),
                          a.get("shared memory"), a.get("est. achieved occupancy %")])
        configs[e["name"]][key] += 1
        blocks_per_sm[key] = a.get("blocks per SM")
    return {n: (calls[n], total[n]) for n in calls}, configs


#: The raw "blocks per SM" of each configuration read by the last _raw().
blocks_per_sm: dict[str, float | None] = {}

RUNS = ["hta_a100_nccl_train_rank0_of2", "tracelens_h100_owlv2_large_inference",
        "hta_v100_resnet_ns_timeunit", "kineto_2021jan_resnet50_profiler_api",
        "hta_2022_a100_rank3_of8"]


@pytest.mark.parametrize("run", RUNS)
def test_kernels_match_a_raw_count_on_shared_traces(run):
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    files = sorted((SHARED / run).glob("*.pt.trace.json.gz")) if SHARED.is_dir() else []
    if not files:
        pytest.skip("../shared/traces is not present")
    expected, configs = _raw(files[0])
    a = SpanAnalysis(load_trace(str(files[0])))
    doc = kernels(a)
    got = {r["name"]: r for r in doc["rows"]}
    assert doc["total_rows"] == len(expected) and doc["totals"]["calls"] == sum(
        c for c, _ in expected.values())
    for name, (n, total) in expected.items():
        r = got[name]
        assert r["calls"] == n, name
        assert r["total_us"] == pytest.approx(total, rel=1e-6, abs=0.01), name
        # The configuration shown is the commonest of the raw events (counts may tie).
        top = configs[name].most_common()
        shown = json.dumps([r["grid"], r["block"], r["registers_per_thread"],
                            r["shared_memory_bytes"],
                            None if r["occupancy_pct"] is None else int(r["occupancy_pct"])])
        assert configs[name][shown] == top[0][1] == r["config_calls"], name
        assert r["configs"] == len(configs[name]), name
        # Blocks per SM: the grid over the part's SMs, as Kineto writes it (6 digits).
        raw = blocks_per_sm[shown]
        if raw is not None and r["blocks_per_sm"] is not None:
            assert r["blocks_per_sm"] == pytest.approx(raw, abs=0.006), name


def test_cli_json_csv_and_the_api_frame(tmp_path, capsys):
    import csv
    import io

    import tb_diagnostics
    from tb_diagnostics.cli import main

    built().write(tmp_path / "log" / "run" / "w.1.pt.trace.json")
    logdir = str(tmp_path / "log")
    assert main(["kernels", logdir, "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    view = doc["runs"][0]["workers"][0]["spans"][0]["kernels"]
    assert {r["name"]: r["calls"] for r in view["rows"]} == {GEMM: 2, ADD: 6}
    assert main(["kernels", logdir, "--format", "csv", "--group", "op", "--no-cache"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {(r["name"], r["op"]): r["calls"] for r in rows} == {
        (GEMM, "aten::mm"): "2", (ADD, "aten::add"): "4", (ADD, "aten::copy_"): "2"}
    assert main(["kernels", logdir, "--step", "1", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "step 1" in text and "cc 8.0" in text and "aten" not in text.split("name")[0]
    pytest.importorskip("pandas")
    frame = tb_diagnostics.analyze(logdir, cache=False).kernels_frame()
    assert list(frame.columns[:5]) == ["run", "worker", "span", "name", "op"]
    assert dict(zip(frame["name"], frame["calls"], strict=True)) == {GEMM: 2, ADD: 6}
