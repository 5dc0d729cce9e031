"""Shared helpers for the rule tests: a tiny Kineto trace builder and the shared traces."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.trace import load_trace

SHARED_TRACES = (Path(__file__).parents[2] / ".." / "shared" / "traces").resolve()

HOST_PID, HOST_TID = 100, 100
GPU_PID, GPU_STREAM = 0, 7
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
        "computeMajor": 9, "computeMinor": 0, "numSms": 132}
V100 = {"id": 0, "name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34089730048,
        "computeMajor": 7, "computeMinor": 0, "numSms": 80}


class TraceBuilder:
    """Writes a Kineto-style (2024 format) trace from a few calls; times in µs."""

    def __init__(self, directory: Path | None = None,
                 device_properties: list[dict] | None = None, **top: Any) -> None:
        self.directory = directory
        self.events: list[dict] = []
        self.top = {"schemaVersion": 1, "deviceProperties": device_properties
                    if device_properties is not None else [H100], **top}
        self._corr = 1000
        self._pyid = 0

    # ---- host ------------------------------------------------------------
    def x(self, cat: str, name: str, ts: float, dur: float, pid: Any = HOST_PID,
          tid: Any = HOST_TID, **args: Any) -> dict:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
              "dur": dur, "args": args}
        self.events.append(ev)
        return ev

    def step(self, n: int, ts: float, dur: float, **kw: Any) -> dict:
        return self.x("user_annotation", f"ProfilerStep#{n}", ts, dur, **kw)

    def annotation(self, name: str, ts: float, dur: float, **kw: Any) -> dict:
        return self.x("user_annotation", name, ts, dur, **kw)

    def op(self, name: str, ts: float, dur: float, dims: list | None = None,
           types: list | None = None, stack: str | None = None, **kw: Any) -> dict:
        args = dict(kw.pop("args", {}))
        if dims is not None:
            args["Input Dims"] = dims
        if types is not None:
            args["Input type"] = types
        if stack is not None:
            args["Call stack"] = stack
        return self.x("cpu_op", name, ts, dur, **args, **kw)

    def python(self, name: str, ts: float, dur: float, parent: int | None = None,
               **kw: Any) -> int:
        """A python_function frame; returns its Python id (pass it as ``parent``)."""
        self._pyid += 1
        self.x("python_function", name, ts, dur, **{"Python id": self._pyid,
                                                    "Python parent id": parent}, **kw)
        return self._pyid

    def runtime(self, name: str, ts: float, dur: float, corr: int | None = None,
                cat: str = "cuda_runtime", **kw: Any) -> int:
        if corr is None:
            self._corr += 1
            corr = self._corr
        self.x(cat, name, ts, dur, correlation=corr, **kw)
        return corr

    def overhead(self, name: str, ts: float, dur: float, **kw: Any) -> dict:
        return self.x("overhead", name, ts, dur, **kw)

    # ---- device ----------------------------------------------------------
    def device(self, cat: str, name: str, ts: float, dur: float, corr: int | None,
               stream: int = GPU_STREAM, **args: Any) -> dict:
        extra = {} if corr is None else {"correlation": corr}
        return self.x(cat, name, ts, dur, pid=GPU_PID, tid=stream, device=GPU_PID,
                      stream=stream, **extra, **args)

    def kernel(self, name: str, ts: float, dur: float, corr: int | None, **kw: Any) -> dict:
        return self.device("kernel", name, ts, dur, corr, **kw)

    def launch(self, kernel: str, ts: float, k_ts: float, k_dur: float,
               api: str = "cudaLaunchKernel", api_dur: float = 5.0, cat: str = "kernel",
               **kw: Any) -> int:
        """A launch call at ``ts`` and the device activity it starts at ``k_ts``."""
        corr = self.runtime(api, ts, api_dur, cat="cuda_driver" if api.startswith("cu")
                            and not api.startswith("cuda") else "cuda_runtime")
        self.device(cat, kernel, k_ts, k_dur, corr, **kw)
        return corr

    def memory(self, ts: float, nbytes: float, allocated: float | None = None,
               reserved: float | None = None, device_type: int = 1, device_id: int = 0) -> None:
        args = {"Bytes": nbytes, "Device Type": device_type, "Device Id": device_id}
        if allocated is not None:
            args["Total Allocated"] = allocated
        if reserved is not None:
            args["Total Reserved"] = reserved
        self.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                            "pid": HOST_PID, "tid": HOST_TID, "ts": ts, "args": args})

    # ---- output ----------------------------------------------------------
    def write(self, directory: Path | None = None, name: str = "worker0.1.pt.trace.json") -> Path:
        directory = directory or self.directory
        assert directory is not None, "give the builder a directory"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        path.write_text(json.dumps({**self.top, "traceEvents": self.events}))
        return path

    def analysis(self, directory: Path | None = None) -> SpanAnalysis:
        return SpanAnalysis(load_trace(str(self.write(directory))))

    def steady_steps(self, n: int, step_us: float = 1000.0, kernels: int = 4,
                     kernel_us: float = 150.0, first: int = 1, start: float = 0.0,
                     op: str = "aten::mm", kernel: str = "gemm_kernel") -> None:
        """``n`` identical steps; each op launches one kernel, the device is mostly idle-free."""
        for s in range(n):
            t0 = start + s * step_us
            self.step(first + s, t0, step_us - 1)
            for k in range(kernels):
                ts = t0 + 10 + k * (kernel_us + 20)
                self.op(op, ts, 15)
                self.launch(kernel, ts + 5, ts + 12, kernel_us)


    def buffer_request_steps(self) -> None:
        """Step 1 has a 2.5 ms device gap opened by an Activity Buffer Request (inside the
        launch of ``add_kernel``); steps 2-4 are clean."""
        self.step(1, 0, 3000)
        self.op("aten::mm", 10, 20)
        self.launch("gemm_kernel", 12, 20, 100)
        self.op("aten::add", 125, 2520)
        self.runtime("cudaLaunchKernel", 130, 2500, corr=99)
        self.overhead("Activity Buffer Request", 140, 2450, pid=-1, tid=0)
        self.device("kernel", "add_kernel", 2640, 100, 99)
        self.steady_steps(3, first=2, start=3000)


    def compiled_steps(self, n: int = 4, regions: list[str] | None = None,
                       compile_in: int | None = None, fx_hashes: list[str] | None = None,
                       work_us: float = 50.0) -> None:
        """``n`` 1 ms steps, each calling a compiled function the torch 2.x way:
        ``TorchDynamo Cache Lookup`` then ``Torch-Compiled Region: F/R`` holding the AOT
        wrapper, optionally ``## Call CompiledFxGraph <hash> ##``, and one ``aten::mm``."""
        for s in range(n):
            t0 = s * 1000
            self.step(s + 1, t0, 999)
            if compile_in == s + 1:
                self.op("entire_frame_compile", t0 + 2, 8)
            self.op("TorchDynamo Cache Lookup", t0 + 10, 30)
            region = regions[s] if regions else "Torch-Compiled Region: 0/0"
            self.op(region, t0 + 45, 200)
            self.op("AOTDispatcher Runtime Wrapper Prologue", t0 + 50, 12)
            if fx_hashes:
                self.annotation(f"## Call CompiledFxGraph {fx_hashes[s]} ##", t0 + 70, work_us + 5)
            self.op("aten::mm", t0 + 72, work_us)


@pytest.fixture
def builder(tmp_path: Path) -> TraceBuilder:
    """A fresh builder writing into this test's tmp_path (H100 device properties)."""
    return TraceBuilder(tmp_path)


@pytest.fixture
def make_builder(tmp_path: Path):
    """Builders with options: ``make_builder(device_properties=[V100], profile_memory=1)``."""
    count = iter(range(1000))

    def make(**kw: Any) -> TraceBuilder:
        return TraceBuilder(tmp_path / f"t{next(count)}", **kw)

    return make


def shared_file(run_name: str, index: int = 0) -> Path:
    """A shared real trace, or skip the test when ../shared is absent."""
    folder = SHARED_TRACES / run_name
    files = sorted(folder.glob("*.pt.trace.json*")) if folder.is_dir() else []
    if len(files) <= index:
        pytest.skip(f"shared trace {run_name} not available")
    return files[index]


def shared_file_ids() -> list[tuple[str, int]]:
    """(run, index) of every shared trace file, for parametrising over all of them; one
    ("absent", 0) when ../shared is absent (its test then skips in shared_file)."""
    if not SHARED_TRACES.is_dir():
        return [("absent", 0)]
    out = []
    for run in sorted(p for p in SHARED_TRACES.iterdir() if p.is_dir()):
        n = len(list(run.glob("*.pt.trace.json*")))
        out.extend((run.name, i) for i in range(n))
    return out


_CACHE: dict[tuple[str, int], SpanAnalysis] = {}


def shared_analysis(run_name: str, index: int = 0) -> SpanAnalysis:
    """The analysis of a shared trace, loaded once per test session."""
    key = (run_name, index)
    if key not in _CACHE:
        _CACHE[key] = SpanAnalysis(load_trace(str(shared_file(run_name, index))))
    return _CACHE[key]


@pytest.fixture
def shared():
    """``shared(run, index=0)``: the analysis of a shared real trace (skips when absent)."""
    return shared_analysis


@pytest.fixture(scope="session")
def compiled_cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> SpanAnalysis:
    """A real torch.compile trace recorded on the CPU (aot_eager backend, no compiler needed):
    6 steps, the frame compiled in step 0 and recompiled in step 1 for a new shape."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    path = tmp_path_factory.mktemp("compiled") / "worker0.1.pt.trace.json"

    def fn(x, w, b):
        return torch.add(torch.matmul(x, w), b)

    compiled = torch.compile(fn, backend="aot_eager")
    x, w, b = torch.randn(64, 64), torch.randn(64, 64), torch.randn(64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU],
                     schedule=schedule(wait=0, warmup=0, active=6, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
            for i in range(6):
                with record_function("matmul_add"):
                    compiled(x if i != 1 else torch.randn(32, 64), w, b)
                prof.step()
    torch._dynamo.reset()
    return SpanAnalysis(load_trace(str(path)))
