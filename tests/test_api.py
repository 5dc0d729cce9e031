"""The Python API, driven the way a notebook drives it, on ../shared/traces.

The report's document must be the CLI's JSON, byte for byte after a JSON round trip, and
the DataFrames its reshaping; the cache always lives in tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tb_diagnostics
from conftest import TraceBuilder

REPO = Path(__file__).resolve().parents[1]


def cli_json(tmp_path: Path, *argv: str) -> dict:
    env = dict(os.environ, TB_DIAGNOSTICS_CACHE=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "plugin"),
                                                      env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", *argv, "--format",
                           "json"], capture_output=True, text=True, timeout=300, env=env,
                          check=True)
    return json.loads(proc.stdout)


def test_import_is_cheap():
    code = ("import sys, tb_diagnostics; tb_diagnostics.analyze; tb_diagnostics.Report; "
            "tb_diagnostics.trace_handler; "
            "print(sorted(m for m in ('torch', 'pandas', 'numpy', 'tb_diagnostics.engine', "
            "'tb_diagnostics.trace') if m in sys.modules))")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "plugin"),
                                                      env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, timeout=60).stdout
    # Naming the API loads none of them: torch only when a handler is made, the engine
    # (numpy) only when analyze() runs.
    assert out.strip() == "[]"


def test_public_names():
    assert {"analyze", "Report", "trace_handler"} <= set(tb_diagnostics.__all__)
    assert all(getattr(tb_diagnostics, n) is not None for n in tb_diagnostics.__all__)
    assert tb_diagnostics.analyze.__doc__ and tb_diagnostics.analyze.__annotations__
    with pytest.raises(AttributeError):
        _ = tb_diagnostics.no_such_name


@pytest.fixture(scope="module")
def shared_report(tmp_path_factory):
    from conftest import SHARED_TRACES

    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    cache = tmp_path_factory.mktemp("api") / "cache"
    return tb_diagnostics.analyze(SHARED_TRACES, cache=cache, workers=2)


@pytest.mark.shared
def test_notebook_session_on_the_shared_traces(shared_report, shared_traces, tmp_path):
    pd = pytest.importorskip("pandas")
    report = shared_report
    # In [1]: the document is what `report --format json` prints.
    doc = json.loads(json.dumps(report.document))
    assert doc == cli_json(tmp_path, "report", str(shared_traces))

    # In [2]: one row per step of every span.
    df = report.steps_frame()
    spans = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    assert len(df) == sum(len(s["steps"]) for s in spans)
    for col in ("run", "worker", "span", "rank", "step", "start_us", "wall_us",
                "device_busy_us", "device_busy", "verdict", "main_idle_cause", "input_us",
                "sync_us", "launch_us", "other_us", "flags", "flop_utilisation"):
        assert col in df.columns, col
    assert pd.api.types.is_float_dtype(df["wall_us"])
    assert df["device_busy"].between(0, 1).all()
    # Busy plus the idle causes (and the labelled idle time: the profiler's, one-time
    # compilation and module loads) is the step's wall time, row by row.
    idle = [c for c in ("input_us", "sync_us", "idle_comm_us", "launch_us", "other_us",
                        "profiler_us", "compile_us", "module_load_us") if c in df.columns]
    assert ((df["device_busy_us"] + df[idle].sum(axis=1)) - df["wall_us"]).abs().max() < 0.05

    # In [3]: per-run questions a notebook asks.
    per_run = df.groupby("run")["step"].count()
    assert per_run["kineto_resnet50_v100_dataloader_workers0"] == 12
    nosteps = df[df["run"] == "kineto_2021jan_resnet50_autograd_api_nosteps"]
    assert list(nosteps["step"]) == list(range(6))
    assert nosteps["flags"].map(lambda f: "inferred" in f).all()
    ranks = df[df["run"] == "hta_sampled_2ranks_of128"].groupby("worker")["rank"].first()
    assert sorted(ranks.tolist()) == [0, 1]
    assert df.loc[df["run"] == "kineto_2021jan_resnet50_profiler_api", "rank"].isna().all()

    # In [4]: findings, one row each, with the span they belong to.
    fdf = report.findings_frame()
    n_span = sum(len(s["findings"]) for s in spans)
    n_run = sum(len(r.get("findings") or []) for r in doc["runs"])
    assert len(fdf) == n_span + n_run
    assert set(fdf["severity"]) <= {"critical", "warning", "info"}
    top = fdf[fdf["run"] == "kineto_resnet50_v100_dataloader_workers0"]
    assert "dataloader-bottleneck" in set(top["rule"])
    assert fdf.loc[fdf["worker"].isna(), "span"].isna().all()

    # In [5]: the cell's rich display: the export's report, as a fragment without script.
    html = report._repr_html_()
    assert "<script" not in html.lower() and "<html" not in html.lower()
    assert html.startswith('<div class="tbd-report">') and "<svg" in html
    assert "dataloader-bottleneck" in html
    assert "kineto_resnet50_v100_dataloader_workers0" in report.to_markdown()


@pytest.mark.shared
def test_compare_is_the_cli_compare(shared_traces, tmp_path):
    base = tb_diagnostics.analyze(shared_traces, "kineto_resnet50_v100_dataloader_workers0",
                                  cache=tmp_path / "cache")
    cand = tb_diagnostics.analyze(shared_traces, "kineto_resnet50_v100_dataloader_workers4",
                                  cache=tmp_path / "cache")
    got = json.loads(json.dumps(base.compare(cand)))
    want = cli_json(tmp_path, "compare", str(shared_traces), "--baseline",
                    "kineto_resnet50_v100_dataloader_workers0", "--candidate",
                    "kineto_resnet50_v100_dataloader_workers4")
    assert got == want
    assert got["steps"] and got["ops"]


def _one_trace(tmp_path: Path) -> Path:
    tr = TraceBuilder(device_properties=[{"id": 0, "name": "Test GPU", "totalGlobalMem": 1}])
    for n in range(3):
        tr.step(n, n * 100, 100)
        tr.op("aten::mm", n * 100 + 5, 50)
        tr.launch(n * 100 + 10, 5, "gemm", n * 100 + 20, 30)
    return tr.write(tmp_path / "log" / "run" / "w0.1.pt.trace.json")


def test_a_single_file_a_run_dir_and_a_log_dir(tmp_path):
    path = _one_trace(tmp_path)
    cache = tmp_path / "cache"
    one = tb_diagnostics.analyze(path, cache=cache)
    in_run = tb_diagnostics.analyze(path.parent, cache=False)
    in_logdir = tb_diagnostics.analyze(tmp_path / "log", run="run", cache=cache)
    steps = [[s["step"] for s in r.steps()] for r in (one, in_run, in_logdir)]
    assert steps == [[0, 1, 2]] * 3
    assert [s["run"] for s in one.steps()] == ["."] * 3
    assert one.steps()[0]["file"] == "w0.1.pt.trace.json"
    # The same figures whichever way the file was named.
    strip = [{k: v for k, v in s.items() if k not in ("run", "file")} for s in one.steps()]
    assert strip == [{k: v for k, v in s.items() if k not in ("run", "file")}
                     for s in in_logdir.steps()]
    with pytest.raises(tb_diagnostics.LogDirError, match="no run 'nope'"):
        tb_diagnostics.analyze(tmp_path / "log", run="nope", cache=False)
    with pytest.raises(tb_diagnostics.LogDirError):
        tb_diagnostics.analyze(tmp_path / "missing", cache=False)


def test_thresholds_as_a_mapping(tmp_path):
    path = _one_trace(tmp_path)
    loose = tb_diagnostics.analyze(path, cache=False,
                                   thresholds={"compute_bound": 0.01, "low_busy": 0.0})
    strict = tb_diagnostics.analyze(path, cache=False, thresholds={"compute_bound": 0.99})
    assert {s["verdict"] for s in loose.steps()} == {"compute-bound"}
    assert "compute-bound" not in {s["verdict"] for s in strict.steps()}


def test_frames_without_pandas_say_how_to_get_it(tmp_path, monkeypatch):
    report = tb_diagnostics.analyze(_one_trace(tmp_path), cache=False)
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"tb-diagnostics\[pandas\]"):
        report.steps_frame()
    with pytest.raises(ImportError, match=r"tb-diagnostics\[pandas\]"):
        report.findings_frame()
    assert len(report.steps()) == 3  # the records need nothing


def test_an_in_memory_log_dir(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    data = _one_trace(tmp_path).read_bytes()
    fs = fsspec.filesystem("memory")
    fs.pipe("/api-test/run/w0.1.pt.trace.json", data)
    try:
        by_dir = tb_diagnostics.analyze("memory://api-test", cache=False)
        by_file = tb_diagnostics.analyze("memory://api-test/run/w0.1.pt.trace.json",
                                         cache=False)
    finally:
        fs.rm("/api-test", recursive=True)
    assert [s["step"] for s in by_dir.steps()] == [s["step"] for s in by_file.steps()] == [0, 1, 2]


def test_an_unguarded_script_on_several_files_just_works(tmp_path):
    """The most natural script has no ``if __name__ == "__main__":``; spawned workers would
    re-run it, so a script is analysed in its own process unless it asks for workers."""
    log = tmp_path / "log"
    for run in ("a", "b", "c"):
        t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
        for n in range(3):
            t.step(n, n * 100, 100)
            t.launch(n * 100 + 5, 5, "k", n * 100 + 20, 50)
        t.write(log / run / "w.1.pt.trace.json")
    script = tmp_path / "analyse.py"
    script.write_text("import tb_diagnostics\n"
                      f"r = tb_diagnostics.analyze({str(log)!r}, cache=False)\n"
                      "print(sorted({s['run'] for s in r.steps()}))\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "plugin"),
                                                      env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['a', 'b', 'c']"
