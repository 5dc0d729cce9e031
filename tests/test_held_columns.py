"""The model's and the span's held columns, made in fewer passes or narrower, are the
same, to the bit, as the forms they replaced (checked against those forms here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import GPU_PID, TraceBuilder
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.step_names import step_numbers
from tb_diagnostics.analysis.step_windows import last_device_ends
from tb_diagnostics.analysis.steps import find_host_steps
from tb_diagnostics.trace.categories import STEP_NAME
from tb_diagnostics.trace.load import load_trace_bytes
from tb_diagnostics.trace.model import ROW_CHUNK


def _model(t: TraceBuilder):
    return load_trace_bytes(json.dumps(t.document()).encode(), "t.json")


def _nested_trace(seed: int, steps: int = 40) -> TraceBuilder:
    """Steps of random nested ops (children that spill past their parent too), launches
    onto two streams (kernels late enough to run into the next step), NaN-free."""
    rng = np.random.default_rng(seed)
    t = TraceBuilder()
    at = 0.0
    for n in range(steps):
        wall = float(rng.uniform(50, 120))
        t.step(n, at, wall)
        a = at + 1.0
        while a < at + wall - 10:
            d = float(np.round(rng.uniform(1, 30), 3))
            t.op("aten::outer", a, d)
            b = a
            for _ in range(int(rng.integers(0, 4))):
                kd = float(np.round(rng.uniform(0.1, 9), 3))
                t.op("aten::inner", b, kd)  # may spill past the outer op's end
                if rng.random() < 0.5:
                    t.launch(b + 0.05, 0.02, "k", b + float(rng.uniform(1, 150)),
                             float(rng.uniform(0.5, 40)), stream=int(rng.integers(7, 9)))
                b += kd * float(rng.uniform(0.3, 1.1))
            a += d + float(rng.uniform(0, 3))
        at += wall
    return t


def _self_time_by_add_at(m) -> np.ndarray:
    """The former ``_self_time_all``: np.add.at, chunk by chunk."""
    covered = np.zeros(len(m))
    end = m.end
    for a in range(0, len(m), ROW_CHUNK):
        par = m.parent[a:a + ROW_CHUNK]
        child = np.flatnonzero(par >= 0)
        par = par[child]
        child += a
        clipped = np.minimum(end[child], end[par]) - m.start[child]
        np.add.at(covered, par, np.maximum(clipped, 0.0))
    np.subtract(m.dur, covered, out=covered)
    return np.maximum(covered, 0.0, out=covered)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_self_time_is_add_at_to_the_bit(seed):
    m = _model(_nested_trace(seed))
    got = m.self_time()
    assert (got.view(np.uint64) == _self_time_by_add_at(m).view(np.uint64)).all()


def test_self_time_of_a_model_without_children():
    t = TraceBuilder()
    t.op("a", 0, 5)
    m = _model(t)
    assert m.self_time().tolist() == [5.0]


@pytest.mark.parametrize("seed", [0, 3])
def test_last_device_ends_are_fmax_at(seed):
    a = SpanAnalysis(_model(_nested_trace(seed)))
    m = a.model
    want = np.full(len(a.host_steps), np.nan)
    steps = a.activity_step
    ok = steps >= 0
    np.fmax.at(want, steps[ok], m.end[m.device_activity_rows][ok])
    got = last_device_ends(a)
    assert np.array_equal(got, want, equal_nan=True)
    order, cut = a._activities_by_window
    assert order.dtype == np.int32 and cut.dtype == np.int32
    assert (order == np.argsort(steps, kind="stable")).all()


def test_last_device_ends_with_steps_that_launch_nothing():
    t = TraceBuilder()
    for n in range(5):
        t.step(n, 100 * n, 90)
    t.launch(110, 1, "k", 150, 500)  # step 1 only; the kernel runs long
    t.launch(5, 1, "k", 6, 2)  # step 0
    a = SpanAnalysis(_model(t))
    got = last_device_ends(a)
    assert np.isnan(got[[2, 3, 4]]).all() and got[0] == 8.0 and got[1] == 650.0
    # The activities in step order: the grouping is the identity, as the sort gives it.
    order, cut = a._activities_by_window
    assert order.tolist() == np.argsort(a.activity_step, kind="stable").tolist() == [0, 1]
    assert cut.tolist() == [0, 1, 2, 2, 2, 2]


def test_host_steps_rows_are_the_isin_rows():
    t = _nested_trace(4, steps=12)
    t.x("gpu_user_annotation", "ProfilerStep#3", 10, 5, pid=GPU_PID, tid=7)  # not host
    t.x("python_function", "ProfilerStep#5", 10, 5)  # Python: not a step
    m = _model(t)
    hs = find_host_steps(m)
    ids, _ = step_numbers(m.strings, m.name_ids_matching(STEP_NAME))
    from tb_diagnostics.trace.categories import Kind

    want = np.flatnonzero(np.isin(m.name, ids) & m.is_host)
    want = want[m.kind[want] != Kind.PYTHON]
    assert hs.rows.tolist() == want.tolist()
    assert hs.numbers.tolist() == list(range(12))
