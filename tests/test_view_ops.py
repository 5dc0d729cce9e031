"""The Operators view (report/views/ops.py): its figures against an independent count of
the raw trace events, on hand-made traces and on the shared real traces."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import TraceBuilder, analyse
from tb_diagnostics.report.views import ViewParamError, ViewParams, all_views
from tb_diagnostics.trace.categories import INPUT_NAME, STEP_NAME

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def ops(analysis, **kw):
    extra = kw.pop("extra", None)
    return all_views()["ops"].document(analysis, ViewParams(limit=1000, extra=extra, **kw))


def by_name(doc):
    return {(r["name"], json.dumps(r.get("input_dims"))): r for r in doc["rows"]}


def built(trace: TraceBuilder) -> TraceBuilder:
    """Two steps: linear → addmm (a kernel), a recursive aten::to, two shapes of mul."""
    t = trace
    for n, base in ((1, 0.0), (2, 1000.0)):
        t.step(n, base, 1000)
        t.op("aten::linear", base + 10, 100, **{"Input Dims": [[4, 8], [8, 8]]})
        t.op("aten::addmm", base + 20, 60, **{"Input Dims": [[8], [4, 8], [8, 8]]})
        t.launch(base + 30, 5, "gemm", base + 40, 30)
        t.op("aten::to", base + 200, 50, **{"Input Dims": [[4]]})
        t.op("aten::to", base + 210, 20, **{"Input Dims": [[4]]})
        t.launch(base + 215, 2, "copy", base + 230, 4, cat="gpu_memcpy",
                 runtime="cudaMemcpyAsync")
        t.op("aten::mul", base + 300, 10, **{"Input Dims": [[4], [4]]})
        t.op("aten::mul", base + 320, 12, **{"Input Dims": [[16], [16]]})
    return t


def test_ops_by_name_count_calls_totals_and_device_time(trace, tmp_path):
    a = analyse(built(trace), tmp_path)
    rows = {r["name"]: r for r in ops(a)["rows"]}
    lin, mm, to, mul = (rows[f"aten::{n}"] for n in ("linear", "addmm", "to", "mul"))
    assert (lin["calls"], lin["host_total_us"], lin["host_self_us"]) == (2, 200.0, 80.0)
    # The kernel is addmm's own device time and inside linear's total.
    assert (mm["device_self_us"], mm["device_total_us"]) == (60.0, 60.0)
    assert (lin["device_self_us"], lin["device_total_us"]) == (0.0, 60.0)
    # aten::to inside aten::to: its total counted once (the outer calls: 2 × 50); self
    # leaves out the inner call's runtime call (2 × 2 µs).
    assert (to["calls"], to["host_total_us"], to["host_self_us"]) == (4, 100.0, 96.0)
    assert (to["device_self_us"], to["device_total_us"]) == (8.0, 8.0)
    assert (mul["calls"], mul["host_total_us"], mul["mean_us"]) == (4, 44.0, 11.0)
    assert lin["mean_us"] == 100.0 and lin["device_mean_us"] == 30.0
    assert len(lin["rows"]) == 2 and lin["steps"] == [1, 2]


def test_ops_by_shapes_split_groups_and_step_selection(trace, tmp_path):
    a = analyse(built(trace), tmp_path)
    doc = ops(a, group="shapes")
    rows = by_name(doc)
    assert doc["group"] == "shapes"
    assert rows[("aten::mul", "[[4], [4]]")]["calls"] == 2
    assert rows[("aten::mul", "[[16], [16]]")]["host_total_us"] == 24.0
    step = by_name(ops(a, group="shapes", step="2"))
    assert step[("aten::mul", "[[16], [16]]")]["calls"] == 1
    assert step[("aten::linear", "[[4, 8], [8, 8]]")]["steps"] == [2]
    assert ops(a, step="2")["step"] == 2


def test_ops_sort_filter_page_and_errors(trace, tmp_path):
    a = analyse(built(trace), tmp_path)
    doc = ops(a, sort="-host_total_us")
    totals = [r["host_total_us"] for r in doc["rows"]]
    assert totals == sorted(totals, reverse=True) and doc["rows"][0]["name"] == "aten::linear"
    assert [r["name"] for r in ops(a, sort="name")["rows"]] == \
        ["aten::addmm", "aten::linear", "aten::mul", "aten::to"]
    doc = ops(a, q="MUL")
    assert [r["name"] for r in doc["rows"]] == ["aten::mul"] and doc["total_rows"] == 1
    doc = all_views()["ops"].document(a, ViewParams(limit=1, offset=1, sort="calls"))
    assert doc["total_rows"] == 4 and len(doc["rows"]) == 1
    with pytest.raises(ViewParamError, match="no column"):
        ops(a, sort="bogus")
    with pytest.raises(ViewParamError, match="group must be"):
        ops(a, group="kernel")
    with pytest.raises(ViewParamError, match="no module node"):
        ops(a, extra={"module": "3"})


def test_ops_under_a_module_and_their_stack(trace, tmp_path):
    t = trace
    t.step(1, 0, 1000)
    t.x("python_function", "train.py(10): step", 0, 900, **{"Python id": 1})
    t.x("python_function", "nn.Module: Net_0", 5, 400,
        **{"Python id": 2, "Python parent id": 1})
    t.op("aten::relu", 10, 30)
    t.launch(15, 3, "relu_kernel", 50, 7)
    t.op("aten::relu", 500, 20)  # outside the module
    a = analyse(t, tmp_path)
    doc = ops(a, extra={"module": "0"})
    assert doc["module"]["path"] == ["Net_0"]
    (relu,) = doc["rows"]
    assert (relu["calls"], relu["host_total_us"], relu["device_self_us"]) == (1, 30.0, 7.0)
    assert relu["stack"] == ["nn.Module: Net_0", "train.py(10): step"]
    assert ops(a)["rows"][0]["calls"] == 2 and ops(a)["stacks_recorded"]


# ---- the shared real traces: an independent count from the raw events ----------------

RUNS = ["tracelens_h100_bert_small_inference", "tracelens_h100_qwen1.5_0.5b_inference",
        "kineto_2021jan_resnet50_profiler_api", "hta_a100_alexnet_cuda_sync"]


def raw_counts(path: Path) -> dict[str, list[float]]:
    """name → [calls, host total (outermost calls of the name), device self, device total],
    from the trace JSON: ops nested by time on their thread, kernels by correlation."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X"
           and str(e.get("cat")).lower() in ("cpu_op", "operator")
           and not STEP_NAME.search(e["name"]) and not INPUT_NAME.search(e["name"])]
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("ph") == "X"
               and str(e.get("cat")).lower() in ("cuda_runtime", "cuda_driver", "runtime")
               and "correlation" in (e.get("args") or {})}
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    threads: dict[tuple, list[dict]] = defaultdict(list)
    for e in ops:
        threads[(e["pid"], e["tid"])].append(e)
        out[e["name"]][0] += 1
    for r in runtime.values():
        threads[(r["pid"], r["tid"])].append(r)
    launches = {id(r) for r in runtime.values()}
    owner: dict[int, str] = {}  # correlation → the innermost op enclosing its launch
    above: dict[int, set[str]] = {}  # correlation → every op name enclosing it
    for evs in threads.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if id(e) in launches:
                if stack and e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"]:
                    owner[e["args"]["correlation"]] = stack[-1]["name"]
                    above[e["args"]["correlation"]] = {s["name"] for s in stack}
                continue
            if not any(s["name"] == e["name"] for s in stack):
                out[e["name"]][1] += e["dur"]
            stack.append(e)
    for e in events:
        if e.get("ph") != "X" or str(e.get("cat")).lower() not in (
                "kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            continue
        corr = (e.get("args") or {}).get("correlation")
        if corr in owner:
            out[owner[corr]][2] += e["dur"]
            for name in above[corr]:  # a name twice on the stack: counted once
                out[name][3] += e["dur"]
    return out


@pytest.mark.parametrize("run", RUNS)
def test_ops_match_a_raw_count_on_shared_traces(run, tmp_path):
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    files = sorted((SHARED / run).glob("*.pt.trace.json.gz")) if SHARED.is_dir() else []
    if not files:
        pytest.skip("../shared/traces is not present")
    expected = raw_counts(files[0])
    a = SpanAnalysis(load_trace(str(files[0])))
    doc = ops(a)
    got = {r["name"]: r for r in doc["rows"]}
    assert doc["total_rows"] == len(expected) and len(got) == min(len(expected), 1000)
    for name, (calls, total, dev_self, dev_total) in expected.items():
        if name not in got:
            continue
        r = got[name]
        assert r["calls"] == calls, name
        assert r["host_total_us"] == pytest.approx(total, abs=0.01 + 1e-6 * total), name
        assert r["device_self_us"] == pytest.approx(dev_self, abs=0.01 + 1e-6 * dev_self), name
        assert r["device_total_us"] == pytest.approx(dev_total, abs=0.01 + 1e-6 * dev_total), \
            name
    # Shapes split the same calls: they add up to the name's.
    shapes = defaultdict(int)
    for r in ops(a, group="shapes")["rows"]:
        shapes[r["name"]] += r["calls"]
    for name, r in list(got.items())[:20]:
        assert shapes[name] == r["calls"]


def test_ops_and_modules_frames_of_the_api(trace, tmp_path):
    from tb_diagnostics.api import analyze

    t = built(trace)
    t.x("python_function", "nn.Module: Net_0", 5, 400, **{"Python id": 1})
    t.write(tmp_path / "log" / "run" / "worker0.1.pt.trace.json")
    report = analyze(str(tmp_path / "log"), cache=False)
    frame = report.ops_frame(sort="name")
    assert list(frame.columns[:4]) == ["run", "worker", "span", "name"]
    assert frame["name"].tolist() == ["aten::addmm", "aten::linear", "aten::mul", "aten::to"]
    assert frame.set_index("name").loc["aten::linear", "host_total_us"] == 200.0
    shapes = report.ops_frame(group="shapes", step=2)
    assert shapes["calls"].sum() == 6 and "input_dims" in shapes.columns
    mods = report.modules_frame()
    assert mods["path"].tolist() == ["Net_0"] and mods["calls"].tolist() == [1]
    under = report.ops_frame(module=int(mods["id"][0]))
    assert set(under["name"]) == {"aten::linear", "aten::addmm", "aten::to", "aten::mul"}


def test_2021_call_stack_strings_are_the_stack_and_an_inner_op_inherits_it(trace, tmp_path):
    t = trace
    t.step(1, 0, 1000)
    for k, ts in enumerate((10, 300, 600)):
        where = "train.py(7): <module>" if k < 2 else "eval.py(3): <module>"
        t.op("aten::conv2d", ts, 100, **{"Call stack": f"torch/nn/conv.py(1): forward;{where}"})
        t.op("aten::convolution", ts + 10, 50)  # no string of its own: its caller's
    doc = ops(analyse(t, tmp_path))
    rows = {r["name"]: r for r in doc["rows"]}
    for name in ("aten::conv2d", "aten::convolution"):
        r = rows[name]
        assert (r["stack_calls"], r["stacks"], r["calls"]) == (2, 2, 3), name
        assert r["stack"] == ["torch/nn/conv.py(1): forward", "train.py(7): <module>"], name


def test_the_ops_and_modules_commands(trace, tmp_path, capsys):
    from tb_diagnostics.cli import main

    t = built(trace)
    t.x("python_function", "nn.Module: Net_0", 5, 400, **{"Python id": 1})
    t.write(tmp_path / "log" / "run" / "worker0.1.pt.trace.json")
    log = str(tmp_path / "log")
    assert main(["ops", log, "--group", "shapes", "--step", "2", "--format", "json",
                 "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    span = doc["runs"][0]["workers"][0]["spans"][0]
    assert span["ops"]["group"] == "shapes" and span["ops"]["step"] == 2
    assert sum(r["calls"] for r in span["ops"]["rows"]) == 6
    assert main(["ops", log, "--sort", "name", "--format", "csv", "--no-cache"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("run,worker,span,name,input_dims,calls,host_total_us")
    assert [ln.split(",")[3] for ln in lines[1:]] == \
        ["aten::addmm", "aten::linear", "aten::mul", "aten::to"]
    assert main(["modules", log, "--no-cache"]) == 0
    assert "Net_0" in capsys.readouterr().out
    assert main(["ops", log, "--group", "kernel", "--no-cache"]) == 2


def test_step_figures_match_the_raw_ops_inside_each_step(tmp_path):
    """Per step: the calls of each op name starting inside the ProfilerStep#N interval."""
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    run = SHARED / "kineto_2021jan_resnet50_profiler_api"
    files = sorted(run.glob("*.pt.trace.json.gz")) if run.is_dir() else []
    if not files:
        pytest.skip("../shared/traces is not present")
    events = json.loads(gzip.decompress(files[0].read_bytes()))["traceEvents"]
    x = [e for e in events if e.get("ph") == "X"]
    steps = [e for e in x if STEP_NAME.search(e["name"])]
    ops_ = [e for e in x if str(e.get("cat")).lower() in ("cpu_op", "operator")
            and not STEP_NAME.search(e["name"]) and not INPUT_NAME.search(e["name"])]
    a = SpanAnalysis(load_trace(str(files[0])))
    for st in steps[:3]:
        n = int(STEP_NAME.search(st["name"]).group(1))
        want: dict[str, int] = defaultdict(int)
        for e in ops_:
            if st["ts"] <= e["ts"] < st["ts"] + st["dur"]:
                want[e["name"]] += 1
        got = {r["name"]: r["calls"] for r in ops(a, step=str(n))["rows"]}
        assert got == dict(want), n
