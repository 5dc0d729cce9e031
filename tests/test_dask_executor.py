"""The Dask executor: a LocalCluster of 2 worker processes gives the same report as the
local pool, through the CLI's --executor dask://HOST:PORT as well."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tb_diagnostics.cli import main
from tb_diagnostics.engine import build_document
from tb_diagnostics.lazy_rows import plain
from tb_diagnostics.logdir import scan_logdir

distributed = pytest.importorskip("distributed")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


def test_dask_results_identical_to_the_local_pool(cluster, tmp_path, capsys):
    for run in ("distributed-ws2-straggler1-cpu", "matmul_add-size64-cpu"):
        if (REPO / "log" / run).is_dir():
            shutil.copytree(REPO / "log" / run, tmp_path / run)
    ld = scan_logdir(str(tmp_path))
    local = build_document(ld, workers=2)
    with distributed.Client(cluster) as client:
        dask = build_document(ld, executor=client.get_executor())
    assert dask == local
    assert any(f["rule"] == "distributed-straggler"
               for r in dask["runs"] for f in r["findings"])

    address = cluster.scheduler_address.replace("tcp://", "dask://")
    assert main(["report", str(tmp_path), "--no-cache", "--format", "json",
                 "--executor", address]) == 0
    # The document's step lists are lazy (lazy_rows): plain lists for json.dumps.
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(plain(local)))


def test_unreachable_scheduler_is_a_usage_error(capsys):
    assert main(["report", str(REPO / "log"), "--executor", "dask://127.0.0.1:1"]) == 2
    assert "Dask scheduler" in capsys.readouterr().err
