"""The tab's server under hostile conditions (issue 22): a load stuck in a read never holds
TensorBoard's exit or the small runs' loaders, runs of any number of spans become ready,
answers follow the file as it is now, and a file swapped for a symlink is never served."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, TraceBuilder
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.server import DataProvider
from tb_diagnostics.server.compare import compare
from tb_diagnostics.server.loader import Progress, SpanLoader
from tb_diagnostics.server.present import load_and_summarise


class FakeAnalysis:
    def __init__(self) -> None:
        self.model = type("M", (), {"fake_nbytes": 100})()


@pytest.fixture(autouse=True)
def _cheap_nbytes(monkeypatch):
    from tb_diagnostics.server.loader import model_nbytes

    monkeypatch.setattr("tb_diagnostics.server.loader.model_nbytes",
                        lambda m: getattr(m, "fake_nbytes", None) or model_nbytes(m))


def write_trace(path: Path, steps: int = 2, kernel: str = "k") -> Path:
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    t.top["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 2}
    for n in range(steps):
        t.step(n, n * 100, 100)
        t.launch(n * 100 + 5, 5, kernel, n * 100 + 20, 50)
    return t.write(path)


def span_file(name: str, size: int = 1000) -> SpanFile:
    return SpanFile(run="r", worker="w", span=name, url=f"memory://{name}",
                    relpath=f"r/{name}", size=size, mtime=1.0)


def ready(provider: DataProvider, run: str, worker: str, span: str,
          timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        code, body = provider.span(run, worker, span)
        if code != 202:
            return body
        assert time.monotonic() < deadline, "span never finished loading"
        time.sleep(0.02)


# ---- case 5: no load holds the server forever ------------------------------------------------
_STUCK_TENSORBOARD = textwrap.dedent("""
    import sys, threading, time, urllib.request
    from tb_diagnostics.server import present

    def stuck(f, *a, **k):  # a read that never returns: a FIFO, a stalled NFS mount
        print("STUCK", flush=True)
        threading.Event().wait()

    present.open_analysis = stuck
    port = sys.argv[1]

    def ask():
        url = (f"http://127.0.0.1:{port}/data/plugin/diagnostics/span"
               "?run=r&worker=w&span=1")
        for _ in range(600):
            try:
                urllib.request.urlopen(url, timeout=5).read()
                return
            except OSError:
                time.sleep(0.1)

    threading.Thread(target=ask, daemon=True).start()
    from tensorboard import main as tb_main
    sys.argv = ["tensorboard", "--logdir", sys.argv[2], "--port", port,
                "--host", "127.0.0.1", "--load_fast", "false"]
    tb_main.run_main()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensorboard_exits_on_sigterm_while_a_load_is_stuck(tmp_path):
    write_trace(tmp_path / "log" / "r" / "w.1.pt.trace.json")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO / "plugin"), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK_TENSORBOARD, str(_free_port()), str(tmp_path / "log")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()  # the load has entered its endless read
        assert line.strip() == "STUCK", proc.stderr.read() if proc.poll() is not None else line
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=5)  # a bound, with slack: the shutdown is immediate
        except subprocess.TimeoutExpired:
            pytest.fail("TensorBoard did not exit within 5 s of SIGTERM with a load stuck")
        assert rc == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_the_loader_threads_do_not_keep_the_process_alive():
    """No loader thread is one the interpreter joins at exit."""
    gate = threading.Event()

    def work(f: SpanFile, progress: Progress):
        gate.wait(10)
        return FakeAnalysis(), {"span": f.span}

    loader = SpanLoader(work, workers=2)
    try:
        loader.get(span_file("a"))
        loader.get(span_file("b", size=1 << 30))  # the big-file pool too
        time.sleep(0.1)
        mine = [t for t in threading.enumerate() if t.name.startswith("tb-diagnostics-load")]
        assert len(mine) == 2 and all(t.daemon for t in mine)
    finally:
        gate.set()
        loader.shutdown()


def test_stuck_loads_do_not_hold_the_loaders_a_good_run_needs():
    """Two files whose reads never return, requested first, hold their own threads only:
    a good run requested after them is loaded, and so are other stuck ones' queues."""
    forever = threading.Event()
    calls: list[str] = []

    def work(f: SpanFile, progress: Progress):
        calls.append(f.span)
        progress.set("reading", 0.1)
        if f.span.startswith("stuck"):
            forever.wait(30)
        return FakeAnalysis(), {"span": f.span}

    loader = SpanLoader(work, workers=2, stall_s=0.2)
    try:
        loader.get(span_file("stuck1"))
        loader.get(span_file("stuck2"))
        good = loader.wait(span_file("good"), timeout=10)
        assert good.error is None and good.summary == {"span": "good"}
        assert sorted(calls) == ["good", "stuck1", "stuck2"]
        stages = {p["span"]: p["stage"] for p in loader.progress()}
        assert stages == {"stuck1": "reading", "stuck2": "reading"}
        # A big file's slow load does not hold the next big one forever either.
        loader.get(span_file("stuck-big", size=1 << 30))
        big = loader.wait(span_file("big", size=1 << 30), timeout=10)
        assert big.summary == {"span": "big"}
    finally:
        forever.set()
        loader.shutdown()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_file_swapped_for_a_fifo_after_the_scan_is_an_error_and_holds_nothing(tmp_path):
    log = tmp_path / "log"
    for run in ("fifo", "good"):
        write_trace(log / run / "w.1.pt.trace.json")
    write_trace(log / "fifo" / "v.1.pt.trace.json")
    provider = DataProvider(str(log), scan_max_age_s=60.0, fresh_s=0.0)
    try:
        assert [r["run"] for r in provider.runs()["runs"]] == ["fifo", "good"]
        path = log / "fifo" / "w.1.pt.trace.json"
        path.unlink()
        os.mkfifo(path)  # nobody ever writes to it: a read would wait for ever
        body = ready(provider, "fifo", "w", "1", timeout=10)
        assert body["status"] == "error" and "FIFO" in body["error"]
        assert ready(provider, "good", "w", "1", timeout=10)["status"] == "ready"
        deadline = time.monotonic() + 10
        while (answer := provider.run("fifo"))[0] == 202:  # the run of what can be read
            assert time.monotonic() < deadline, "the run with a FIFO never became ready"
            time.sleep(0.02)
        assert [r["worker"] for r in answer[1]["ranks"]] == ["v"]
        assert provider.progress()["loading"] == []
        assert [e["message"] for e in provider.runs()["errors"]] == [body["error"]]
    finally:
        provider.shutdown()


# ---- case 6: runs of more than 512 spans ---------------------------------------------------
def test_a_run_of_600_spans_becomes_ready_and_loads_each_span_once(tmp_path):
    log = tmp_path / "log"
    real = write_trace(tmp_path / "one" / "w.1.pt.trace.json")
    from tb_diagnostics.logdir import scan_logdir

    f0 = scan_logdir(str(real.parent)).files[0]
    _, summary = load_and_summarise(f0, Progress(file=f0))
    for run in ("big", "other"):
        (log / run).mkdir(parents=True)
        for k in range(600 if run == "big" else 2):
            (log / run / f"w{k:03d}.1.pt.trace.json").write_text("{}")
    loads: Counter = Counter()
    lock = threading.Lock()

    def work(f: SpanFile, progress: Progress):
        with lock:
            loads[f.relpath] += 1
        rank = dict(summary["distributed"], rank=int(f.worker[1:]))
        return FakeAnalysis(), dict(summary, file=f.relpath, run=f.run, worker=f.worker,
                                    span=f.span, distributed=rank)

    provider = DataProvider(str(log), loader=SpanLoader(work, workers=4))
    try:
        deadline = time.monotonic() + 60
        while (answer := provider.run("big"))[0] == 202:
            assert max(loads.values(), default=1) == 1, "a span was loaded twice"
            assert time.monotonic() < deadline, "the run never became ready"
            time.sleep(0.02)
        code, doc = answer
        assert code == 200 and doc["status"] == "ready" and len(doc["ranks"]) == 600
        code, doc = compare(provider, "big", "other")
        while code == 202:
            assert time.monotonic() < deadline, "compare never became ready"
            time.sleep(0.02)
            code, doc = compare(provider, "big", "other")
        assert code == 200 and doc["status"] == "ready"
        assert len(loads) == 602 and set(loads.values()) == {1}
    finally:
        provider.shutdown()


# ---- case 10: fresh answers ----------------------------------------------------------------
def test_a_span_request_reads_the_file_as_it_is_now(tmp_path):
    """The first request after the profiler finished writing gets the new content, not the
    truncated-JSON error of the scan's version (the scan may be seconds old)."""
    log = tmp_path / "log"
    whole = write_trace(tmp_path / "whole.json", steps=3).read_bytes()
    path = log / "r" / "w.1.pt.trace.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(whole[: len(whole) // 2])
    provider = DataProvider(str(log), scan_max_age_s=60.0)
    try:
        first = ready(provider, "r", "w", "1")
        assert first["status"] == "error" and "truncated" in first["error"]
        path.write_bytes(whole)
        second = ready(provider, "r", "w", "1")
        assert second["status"] == "ready"
        assert [s["step"] for s in second["summary"]["steps"]] == [0, 1, 2]
    finally:
        provider.shutdown()


def test_a_deleted_file_is_not_found_at_once(tmp_path):
    log = tmp_path / "log"
    path = write_trace(log / "r" / "w.1.pt.trace.json")
    provider = DataProvider(str(log), scan_max_age_s=60.0)
    try:
        assert ready(provider, "r", "w", "1")["status"] == "ready"
        path.unlink()
        from tb_diagnostics.server import NotFound

        with pytest.raises(NotFound, match="no longer exists"):
            provider.span("r", "w", "1")
    finally:
        provider.shutdown()


def test_a_run_that_disappeared_takes_its_error_out_of_runs(tmp_path):
    log = tmp_path / "log"
    write_trace(log / "good" / "w.1.pt.trace.json")
    (log / "broken").mkdir()
    (log / "broken" / "w.1.pt.trace.json").write_text('{"traceEvents": [')
    provider = DataProvider(str(log))  # /runs lists from a scan up to fresh_s = 1 s old
    try:
        assert ready(provider, "broken", "w", "1")["status"] == "error"
        assert [e["run"] for e in provider.runs()["errors"]] == ["broken"]
        (log / "broken" / "w.1.pt.trace.json").unlink()
        (log / "broken").rmdir()
        assert provider.runs()["errors"] == []  # at once, even from that scan
        provider.fresh_s = 0.0
        listing = provider.runs()
        assert [r["run"] for r in listing["runs"]] == ["good"]
        assert listing["errors"] == []
    finally:
        provider.shutdown()


# ---- case 12: a symlink swapped in after the scan ------------------------------------------
def test_a_file_swapped_for_a_symlink_after_the_scan_is_not_served(tmp_path):
    outside = write_trace(tmp_path / "outside" / "secret.pt.trace.json", steps=5,
                          kernel="outside_kernel")
    log = tmp_path / "log"
    path = write_trace(log / "r" / "w.1.pt.trace.json", steps=2)
    provider = DataProvider(str(log), scan_max_age_s=60.0)
    try:
        assert [r["run"] for r in provider.runs()["runs"]] == ["r"]  # scanned: a regular file
        path.unlink()
        path.symlink_to(outside)
        body = ready(provider, "r", "w", "1")
        assert body["status"] == "error" and "summary" not in body
        assert body["file"] == "r/w.1.pt.trace.json"
        assert "symbolic link" in body["error"] and "\n" not in body["error"]
        code, step = provider.step("r", "w", "1", "0")
        assert code == 200 and step["status"] == "error" and "timeline" not in step
        assert provider.progress()["loading"] == []  # nothing was read through it
        assert [e.error for e in provider.loader.errors()] == [body["error"]]
    finally:
        provider.shutdown()
