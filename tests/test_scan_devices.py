"""Each listed file's header device, kept with the scan (server/devices.py) and given by
the runs route's provider for every span before any run is loaded."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import TraceBuilder, tree_digest
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.server.devices import DeviceBook, span_device
from tb_diagnostics.server.provider import DataProvider
from tb_diagnostics.server.scan import ScanCache
from tb_diagnostics.trace.header import HEADER_BYTES, HeaderDevice, unknown

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
A100 = {"id": 0, "name": "NVIDIA A100-SXM4-40GB"}


def gpu_trace(props: list[dict]) -> bytes:
    """A gzip trace over the header bound whose deviceProperties come first (Kineto's
    layout)."""
    one = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "dur": 1}
    events = [dict(one, ts=i) for i in range(HEADER_BYTES // len(json.dumps(one)) + 1)]
    return gzip.compress(json.dumps(
        {"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}).encode())


def gpu_file(path: Path, props: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gpu_trace(props))
    return path


def cpu_file(path: Path) -> Path:
    t = TraceBuilder(device_properties=[])
    t.step(1, 0, 100)
    t.op("aten::mm", 10, 50)
    return t.write(path)


@pytest.fixture
def logdir(tmp_path) -> Path:
    gpu_file(tmp_path / "gpu" / "worker0.1.pt.trace.json.gz", [A100])
    cpu_file(tmp_path / "cpu" / "worker0.1.pt.trace.json")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "worker0.1.pt.trace.json").write_bytes(b"\x1f\x8b\x08garbage")
    return tmp_path


def test_the_book_reads_each_version_once_and_forgets_unlisted_files(logdir):
    calls: list[str] = []

    def read(url: str, shown: str) -> HeaderDevice:
        calls.append(shown)
        return unknown("test")

    book = DeviceBook(read)
    files = scan_logdir(str(logdir)).files
    assert book.read_missing(files) and sorted(calls) == sorted(f.relpath for f in files)
    assert all(book.get(f) is not None for f in files)
    calls.clear()
    assert book.read_missing(files) and calls == []  # nothing changed: nothing read
    cpu = logdir / "cpu" / "worker0.1.pt.trace.json"
    os.utime(cpu, (1, 1))  # a new version of one file
    files = scan_logdir(str(logdir)).files
    book.read_missing(files)
    assert calls == ["cpu/worker0.1.pt.trace.json"]
    # A listing older or newer than what was read is not answered from the book.
    stale = next(f for f in files if f.run == "gpu")
    assert book.get(replace(stale, size=1)) is None
    book.read_missing([f for f in files if f.run != "gpu"])
    assert book.get(stale) is None  # no longer listed: dropped


def test_a_slow_header_never_holds_the_scan_back(logdir):
    release = threading.Event()

    def stalled(url: str, shown: str) -> HeaderDevice:
        release.wait(10)  # a stalled network file system
        return unknown("stalled")

    cache = ScanCache(str(logdir))
    cache.devices = DeviceBook(stalled)
    cache.header_wait_s = 0.2
    t0 = time.monotonic()
    result = cache.get(max_age_s=0.0)
    assert result is not None and result.has_traces and time.monotonic() - t0 < 3.0
    assert all(cache.devices.get(f) is None for f in result.logdir.files)  # not read yet
    release.set()
    deadline = time.monotonic() + 10
    while not all(cache.devices.get(f) for f in result.logdir.files):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_one_reading_pass_at_a_time(logdir):
    started, release = threading.Event(), threading.Event()

    def blocking(url: str, shown: str) -> HeaderDevice:
        started.set()
        release.wait(5)
        return unknown("x")

    book = DeviceBook(blocking)
    files = scan_logdir(str(logdir)).files
    t = threading.Thread(target=book.read_missing, args=(files,))
    t.start()
    assert started.wait(5)
    assert book.read_missing(files) is False  # the running pass does it
    release.set()
    t.join(5)
    assert all(book.get(f) is not None for f in files)


def test_span_device_prefers_the_analysis():
    gpu = HeaderDevice("cuda", "X", 1, "header", "deviceProperties lists 1 GPU")
    assert span_device({"kind": "cpu", "name": None}, gpu) == (
        {"kind": "cpu", "name": None, "from": "analysis"}, None)
    assert span_device(None, gpu)[0]["from"] == "header"
    assert span_device(None, None) == (None, "not read yet")
    assert span_device(None, unknown("no deviceProperties before the events")) == (
        None, "no deviceProperties before the events")


def test_runs_give_every_span_its_device_before_any_load(logdir):
    before = tree_digest(logdir)
    provider = DataProvider(str(logdir))
    try:
        runs = provider.runs()
        assert runs["status"] == "ok"
        spans = {r["run"]: r["workers"][0]["spans"][0] for r in runs["runs"]}
        assert all(s["state"] == "unloaded" for s in spans.values())  # nothing loaded
        gpu, cpu, broken = spans["gpu"], spans["cpu"], spans["broken"]
        assert (gpu["device"]["kind"], gpu["device"]["name"], gpu["device"]["from"]) == (
            "cuda", A100["name"], "header")
        assert (cpu["device"]["kind"], cpu["device"]["from"]) == ("cpu", "trace")
        assert broken["device"] is None and "gzip" in broken["device_note"]
    finally:
        provider.shutdown()
    assert tree_digest(logdir) == before  # the log dir is only read


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/traces")
def test_the_shared_log_dir_is_read_in_one_scan():
    provider = DataProvider(str(SHARED))
    try:
        t0 = time.perf_counter()
        runs = provider.runs()
        took = time.perf_counter() - t0
        spans = [s for r in runs["runs"] for w in r["workers"] for s in w["spans"]]
        assert len(runs["runs"]) == 21 and len(spans) == 24
        assert all(s["state"] == "unloaded" for s in spans)
        known = [s for s in spans if s["device"]]
        assert len(known) >= 15, [s["file"] for s in spans if not s["device"]]
        assert all(s["device_note"] for s in spans if not s["device"])
        assert took < 10.0, took
    finally:
        provider.shutdown()


def test_a_remote_log_dir_is_read_through_fsspec():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    props = gpu_trace([A100])
    for n in range(6):
        fs.pipe(f"/devbook/run{n}/worker0.1.pt.trace.json.gz", props)
    try:
        files = scan_logdir("memory:///devbook").files
        assert len(files) == 6 and not any(f.url.startswith("/") for f in files)
        book = DeviceBook()
        assert book.read_missing(files)  # a few at a time, each a request to the store
        assert {book.get(f).name for f in files} == {A100["name"]}
    finally:
        fs.rm("/devbook", recursive=True)
