"""Many simultaneous requests through TensorBoard's real app: one parse per file, every
request answered, and a failing run never holds up the others."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_tb_plugin import BASE, get_ready, small_run, tb_app

from conftest import TraceBuilder
from tb_diagnostics.server import present


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path_factory.mktemp("cache")))


def test_fifty_concurrent_requests_parse_the_span_once(tmp_path, trace, monkeypatch):
    small_run(trace).write(tmp_path / "log" / "run_a" / "worker0.100.pt.trace.json")
    (tmp_path / "log" / "broken").mkdir()
    (tmp_path / "log" / "broken" / "worker0.1.pt.trace.json").write_text('{"traceEvents": [')
    real = present.open_analysis
    calls: list[str] = []
    lock = threading.Lock()

    def slow_open(f, *a, **k):
        with lock:
            calls.append(f.relpath)
        if f.run == "run_a":
            time.sleep(1.0)  # still loading while the other requests arrive
        return real(f, *a, **k)

    monkeypatch.setattr(present, "open_analysis", slow_open)
    client = tb_app(["--logdir", str(tmp_path / "log")])
    url = f"{BASE}/span?run=run_a&worker=worker0&span=100"

    def ask(_: int):
        return client.get(url)

    with ThreadPoolExecutor(max_workers=50) as pool:
        first = list(pool.map(ask, range(50)))
    assert {r.status_code for r in first} <= {200, 202}
    for r in first:
        body = r.get_json()
        assert body["status"] in ("loading", "ready")
    # The broken run answers at once with its error while run_a is still loading.
    t0 = time.monotonic()
    broken = get_ready(client, f"{BASE}/span?run=broken&worker=worker0&span=1")
    assert time.monotonic() - t0 < 5
    assert broken.get_json()["status"] == "error"
    assert "truncated JSON" in broken.get_json()["error"]
    done = get_ready(client, url)
    assert done.status_code == 200 and done.get_json()["status"] == "ready"
    assert calls.count("run_a/worker0.100.pt.trace.json") == 1


def test_many_spans_at_once_each_parsed_once(tmp_path, monkeypatch):
    for i in range(6):
        small_run(TraceBuilder([{"id": 0, "name": "G"}]), 2).write(
            tmp_path / "log" / f"run{i}" / "worker0.1.pt.trace.json")
    real = present.open_analysis
    calls: list[str] = []
    lock = threading.Lock()

    def counting(f, *a, **k):
        with lock:
            calls.append(f.relpath)
        return real(f, *a, **k)

    monkeypatch.setattr(present, "open_analysis", counting)
    client = tb_app(["--logdir", str(tmp_path / "log")])
    urls = [f"{BASE}/span?run=run{i % 6}&worker=worker0&span=1" for i in range(60)]
    with ThreadPoolExecutor(max_workers=30) as pool:
        results = list(pool.map(lambda u: get_ready(client, u), urls))
    assert all(r.get_json()["status"] == "ready" for r in results)
    assert sorted(calls) == sorted(f"run{i}/worker0.1.pt.trace.json" for i in range(6))
