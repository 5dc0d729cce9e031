"""The Modules view (report/views/modules.py): the nn.Module tree against the raw
``nn.Module`` frames, on hand-made traces and the shared H100 traces."""

from __future__ import annotations

import bisect
import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import analyse
from tb_diagnostics.report.views import ViewParamError, ViewParams, all_views

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def modules(analysis, **kw):
    extra = kw.pop("extra", None)
    return all_views()["modules"].document(analysis, ViewParams(limit=1000, extra=extra, **kw))


def frame(t, name, ts, dur, pid_):
    return t.x("python_function", f"nn.Module: {name}", ts, dur, **{"Python id": pid_})


def built(trace):
    """Two steps of Net_0 → (Linear_0, Block_0 → Linear_1), kernels launched in each."""
    t = trace
    for n, base in ((1, 0.0), (2, 1000.0)):
        t.step(n, base, 1000)
        frame(t, "Net_0", base + 10, 500, 1 + 10 * n)
        frame(t, "Linear_0", base + 20, 100, 2 + 10 * n)
        t.op("aten::linear", base + 25, 80)
        t.launch(base + 30, 5, "gemm", base + 40, 30)
        frame(t, "Block_0", base + 200, 200, 3 + 10 * n)
        frame(t, "Linear_1", base + 210, 50, 4 + 10 * n)
        t.op("aten::linear", base + 215, 30)
        t.launch(base + 220, 5, "gemm", base + 230, 20 if n == 1 else 40)
        t.launch(base + 450, 5, "add", base + 460, 3)  # in Net_0 only
    return t


def test_module_tree_calls_host_and_device_time(trace, tmp_path):
    a = analyse(built(trace), tmp_path)
    doc = modules(a)
    assert doc["modules_recorded"] and doc["nodes"] == 4 and doc["omitted"] == 0
    rows = {r["path"]: r for r in doc["rows"]}
    # Pre-order, children busiest (host) first: Block_0 (200 µs) before Linear_0 (100 µs).
    assert [r["path"] for r in doc["rows"]] == [
        "Net_0", "Net_0 / Block_0", "Net_0 / Block_0 / Linear_1", "Net_0 / Linear_0"]
    net, lin1 = rows["Net_0"], rows["Net_0 / Block_0 / Linear_1"]
    assert (net["calls"], net["host_us"], net["host_self_us"]) == (2, 1000.0, 400.0)
    assert net["device_us"] == 2 * 30 + 20 + 40 + 2 * 3 and net["device_self_us"] == 6.0
    assert (lin1["calls"], lin1["host_us"], lin1["device_us"], lin1["depth"]) == (2, 100.0, 60.0, 2)
    assert rows["Net_0 / Block_0"]["parent"] == net["id"]
    step = {r["path"]: r for r in modules(a, step="2")["rows"]}
    assert step["Net_0 / Block_0 / Linear_1"]["device_us"] == 40.0
    assert step["Net_0"]["calls"] == 1


def test_module_tree_caps_and_filter(trace, tmp_path):
    a = analyse(built(trace), tmp_path)
    doc = modules(a, extra={"depth": "2"})
    assert [r["path"] for r in doc["rows"]] == ["Net_0", "Net_0 / Block_0", "Net_0 / Linear_0"]
    assert doc["omitted"] == 1 and doc["rows"][1]["children_omitted"] == 1
    doc = modules(a, extra={"children": "1"})
    assert doc["rows"][0]["children_omitted"] == 1 and doc["omitted"] == 1
    doc = modules(a, q="linear", sort="host_us")
    assert [r["name"] for r in doc["rows"]] == ["Linear_1", "Linear_0"]
    with pytest.raises(ViewParamError, match="no column"):
        modules(a, sort="bogus")


def test_a_module_row_opens_the_ops_under_it(trace, tmp_path):
    a = analyse(built(trace), tmp_path)
    lin1 = next(r for r in modules(a)["rows"] if r["name"] == "Linear_1")
    ops = all_views()["ops"].document(a, ViewParams(extra={"module": str(lin1["id"])}))
    (row,) = ops["rows"]
    assert (row["name"], row["calls"], row["host_total_us"], row["device_self_us"]) == \
        ("aten::linear", 2, 60.0, 60.0)


def test_a_trace_without_modules_says_so(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.op("aten::mm", 10, 20)
    a = analyse(trace, tmp_path)
    doc = modules(a)
    assert not doc["modules_recorded"] and doc["rows"] == []
    assert "with_stack" in all_views()["modules"].text(doc)


# ---- the shared H100 traces: module time equals the frames' durations ----------------

RUNS = ["tracelens_h100_bert_small_inference", "tracelens_h100_qwen1.5_0.5b_inference",
        "tracelens_h100_timesformer_inference", "tracelens_h100_owlv2_large_inference"]


def raw_modules(path: Path) -> dict[str, list[float]]:
    """Module path → [calls, summed duration, device µs launched inside], nesting
    ``nn.Module`` frames by time on their thread; a kernel is inside a frame when its
    runtime call (same correlation) starts within the frame on the frame's thread."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    frames = [e for e in events if e.get("ph") == "X" and e.get("cat") == "python_function"
              and e["name"].startswith("nn.Module: ")]
    device = {e["args"]["correlation"]: e["dur"] for e in events
              if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
              and "correlation" in (e.get("args") or {})}
    launches: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") \
                and corr in device:
            launches[(e["pid"], e["tid"])].append((e["ts"], device[corr]))
    prefix: dict[tuple, tuple[list[float], list[float]]] = {}
    for key, ls in launches.items():
        ls.sort()
        sums = [0.0]
        for _, d in ls:
            sums.append(sums[-1] + d)
        prefix[key] = ([t for t, _ in ls], sums)
    threads: dict[tuple, list[dict]] = defaultdict(list)
    for e in frames:
        threads[(e["pid"], e["tid"])].append(e)
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for key, evs in threads.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        ts, sums = prefix.get(key, ([], [0.0]))
        stack: list[tuple[dict, str]] = []
        for e in evs:
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]:
                stack.pop()
            name = e["name"].removeprefix("nn.Module: ")
            path = f"{stack[-1][1]} / {name}" if stack else name
            out[path][0] += 1
            out[path][1] += e["dur"]
            lo = bisect.bisect_left(ts, e["ts"])
            hi = bisect.bisect_right(ts, e["ts"] + e["dur"])
            out[path][2] += sums[hi] - sums[lo]
            stack.append((e, path))
    return out


@pytest.mark.parametrize("run", RUNS)
def test_module_time_is_the_frames_duration_on_shared_traces(run):
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    files = sorted((SHARED / run).glob("*.pt.trace.json.gz")) if SHARED.is_dir() else []
    if not files:
        pytest.skip("../shared/traces is not present")
    expected = raw_modules(files[0])
    a = SpanAnalysis(load_trace(str(files[0])))
    doc = modules(a, extra={"depth": "1000", "children": "1000"})
    got = {r["path"]: r for r in doc["rows"]}
    assert doc["nodes"] == len(expected) and doc["omitted"] == 0
    for path, (calls, host, dev) in list(expected.items())[:1000]:
        assert got[path]["calls"] == calls, path
        assert got[path]["host_us"] == pytest.approx(host, abs=0.01), path
        assert got[path]["device_us"] == pytest.approx(dev, abs=0.01), path
    roots = [r for r in doc["rows"] if r["parent"] < 0]
    # The device time launched inside the roots is at most the span's device time.
    device = sum(e["dur"] for e in json.loads(gzip.decompress(files[0].read_bytes()))
                 ["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert sum(r["device_us"] for r in roots) <= device + 0.01


def test_frames_on_a_lane_of_their_own_enclose_their_process_calls(trace, tmp_path):
    t = trace
    t.step(1, 0, 1000)
    t.x("python_function", "nn.Module: Net_0", 10, 500, tid=999, **{"Python id": 1})
    t.op("aten::mm", 20, 100)
    t.launch(30, 5, "gemm", 40, 25)
    t.op("aten::mm", 600, 50)  # after the frame
    a = analyse(t, tmp_path)
    (net,) = modules(a)["rows"]
    assert (net["calls"], net["host_us"], net["device_us"]) == (1, 500.0, 25.0)
    ops = all_views()["ops"].document(a, ViewParams(extra={"module": str(net["id"])}))
    assert [(r["name"], r["calls"]) for r in ops["rows"]] == [("aten::mm", 1)]
