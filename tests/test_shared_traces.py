"""The real GPU traces in ../shared/traces: every generation loads and gives sane verdicts.

device_busy is checked against an independent, deliberately naive reading of
the step spec (plain json, Python lists, no code shared with the engine).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir

pytestmark = pytest.mark.shared

STEP = re.compile(r"^ProfilerStep#(\d+)$")
DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
               "cuda_profiler_range"}
LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
HOST_STEP_CATS = {"user_annotation", "cpu_op", "Operator"}


@pytest.fixture(scope="module")
def report() -> dict:
    from conftest import SHARED_TRACES
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    return build_document(scan_logdir(str(SHARED_TRACES)))


def spans_of(report: dict, run: str) -> list[dict]:
    (r,) = [r for r in report["runs"] if r["run"] == run]
    return [s for w in r["workers"] for s in w["spans"]]


def naive_device_busy(path: Path) -> dict[int, float]:
    """Step number → device_busy, read straight from the spec's words."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(STEP.match(e["name"]).group(1)))
                   for e in events if e.get("ph") == "X" and e.get("cat") in HOST_STEP_CATS
                   and STEP.match(e.get("name", "")))
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS
                 and "correlation" in e.get("args", {})}
    acts = [(e["ts"], e["ts"] + e.get("dur", 0), e.get("args", {}).get("correlation"))
            for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS]
    last_end = [None] * len(steps)
    for s, e, corr in acts:
        t = launch_ts.get(corr, s)
        for i, (hs, he, _) in enumerate(steps):
            if hs <= t < he:
                last_end[i] = e if last_end[i] is None else max(last_end[i], e)
    bounds = []
    for i, (hs, _, _) in enumerate(steps):
        b = hs if i == 0 or last_end[i - 1] is None else max(hs, last_end[i - 1])
        bounds.append(max(b, bounds[-1]) if bounds else b)
    ends = [*bounds[1:], max(steps[-1][1], last_end[-1] or steps[-1][1])]
    merged: list[list[float]] = []
    for s, e, _ in sorted(acts):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    out = {}
    for (b, end), (_, _, n) in zip(zip(bounds, ends, strict=True), steps, strict=True):
        busy = sum(max(0.0, min(e, end) - max(s, b)) for s, e in merged)
        out[n] = busy / (end - b)
    return out


def test_every_shared_trace_loads(report, shared_traces):
    files = sorted(p.relative_to(shared_traces).as_posix()
                   for p in shared_traces.rglob("*.pt.trace.json*"))
    spans = [s for r in report["runs"] for w in r["workers"] for s in w["spans"]]
    assert sorted(s["file"] for s in spans) == files
    for s in spans:
        assert s["errors"] == [], s["file"]
        assert s["steps"], s["file"]
        for st in s["steps"]:
            assert 0 <= st["device_busy"] <= 1 + 1e-9
            idle = sum(st["idle"].values())
            assert idle + st["device_busy_us"] == pytest.approx(st["wall_us"], abs=1e-2)


def test_traces_with_steps_list_them_and_the_rest_are_one_window(report, shared_traces):
    """Without ProfilerStep#, a span is one window, or the iterations inferred from what
    repeats (tests/test_iterations.py checks how many), flagged and numbered from 0."""
    for r in report["runs"]:
        for w in r["workers"]:
            for s in w["spans"]:
                text = gzip.decompress((shared_traces / s["file"]).read_bytes()).decode()
                has_steps = '"name": "ProfilerStep#' in text or '"name":"ProfilerStep#' in text
                numbers = [st["step"] for st in s["steps"]]
                inferred = [st for st in s["steps"] if "inferred" in st["flags"]]
                if has_steps:
                    assert None not in numbers and numbers == sorted(numbers), s["file"]
                    assert not inferred, s["file"]
                elif numbers == [None]:
                    assert any("analysed as one window" in n for n in s["notes"]), s["file"]
                else:
                    assert numbers == list(range(len(numbers))) and len(numbers) >= 2, s["file"]
                    assert len(inferred) == len(numbers), s["file"]
                    assert any("iterations inferred from" in n for n in s["notes"]), s["file"]


def test_resnet_workers0_waits_for_input(report):
    spans = spans_of(report, "kineto_resnet50_v100_dataloader_workers0")
    assert len(spans) == 2
    for s in spans:
        assert s["device"] == {"kind": "cuda", "name": "Tesla V100-DGXS-32GB"}
        for st in s["steps"]:
            assert st["verdict"] in ("input-bound", "mixed")
            assert st["main_idle_cause"] == "input"
    step5 = spans[0]["steps"][0]
    idle = sum(step5["idle"].values())
    assert step5["step"] == 5
    assert idle == pytest.approx(87_300, rel=0.01)  # "87 ms of device idle"
    assert step5["idle"]["input_us"] == pytest.approx(69_300, rel=0.01)  # "69 ms in DataLoader"


def test_resnet_ns_timeunit_steady_steps_are_compute_bound(report):
    (s,) = spans_of(report, "hta_v100_resnet_ns_timeunit")
    verdicts = {st["step"]: st["verdict"] for st in s["steps"]}
    assert all(verdicts[n] == "compute-bound" for n in (102, 103, 104, 105))


def test_device_kinds(report):
    assert spans_of(report, "hta_amd_mi250_rocm_tiny")[0]["device"]["kind"] == "rocm"
    assert spans_of(report, "hta_cpu_only_gloo_rank34")[0]["device"] == {"kind": "cpu",
                                                                          "name": None}
    a100 = spans_of(report, "hta_2022_a100_rank3_of8")[0]["device"]
    assert a100 == {"kind": "cuda", "name": "NVIDIA A100-PG509-200"}


@pytest.mark.parametrize("run", [
    "kineto_resnet50_v100_dataloader_workers0",
    "kineto_resnet50_v100_dataloader_workers4",
    "hta_v100_resnet_ns_timeunit",
    "hta_a100_compiled_train_rank0_of16",
    "hta_2022_a100_rank3_of8",
    "tracelens_h100_qwen1.5_0.5b_inference",
    "hta_amd_mi250_rocm_tiny",
    "hta_sampled_2ranks_of128",
])
def test_device_busy_agrees_with_an_independent_reading_of_the_spec(report, shared_traces, run):
    for s in spans_of(report, run):
        naive = naive_device_busy(shared_traces / s["file"])
        got = {st["step"]: st["device_busy"] for st in s["steps"]}
        assert got.keys() == naive.keys()
        for n, v in naive.items():
            assert got[n] == pytest.approx(v, abs=0.01), (s["file"], n)
