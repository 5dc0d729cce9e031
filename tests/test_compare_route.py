"""The tab's ``/compare`` route: the compare document of two runs, over the real plugin."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from test_tb_plugin import BASE, tb_app

REPO = Path(__file__).resolve().parents[1]
SMALL, BIG = "matmul_add-size64-cpu", "matmul_add-size2048-cpu"


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path / "cache"))
    for run in (SMALL, BIG):
        shutil.copytree(REPO / "log" / run, tmp_path / "log" / run)
    return tb_app(["--logdir", str(tmp_path / "log")])


def test_compare_route(client):
    url = f"{BASE}/compare?baseline={SMALL}&candidate={BIG}"
    deadline = time.monotonic() + 60
    while (r := client.get(url)).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert r.status_code == 200
    doc = r.get_json()
    assert doc["status"] == "ready" and doc["kind"] == "compare"
    assert (doc["baseline"]["verdict"], doc["candidate"]["verdict"]) == (
        "overhead-bound", "compute-bound")
    assert doc["baseline"]["cold_steps"] == [0] and doc["median_warm_wall_change"] > 100


def test_compare_route_errors(client):
    assert client.get(f"{BASE}/compare?baseline={SMALL}").status_code == 400
    r = client.get(f"{BASE}/compare?baseline={SMALL}&candidate=nope")
    assert r.status_code == 404 and "nope" in r.get_json()["error"]
