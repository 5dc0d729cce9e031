"""An ``s3://`` log dir, for real: moto's S3 server on loopback, s3fs, boto3.

The endpoint reaches s3fs the way a TensorBoard user would set it:
``AWS_ENDPOINT_URL`` (honoured by botocore ≥ 1.31, so by s3fs and TensorBoard
alike), with dummy credentials in the environment. Skips without moto/s3fs.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

moto_server = pytest.importorskip("moto.server", reason="needs moto[server] (pip)")
s3fs = pytest.importorskip("s3fs", reason="needs s3fs (pip install tb-diagnostics[s3])")
boto3 = pytest.importorskip("boto3")

from tb_diagnostics.cli import main  # noqa: E402
from tb_diagnostics.logdir import scan_logdir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RUN = "matmul_add-size64-cpu"
BUCKET = "team-profiles"
LOGDIR = f"s3://{BUCKET}/shared/log"
BASE = "/data/plugin/diagnostics"


@pytest.fixture(scope="module")
def s3_server():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_logdir(s3_server, monkeypatch, tmp_path) -> str:
    for k, v in {"AWS_ENDPOINT_URL": s3_server, "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "TB_DIAGNOSTICS_CACHE": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(k, v)
    s3fs.S3FileSystem.clear_instance_cache()  # a cached instance would keep an old endpoint
    s3 = boto3.client("s3", endpoint_url=s3_server)
    s3.create_bucket(Bucket=BUCKET)
    for p in (REPO / "log" / RUN).iterdir():
        s3.upload_file(str(p), BUCKET, f"shared/log/{RUN}/{p.name}")
    yield LOGDIR
    s3fs.S3FileSystem.clear_instance_cache()


def test_scan_s3_logdir(s3_logdir):
    ld = scan_logdir(s3_logdir)
    assert [r.name for r in ld.runs] == [RUN]
    f = ld.files[0]
    assert f.url.startswith(f"s3://{BUCKET}/shared/log/{RUN}/") and f.relpath.startswith(RUN)
    assert f.size and f.mtime


def test_report_from_s3_matches_local(s3_logdir, capsys, tmp_path):
    local = tmp_path / "local"
    shutil.copytree(REPO / "log" / RUN, local / RUN)
    docs = []
    for where in (s3_logdir, str(local)):
        assert main(["report", where, "--format", "json", "--workers", "1"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc.pop("logdir") == where
        docs.append(doc)
    assert docs[0] == docs[1]
    assert docs[0]["runs"][0]["workers"][0]["spans"][0]["verdict"] == "overhead-bound"


def test_plugin_routes_on_s3(s3_logdir):
    from test_tb_plugin import tb_app

    client = tb_app(["--logdir", s3_logdir])
    runs = client.get(f"{BASE}/runs").get_json()
    assert [r["run"] for r in runs["runs"]] == [RUN], runs
    span = runs["runs"][0]["workers"][0]["spans"][0]["span"]
    url = f"{BASE}/span?run={RUN}&worker=worker0&span={span}"
    deadline = time.monotonic() + 60
    while (r := client.get(url)).status_code == 202:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert r.status_code == 200, r.get_data(as_text=True)
    doc = r.get_json()["summary"]
    assert doc["verdict"] == "overhead-bound" and doc["steps"]
    step = client.get(f"{url}&step={doc['steps'][1]['step']}".replace("/span?", "/step?"))
    assert step.status_code == 200 and step.get_json()["tree"]
