"""A pool worker killed mid-file (SIGKILL, as the out-of-memory killer sends) costs at most
that file: the files in flight are retried in a fresh pool, and a file that kills its
process every time is the only one reported with an error.

The kills are real: a watcher thread sends SIGKILL to the pool child that holds one trace
file open (``/proc/<pid>/fd``), as an external killer would pick the process whose file
blew up its memory. That file is large enough to stay open for a while as it streams.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import TraceBuilder
from tb_diagnostics.engine import summarise_files
from tb_diagnostics.logdir import SpanFile, scan_logdir

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(),
                                reason="needs /proc to see which process holds a file")


def _small(builder: TraceBuilder, k: int) -> TraceBuilder:
    for s in range(3):
        t0 = s * 1000.0
        builder.step(s + 1, t0, 900)
        builder.op("aten::mm", t0 + 10, 200 + k)
        builder.launch(t0 + 20, 5, "gemm", t0 + 30, 400 + 10 * k)
    return builder


def _large(path: Path) -> Path:
    """A plain trace of about 9 MB: it streams for long enough to be caught holding it."""
    t = TraceBuilder(device_properties=[{"id": 0, "name": "G"}])
    for s in range(4):
        t.step(s + 1, s * 100_000.0, 99_000)
    for i in range(80_000):
        t.op("aten::add", float(i * 4), 3.0)
    return t.write(path)


@pytest.fixture
def log_dir(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "logs"
    for k in range(5):
        _small(TraceBuilder(device_properties=[{"id": 0, "name": "G"}]), k).write(
            root / "run" / f"worker{k}.1.pt.trace.json")
    big = _large(root / "run" / "worker9.1.pt.trace.json")
    return root, big


def _holds(pid: int, path: Path) -> bool:
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return True
    return False


@contextlib.contextmanager
def killer(path: Path, times: int) -> Iterator[list[int]]:
    """SIGKILL, up to ``times`` times, the child process of this one that has ``path``
    open; yields the list of the pids it killed."""
    killed: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set() and len(killed) < times:
            for child in multiprocessing.active_children():
                pid = child.pid
                if pid is not None and pid not in killed and _holds(pid, path):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            stop.wait(0.002)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join()


def _files(root: Path) -> list[SpanFile]:
    files = scan_logdir(str(root)).files
    assert len(files) == 6
    return files


def test_a_worker_killed_once_loses_no_file(log_dir):
    root, big = log_dir
    files = _files(root)
    expected = summarise_files(files, workers=1)  # in this process: no pool to break
    with killer(big, times=1) as killed:
        got = summarise_files(files, workers=2)
    assert len(killed) == 1  # the kill really happened
    assert got == expected  # every file, each as if nothing had been killed


def test_a_file_that_kills_its_process_every_time_is_the_only_one_lost(log_dir):
    root, big = log_dir
    files = _files(root)
    expected = summarise_files(files, workers=1)
    with killer(big, times=100) as killed:
        got = summarise_files(files, workers=2)
    assert len(killed) >= 3  # the first pool, the fresh pool, its own process
    assert set(got) == set(expected)
    culprit = f"run/{big.name}"
    assert got[culprit]["steps"] == []
    assert got[culprit]["errors"] == [
        f"{culprit}: the process analysing it was killed (SIGKILL: out of memory?)"]
    for relpath, doc in expected.items():
        if relpath != culprit:
            assert got[relpath] == doc


def test_the_report_survives_the_kill(log_dir, capsys):
    """The CLI's JSON report names every file, the killed one with its error line, and
    exits 0 (it was rc 1, empty stdout and a BrokenProcessPool traceback)."""
    import json

    from tb_diagnostics.cli import main

    root, big = log_dir
    with killer(big, times=100):
        rc = main(["report", str(root), "--format", "json", "--workers", "2", "--no-cache"])
    out = capsys.readouterr().out
    assert rc == 0
    spans = [s for r in json.loads(out)["runs"] for w in r["workers"] for s in w["spans"]]
    assert len(spans) == 6
    errors = {s["file"]: s["errors"] for s in spans if s["errors"]}
    assert list(errors) == [f"run/{big.name}"]
    assert "killed (SIGKILL: out of memory?)" in errors[f"run/{big.name}"][0]
