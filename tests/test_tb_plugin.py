"""The TensorBoard plugin's routes, through werkzeug's test client.

Small hand-written runs check shapes, numbers and error cases exactly; the
shared real traces check that real GPU runs come through whole.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import pytest
from tensorboard import program
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tensorboard.plugins.core import core_plugin
from werkzeug.test import Client

from conftest import TraceBuilder
from tb_diagnostics.report.document import span_document
from tb_diagnostics.tb_plugin import DiagnosticsPlugin, resolve_logdir

BASE = "/data/plugin/diagnostics"
RESNET = "kineto_resnet50_v100_dataloader_workers0"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    # The plugin caches parsed traces under TB_DIAGNOSTICS_CACHE: keep tests' apart.
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path_factory.mktemp("cache")))


def small_run(trace: TraceBuilder, steps: int = 3) -> TraceBuilder:
    """``steps`` steps of 1000 µs: one addmm launching a 300 µs kernel and a DtoD copy."""
    for n in range(steps):
        t = 100 + n * 1000
        trace.step(n + 1, t, 1000)
        trace.x("user_annotation", "forward", t + 10, 900)
        trace.op("aten::addmm", t + 20, 200)
        trace.launch(t + 30, 20, "Memcpy DtoD (Device -> Device)", t + 60, 5,
                     runtime="cudaMemcpyAsync", cat="gpu_memcpy")
        trace.launch(t + 60, 20, "volta_sgemm_64x64_nn", t + 100, 300)
        trace.op("aten::relu", t + 300, 50)
    return trace


def tb_app(argv: list[str]) -> Client:
    """TensorBoard's real WSGI app (flag parsing, routing, security middleware), no server."""
    tb = program.TensorBoard(plugins=[core_plugin.CorePluginLoader, DiagnosticsPlugin])
    tb.configure(argv=["tensorboard", *argv])
    app = application.TensorBoardWSGIApp(tb.flags, tb.plugin_loaders, None,
                                         tb.assets_zip_provider, None)
    return Client(app)


def plugin_client(logdir: Path | str) -> tuple[DiagnosticsPlugin, Client]:
    ctx = base_plugin.TBContext(logdir=str(logdir), flags=argparse.Namespace(logdir_spec=""))
    plugin = DiagnosticsPlugin(ctx)
    return plugin, tb_app(["--logdir", str(logdir)])


def get_ready(client: Client, url: str, timeout: float = 60.0):
    """GET until the route stops answering 202 (the span is loading)."""
    deadline = time.monotonic() + timeout
    seen_202 = False
    while True:
        r = client.get(url)
        if r.status_code != 202:
            r.seen_202 = seen_202
            return r
        seen_202 = True
        body = r.get_json()
        assert body["status"] == "loading"
        assert {"stage", "fraction", "file", "run", "worker", "span"} <= set(body["progress"])
        assert time.monotonic() < deadline, "span never finished loading"
        time.sleep(0.05)


@pytest.fixture
def logdir(tmp_path, trace) -> Path:
    d = tmp_path / "log"
    small_run(trace).write(d / "run_a" / "worker0.100.pt.trace.json")
    small_run(trace).write(d / "run_a" / "worker0.200.pt.trace.json.gz", gz=True)
    small_run(TraceBuilder([{"id": 0, "name": "Test GPU"}]), 2).write(
        d / "nested" / "run_b" / "rank1.pt.trace.json")
    return d


@pytest.fixture
def client(logdir) -> Client:
    return tb_app(["--logdir", str(logdir)])


SPAN_A = f"{BASE}/span?run=run_a&worker=worker0&span=100"


# ---- registration and static files -----------------------------------------------------------
def test_listing_registers_an_iframe_tab(client):
    listing = client.get("/data/plugins_listing").get_json()["diagnostics"]
    assert listing["tab_name"] == "Diagnostics"
    assert listing["enabled"] is True
    assert listing["loading_mechanism"] == {"type": "IFRAME",
                                            "module_path": f"{BASE}/index.js"}


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    eps = {e.name: e.value for e in entry_points(group="tensorboard_plugins")}
    assert eps.get("diagnostics") == "tb_diagnostics.tb_plugin:DiagnosticsPlugin"


def test_index_module_exports_render(client):
    r = client.get(f"{BASE}/index.js")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/javascript")
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "export async function render()" in r.get_data(as_text=True)
    entry = client.get("/data/plugin_entry.html?name=diagnostics").get_data(as_text=True)
    assert "./index.js" in entry


@pytest.mark.parametrize("path, ctype", [
    ("static/app/main.js", "text/javascript"),
    ("static/style.css", "text/css"),
    ("static/vendor/uplot/uPlot.esm.js", "text/javascript"),
    ("static/vendor/uplot/LICENSE", "text/plain"),
])
def test_static_files_are_served(client, path, ctype):
    r = client.get(f"{BASE}/{path}")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith(ctype)


@pytest.mark.parametrize("path", [
    "static/../tb_plugin.py", "static/app/../../tb_plugin.py", "static/%2e%2e/tb_plugin.py",
    "static/..%2ftb_plugin.py", "static//etc/passwd", "static/.hidden", "static/app/",
    "static/nope.js", "static/app/main.py", "static/",
])
def test_static_route_refuses_anything_outside_static(client, path):
    assert client.get(f"{BASE}/{path}").status_code == 404


def test_routes_work_under_path_prefix_and_experiments(logdir):
    client = tb_app(["--logdir", str(logdir), "--path_prefix", "/tb"])
    assert client.get(f"/tb{BASE}/static/app/main.js").status_code == 200
    assert client.get(f"/tb/experiment/x{BASE}/static/app/main.js").status_code == 200
    assert client.get(f"/tb{BASE}/runs").get_json()["status"] == "ok"


def test_unknown_route_is_404(client):
    assert client.get(f"{BASE}/nope").status_code == 404


def test_large_json_is_gzipped(client):
    get_ready(client, SPAN_A)
    r = client.get(f"{BASE}/step?run=run_a&worker=worker0&span=100&step=1",
                   headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip"
    body = json.loads(gzip.decompress(r.get_data()))
    assert body["status"] == "ready"


# ---- the log dir and is_active ------------------------------------------------------------
def test_is_active_follows_the_log_dir(tmp_path, trace):
    plugin, _ = plugin_client(tmp_path)
    assert plugin.is_active() is False  # empty log dir
    small_run(trace).write(tmp_path / "r" / "w.1.pt.trace.json")
    plugin.provider._scan._max_age_s = 0.0  # let the next look start a refresh
    plugin.is_active()
    deadline = time.monotonic() + 5
    while not plugin.is_active():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_logdir_spec_is_reported_not_scanned(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # torch-tb-profiler would scan this; we must not
    (tmp_path / "r").mkdir()
    TraceBuilder().write(tmp_path / "r" / "w.1.pt.trace.json")
    client = tb_app(["--logdir_spec", f"x:{tmp_path}"])
    assert client.get("/data/plugins_listing").get_json()["diagnostics"]["enabled"] is False
    runs = client.get(f"{BASE}/runs").get_json()
    assert runs["status"] == "no_logdir"
    assert "--logdir_spec" in runs["message"]
    assert runs["runs"] == []
    r = client.get(f"{BASE}/span?run=r&worker=w&span=1")
    assert r.status_code == 404 and "--logdir_spec" in r.get_json()["error"]


def test_relative_logdir_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ctx = base_plugin.TBContext(logdir="./log", flags=None)
    assert resolve_logdir(ctx) == (str(tmp_path / "log"), None)
    ctx = base_plugin.TBContext(logdir="s3://bucket/log", flags=None)
    assert resolve_logdir(ctx) == ("s3://bucket/log", None)


def test_missing_logdir_is_an_error_status(tmp_path):
    runs = tb_app(["--logdir", str(tmp_path / "absent")]).get(f"{BASE}/runs").get_json()
    assert runs["status"] == "error"
    assert "does not exist" in runs["message"]


def test_empty_logdir_says_so(tmp_path):
    runs = tb_app(["--logdir", str(tmp_path)]).get(f"{BASE}/runs").get_json()
    assert runs["status"] == "empty"
    assert runs["runs"] == []


def test_load_fast_false_reads_the_logdir_too(logdir):
    client = tb_app(["--logdir", str(logdir), "--load_fast=false"])
    assert client.get("/data/plugins_listing").get_json()["diagnostics"]["enabled"] is True
    assert [r["run"] for r in client.get(f"{BASE}/runs").get_json()["runs"]] == [
        "nested/run_b", "run_a"]


# ---- /runs, /span, /step ------------------------------------------------------------------
def test_runs_tree(client):
    runs = client.get(f"{BASE}/runs").get_json()
    assert runs["status"] == "ok"
    assert runs["errors"] == []
    tree = {r["run"]: {w["worker"]: [s["span"] for s in w["spans"]] for w in r["workers"]}
            for r in runs["runs"]}
    assert tree == {"nested/run_b": {"rank1": ["rank1.pt.trace.json"]},
                    "run_a": {"worker0": ["100", "200"]}}
    span = runs["runs"][1]["workers"][0]["spans"][0]
    assert span["file"] == "run_a/worker0.100.pt.trace.json"
    assert span["state"] == "unloaded"
    assert span["size"] > 0


def test_span_summary_is_the_report_document_plus_tab_fields(client, logdir):
    r = get_ready(client, SPAN_A)
    assert r.status_code == 200
    body = r.get_json()
    assert body["status"] == "ready"
    s = body["summary"]
    # The same figures as `tb-diagnostics report`: the engine's own document.
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.logdir import scan_logdir
    from tb_diagnostics.trace import load_trace

    f = scan_logdir(str(logdir)).run("run_a").workers[0].spans[0]
    ref = span_document(f, SpanAnalysis(load_trace(f.url, f.relpath)))
    for got, want in zip(s["steps"], ref["steps"], strict=True):
        assert {k: got[k] for k in want} == want
    assert [x["rule"] for x in s["findings"]] == [x["rule"] for x in ref["findings"]]
    assert s["device"] == {"kind": "cuda", "name": "Test GPU"}
    assert [st["step"] for st in s["steps"]] == [1, 2, 3]
    st = s["steps"][0]
    assert st["index"] == 0
    assert st["host_start_us"] == 0.0 and st["host_end_us"] == 1000.0
    assert st["wall_us"] == 1000.0 and st["device_busy_us"] == 305.0
    assert isinstance(st["flags"], list)
    assert f"is {s['verdict']}:" in s["headline"] or f"are {s['verdict']}" in s["headline"]
    assert s["run"] == "run_a" and s["worker"] == "worker0"
    assert set(s["rules"]) == {x["rule"] for x in s["findings"]}
    assert s["trace"]["streams"] == 1


def test_span_answers_202_with_progress_then_200(client):
    r = get_ready(client, f"{BASE}/span?run=run_a&worker=worker0&span=200")
    assert r.status_code == 200
    progress = client.get(f"{BASE}/progress").get_json()
    assert progress["loading"] == []
    assert progress["cache"]["resident"] >= 1
    states = {s["span"]: s["state"] for s in
              client.get(f"{BASE}/runs").get_json()["runs"][1]["workers"][0]["spans"]}
    assert states["200"] == "ready"


def test_runs_give_each_loaded_spans_device(client):
    """The compare picker puts same-device runs first: /runs says each span's device before
    any load, from the file's first bytes (these small files are read whole), and the
    analysis' once its summary is loaded (/runs never starts a load to find out)."""
    def devices():
        spans = client.get(f"{BASE}/runs").get_json()["runs"][1]["workers"][0]["spans"]
        return {s["span"]: (s["device"] and {k: s["device"][k] for k in ("kind", "name", "from")},
                            s["device_note"]) for s in spans}

    read_whole = ({"kind": "cuda", "name": "Test GPU", "from": "trace"}, None)
    assert devices() == {"100": read_whole, "200": read_whole}
    get_ready(client, SPAN_A)
    assert devices() == {"100": ({"kind": "cuda", "name": "Test GPU", "from": "analysis"}, None),
                         "200": read_whole}


def test_step_detail(client):
    get_ready(client, SPAN_A)
    r = client.get(f"{BASE}/step?run=run_a&worker=worker0&span=100&step=2")
    assert r.status_code == 200
    d = r.get_json()
    assert d["step"] == 2 and d["index"] == 1
    tree = d["tree"]
    assert tree["name"] == "ProfilerStep#2" and tree["kind"] == "step"
    fwd = tree["children"][0]
    assert fwd["name"] == "forward"
    addmm = next(c for c in fwd["children"] if c["name"] == "aten::addmm")
    assert "fusion" in addmm["marks"]
    launches = {c["name"]: c for c in addmm["children"]}
    copy = launches["cudaMemcpyAsync"]["children"][0]
    assert copy["kind"] == "memcpy" and "hidden copy" in copy["marks"]
    kernel = launches["cudaLaunchKernel"]["children"][0]
    assert kernel["name"] == "volta_sgemm_64x64_nn" and kernel["device_us"] == 300.0
    assert kernel["streams"] == [7]
    assert d["open"][0] == tree["id"] and d["open"][-1] == kernel["id"]

    tl = d["timeline"]
    assert [ln["label"] for ln in tl["lanes"]] == ["process 1 · thread 1", "GPU 0 · stream 7"]
    ev = tl["events"]
    n = len(ev["row"])
    assert n == tl["shown"] == tl["total"]
    assert all(len(ev[k]) == n for k in ("lane", "depth", "start_us", "dur_us", "name", "kind"))
    names = [tl["names"][i] for i in ev["name"]]
    assert names.count("volta_sgemm_64x64_nn") == 1  # clipped to step 2 only
    a, b = tl["links"][1]
    assert names[a] == "cudaLaunchKernel" and names[b] == "volta_sgemm_64x64_nn"
    assert ev["kind"][b] == "kernel" and ev["lane"][b] == 1
    assert min(ev["start_us"]) >= tl["range"]["start_us"]
    assert max(s + w for s, w in zip(ev["start_us"], ev["dur_us"], strict=True)) <= \
        tl["range"]["end_us"] + 1e-6


def test_step_highlight_pins_rows_from_elsewhere(client):
    get_ready(client, SPAN_A)
    first = client.get(f"{BASE}/step?run=run_a&worker=worker0&span=100&step=1").get_json()
    row = first["timeline"]["events"]["row"][-1]
    d = client.get(f"{BASE}/step?run=run_a&worker=worker0&span=100&step=3"
                   f"&highlight={row}").get_json()
    tl = d["timeline"]
    assert row in tl["events"]["row"]
    assert tl["highlight"] == [tl["events"]["row"].index(row)]
    assert tl["range"]["start_us"] < 2100  # widened back to step 1's event


@pytest.mark.parametrize("query, code, words", [
    ("run=nope&worker=worker0&span=100", 404, "no run 'nope'"),
    ("run=run_a&worker=w9&span=100", 404, "no worker 'w9' in run 'run_a' (workers: worker0)"),
    ("run=run_a&worker=worker0&span=7", 404, "(spans: 100, 200)"),
    ("run=run_a&worker=worker0", 400, "missing parameter 'span'"),
    ("worker=worker0&span=100", 400, "missing parameter 'run'"),
    ("run=../../etc&worker=passwd&span=1", 404, "no run '../../etc'"),
])
def test_span_errors(client, query, code, words):
    r = client.get(f"{BASE}/span?{query}")
    assert r.status_code == code
    assert words in r.get_json()["error"]


@pytest.mark.parametrize("extra, code, words", [
    ("step=9", 404, "no step 9 in this span (steps: 1, 2, 3)"),
    ("step=x", 400, "step must be a step number or 'all'"),
    ("step=all", 404, "has ProfilerStep# steps"),
    ("", 400, "missing parameter 'step'"),
    ("step=1&highlight=1,a", 400, "comma-separated row numbers"),
    ("step=1&highlight=-3", 400, ">= 0"),
    ("step=1&highlight=" + ",".join(map(str, range(65))), 400, "at most 64"),
])
def test_step_errors(client, extra, code, words):
    get_ready(client, SPAN_A)
    r = client.get(f"{BASE}/step?run=run_a&worker=worker0&span=100&{extra}")
    assert r.status_code == code
    assert words in r.get_json()["error"]


def test_span_without_steps_is_step_all(tmp_path, trace):
    trace.op("aten::mm", 0, 100)
    trace.launch(10, 5, "gemm", 20, 50)
    trace.write(tmp_path / "r" / "w.1.pt.trace.json")
    client = tb_app(["--logdir", str(tmp_path)])
    s = get_ready(client, f"{BASE}/span?run=r&worker=w&span=1").get_json()["summary"]
    assert [x["step"] for x in s["steps"]] == [None]
    d = client.get(f"{BASE}/step?run=r&worker=w&span=1&step=all").get_json()
    assert d["step"] is None and d["tree"]["name"] == "(whole span)"
    assert client.get(f"{BASE}/step?run=r&worker=w&span=1&step=0").status_code == 404


def test_unreadable_file_is_named_and_a_rewrite_is_picked_up(tmp_path, trace):
    bad = tmp_path / "r" / "w.1.pt.trace.json"
    bad.parent.mkdir()
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a"')  # still being written
    client = tb_app(["--logdir", str(tmp_path)])
    body = get_ready(client, f"{BASE}/span?run=r&worker=w&span=1").get_json()
    assert body["status"] == "error"
    assert body["file"] == "r/w.1.pt.trace.json"
    assert body["error"].startswith("r/w.1.pt.trace.json: ")
    runs = client.get(f"{BASE}/runs").get_json()
    assert [e["file"] for e in runs["errors"]] == ["r/w.1.pt.trace.json"]
    assert runs["runs"][0]["workers"][0]["spans"][0]["state"] == "error"
    step = client.get(f"{BASE}/step?run=r&worker=w&span=1&step=1").get_json()
    assert step["status"] == "error"

    small_run(trace).write(bad)  # the profiler finished writing: new size and mtime
    time.sleep(1.1)  # /runs lists files no older than a second
    client.get(f"{BASE}/runs")
    body = get_ready(client, f"{BASE}/span?run=r&worker=w&span=1").get_json()
    assert body["status"] == "ready"
    assert len(body["summary"]["steps"]) == 3


def test_new_run_is_found_on_reload(logdir, trace):
    client = tb_app(["--logdir", str(logdir)])
    assert len(client.get(f"{BASE}/runs").get_json()["runs"]) == 2
    small_run(trace).write(logdir / "late" / "worker0.5.pt.trace.json")
    # A link to the new run works at once: an unknown name triggers a fresh scan.
    r = get_ready(client, f"{BASE}/span?run=late&worker=worker0&span=5")
    assert r.status_code == 200
    time.sleep(1.1)
    assert len(client.get(f"{BASE}/runs").get_json()["runs"]) == 3


def test_hostile_names_are_data(tmp_path, trace):
    evil = '<img src=x onerror="alert(1)">'
    trace.step(1, 0, 100)
    trace.op(evil, 10, 50)
    trace.write(tmp_path / "r" / "w.1.pt.trace.json")
    client = tb_app(["--logdir", str(tmp_path)])
    get_ready(client, f"{BASE}/span?run=r&worker=w&span=1")
    r = client.get(f"{BASE}/step?run=r&worker=w&span=1&step=1")
    assert r.headers["Content-Type"] == "application/json"
    assert evil in r.get_json()["timeline"]["names"]


# ---- the shared real traces -----------------------------------------------------------------
@pytest.mark.shared
def test_resnet_run_end_to_end(shared_traces):
    client = tb_app(["--logdir", str(shared_traces)])
    runs = client.get(f"{BASE}/runs").get_json()
    assert runs["status"] == "ok" and len(runs["runs"]) == 21
    q = f"run={RESNET}&worker=worker0&span=1623143089861"
    r = get_ready(client, f"{BASE}/span?{q}")
    s = r.get_json()["summary"]
    assert s["device"] == {"kind": "cuda", "name": "Tesla V100-DGXS-32GB"}
    assert [x["step"] for x in s["steps"]] == [5, 6, 7, 8, 9, 10]
    assert s["verdict"] == "mixed"
    assert "waiting for the DataLoader" in s["headline"]
    assert s["steps"][0]["wall_us"] == pytest.approx(187948.0)
    assert s["steps"][0]["idle"]["input_us"] == pytest.approx(69317.0)
    r = client.get(f"{BASE}/step?{q}&step=5", headers={"Accept-Encoding": "gzip"})
    assert len(r.get_data()) < 150_000  # gzipped: the step view stays small
    d = json.loads(gzip.decompress(r.get_data()))
    assert d["tree"]["name"] == "ProfilerStep#5"
    tl = d["timeline"]
    assert tl["shown"] <= 5000 < tl["total"]
    assert any(ln["device"] for ln in tl["lanes"])
    assert len(tl["links"]) > 1000
    kinds = set(tl["events"]["kind"])
    assert {"op", "runtime", "kernel"} <= kinds


@pytest.mark.shared
def test_every_shared_span_loads_or_explains_itself(shared_traces):
    client = tb_app(["--logdir", str(shared_traces)])
    runs = client.get(f"{BASE}/runs").get_json()["runs"]
    for run in runs:
        for w in run["workers"]:
            for sp in w["spans"]:
                q = f"run={run['run']}&worker={w['worker']}&span={sp['span']}"
                body = get_ready(client, f"{BASE}/span?{q}").get_json()
                assert body["status"] == "ready", (q, body)
                first = body["summary"]["steps"][0]["step"]
                step = "all" if first is None else first
                d = client.get(f"{BASE}/step?{q}&step={step}")
                assert d.status_code == 200, (q, d.get_json())
