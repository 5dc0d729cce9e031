"""The benchmark scripts run: one measurement of each kind on a small trace, and the tables.

Figures are not asserted here (benchmarks print them); only that every measurement
produces them and that ours agrees with the engine.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TraceBuilder

BENCH = REPO / "bench"
sys.path.insert(0, str(BENCH))

import run_bench  # noqa: E402
import run_paint  # noqa: E402


@pytest.fixture
def trace_file(tmp_path) -> Path:
    t = TraceBuilder()
    for n in range(1, 6):
        t.step(n, n * 1000, 1000)
        t.op("aten::add", n * 1000 + 10, 500)
    path = tmp_path / "run" / "worker0.1.pt.trace.json"
    t.write(path)
    return path


def measure(*args: str) -> dict:
    out = subprocess.run([sys.executable, str(BENCH / "measure.py"), *args],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_measurement_reports_time_and_peak_memory(trace_file, tmp_path):
    cold = measure("ours", str(trace_file), str(tmp_path / "cache"))
    warm = measure("ours", str(trace_file), str(tmp_path / "cache"))
    assert cold["steps"] == warm["steps"] == 5 and not cold["errors"]
    # orjson is the benchmark's floor where it is installed (not a test dependency).
    floors = ("orjson", "json") if importlib.util.find_spec("orjson") else ("json",)
    for what in ("baseline", *floors):
        r = measure(what, str(trace_file))
        assert r["seconds"] >= 0 and r["peak_rss_mb"] > 0, what
    assert cold["peak_rss_mb"] > 0


def test_tables_show_ratios():
    oc = {"seconds": 1.0, "peak_rss_mb": 40.0}
    row = {"file": "bench/data/x/w.json", "mb_json": 50.0, "ours_cold": oc,
           "ours_warm": {"seconds": 0.01}, "orjson": {"seconds": 4.0}, "json": {"seconds": 5.0},
           "tbprofiler": {"seconds": 12.0, "peak_rss_mb": 400.0}}
    text = run_bench.table([row])
    assert "0.25" in text and "12.0x" in text and "0.80" in text
    paint = {"file": "bench/data/x/w.json", "mb_json": 50.0, "server_ready_s": 1.0,
             "span_route_kb": 18.0, "summary_s": 0.3, "step_s": 0.5, "page_s": 1.7}
    assert "0.30" in run_paint.paint_table([paint])
