"""Shared fixtures: a tiny trace builder for exact-number tests, and the shared real traces."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()
SHARED_TRACES = SHARED / "traces"
SHARED_SPEC = SHARED / "spec"

#: The cache the user's own runs read and write, as it resolved before the suite started
#: (``$TB_DIAGNOSTICS_CACHE``, else ``$XDG_CACHE_HOME``, else ``~/.cache``): no test may
#: write there.
USER_CACHE = Path(os.environ.get("TB_DIAGNOSTICS_CACHE") or Path(
    os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tb-diagnostics").expanduser()
#: The session's own cache; set before any test module is imported (some build caches at
#: import) and inherited by the subprocesses tests start (the console script, TensorBoard).
_SESSION_CACHE_ROOT: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Every test that does not choose a cache (``main(["report", …])`` without
    ``--no-cache``, the tab's provider, ``python -m tb_diagnostics``) would use the
    user's cache: point both variables the cache reads at one temporary directory."""
    global _SESSION_CACHE_ROOT
    _SESSION_CACHE_ROOT = Path(tempfile.mkdtemp(prefix="tb-diagnostics-tests-"))
    os.environ["TB_DIAGNOSTICS_CACHE"] = str(_SESSION_CACHE_ROOT / "tb-diagnostics")
    os.environ["XDG_CACHE_HOME"] = str(_SESSION_CACHE_ROOT / "xdg")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHE_ROOT is not None:
        shutil.rmtree(_SESSION_CACHE_ROOT, ignore_errors=True)


def session_cache_root() -> Path:
    assert _SESSION_CACHE_ROOT is not None, "pytest_configure did not run"
    return _SESSION_CACHE_ROOT

HOST_PID, HOST_TID = 1, 1
GPU_PID, GPU_STREAM = 0, 7


class TraceBuilder:
    """Writes small Kineto-shaped traces; times in µs, like the profiler."""

    def __init__(self, device_properties: list[dict] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.top: dict[str, Any] = {"schemaVersion": 1}
        if device_properties is not None:
            self.top["deviceProperties"] = device_properties
        self._corr = 0

    def x(self, cat: str, name: str, ts: float, dur: float, *, pid: Any = HOST_PID,
          tid: Any = HOST_TID, **args: Any) -> dict[str, Any]:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args:
            ev["args"] = args
        self.events.append(ev)
        return ev

    def step(self, n: int, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
        return self.x("user_annotation", f"ProfilerStep#{n}", ts, dur, **kw)

    def op(self, name: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
        return self.x("cpu_op", name, ts, dur, **kw)

    def launch(self, ts: float, dur: float, kernel: str, k_ts: float, k_dur: float, *,
               stream: int = GPU_STREAM, runtime: str = "cudaLaunchKernel",
               cat: str = "kernel", **kw: Any) -> int:
        """A runtime call on the host and the device activity it launched."""
        self._corr += 1
        c = self._corr
        self.x("cuda_runtime", runtime, ts, dur, correlation=c, **kw)
        self.x(cat, kernel, k_ts, k_dur, pid=GPU_PID, tid=stream, correlation=c,
               stream=stream, device=0)
        return c

    def document(self) -> dict[str, Any]:
        return {**self.top, "traceEvents": self.events}

    def write(self, path: Path, *, gz: bool = False) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.document()).encode()
        path.write_bytes(gzip.compress(data) if gz else data)
        return path


@pytest.fixture
def trace() -> TraceBuilder:
    return TraceBuilder(device_properties=[{"id": 0, "name": "Test GPU", "totalGlobalMem": 1}])


@pytest.fixture
def cpu_trace() -> TraceBuilder:
    return TraceBuilder(device_properties=[])


def tree_digest(root: Path) -> dict[str, str]:
    """Content hash and mtime of every file below ``root``: proof that nothing was written."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            + f":{p.stat().st_mtime_ns}" for p in sorted(root.rglob("*")) if p.is_file()}


def analyse(builder: TraceBuilder, tmp_path: Path, **thresholds: Any):
    """Write, load and analyse a built trace; returns the SpanAnalysis."""
    from tb_diagnostics.analysis import SpanAnalysis, Thresholds
    from tb_diagnostics.trace import load_trace

    path = builder.write(tmp_path / "run" / "worker0.1.pt.trace.json")
    return SpanAnalysis(load_trace(str(path)), Thresholds(**thresholds))


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    return SHARED_TRACES


@pytest.fixture
def shared_spec() -> Path:
    if not SHARED_SPEC.is_dir():
        pytest.skip("../shared/spec is not present")
    return SHARED_SPEC


@pytest.fixture(scope="session", autouse=True)
def _log_dirs_are_never_modified():
    """Across the whole session, nothing in the shipped sample runs or the shared traces
    is created, changed or deleted (the tool is read-only on log dirs)."""
    roots = [r for r in (REPO / "log", SHARED_TRACES) if r.is_dir()]
    before = {r: tree_digest(r) for r in roots}
    yield
    for r in roots:
        assert tree_digest(r) == before[r], f"{r} was modified during the test session"


@pytest.fixture(autouse=True)
def _providers_are_shut_down(monkeypatch):
    """Every DataProvider a test starts (directly or through TensorBoard's plugin loader)
    is shut down after the test: its queued background loads must not keep parsing
    during the next tests, where they would take the cores from CPU-timed work."""
    from tb_diagnostics.server.provider import DataProvider

    started: list[DataProvider] = []
    init = DataProvider.__init__

    def recording_init(self, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(DataProvider, "__init__", recording_init)
    yield
    for provider in started:
        provider.shutdown()


def pytest_collection_modifyitems(config, items):
    """Browser tests last: they keep TensorBoard and Chromium running for the rest of the
    session, and CPU-only traces profiled by other tests must not share the cores with them
    (a preempted 2 µs op looks like 50 µs of work)."""
    items.sort(key=lambda item: "browser" in Path(str(item.fspath)).parts)
