"""Property tests over generated traces: the engine only ever raises its own error type, and
the step invariants hold (windows partition time, busy ≤ wall, busy + idle = wall)."""

from __future__ import annotations

import contextlib
import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.trace import load_trace_bytes

CATS = ["cpu_op", "Operator", "user_annotation", "cuda_runtime", "Runtime", "cuda_driver",
        "kernel", "Kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "python_function",
        "cuda_sync", "Trace", "overhead", "mystery", None]
NAMES = ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3", "aten::mm", "aten::item",
         "cudaLaunchKernel", "cudaStreamSynchronize", "gemm",
         "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "<script>", "名前", ""]

times = st.floats(min_value=0, max_value=1e4, allow_nan=False) | st.integers(0, 10_000)
junk = st.none() | st.text(max_size=3) | st.booleans() | st.integers(-5, 5) | st.just([1])


@st.composite
def event(draw, hostile: bool):
    ev = {
        "ph": draw(st.sampled_from(["X", "X", "X", "i", "s", "f", "M"]) | (junk if hostile
                                                                            else st.just("X"))),
        "cat": draw(st.sampled_from(CATS)),
        "name": draw(st.sampled_from(NAMES) | (junk if hostile else st.sampled_from(NAMES))),
        "pid": draw(st.sampled_from([0, 1, "1", "Spans"])),
        "tid": draw(st.sampled_from([1, 2, 7, "7", "stream 7"])),
        "ts": draw(times | junk if hostile else times),
        "dur": draw(times | junk if hostile else times),
    }
    if draw(st.booleans()):
        ev["args"] = {
            "correlation": draw(st.integers(0, 6) | junk if hostile else st.integers(0, 6)),
            "External id": draw(st.integers(0, 3)),
            "Python parent id": draw(st.none() | st.integers(0, 3)),
        }
    if draw(st.booleans()):
        ev["id"] = draw(st.integers(0, 6))
    return ev


def traces(hostile: bool):
    return st.lists(event(hostile), max_size=40).map(
        lambda evs: json.dumps({"traceEvents": evs}).encode())


def check_invariants(a: SpanAnalysis) -> None:
    windows = a.windows
    assert windows
    for w in windows:
        assert w.end >= w.start
        assert -1e-6 <= w.device_busy_us <= w.wall_us + 1e-6
        assert 0.0 <= w.device_busy <= 1.0 + 1e-9
        assert all(v >= 0 for v in w.idle.values())
        total = w.device_busy_us + sum(w.idle.values())
        assert total == pytest.approx(w.wall_us, abs=1e-6 * max(1.0, w.wall_us))
    for prev, nxt in itertools.pairwise(windows):
        assert nxt.start >= prev.start
        assert nxt.start == pytest.approx(prev.end)  # steps partition time


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(hostile=False))
def test_well_typed_traces_always_analyse_and_keep_the_invariants(data):
    check_invariants(SpanAnalysis(load_trace_bytes(data, "gen.json")))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(hostile=True))
def test_hostile_traces_load_or_raise_trace_load_error(data):
    try:
        model = load_trace_bytes(data, "gen.json")
    except TraceLoadError:
        return
    check_invariants(SpanAnalysis(model))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_trace_load_error(data):
    with contextlib.suppress(TraceLoadError):
        load_trace_bytes(data, "gen.json")
