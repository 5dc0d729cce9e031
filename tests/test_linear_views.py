"""The ancestry views climb by pointer jumping (log depth passes): they equal the plain
one-level-per-pass climb they replace, on deep synthetic traces and on the shared ones.

Only equality is tested here; their time is measured by ``bench/run_scale.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views import hierarchy
from tb_diagnostics.trace.load import load_trace, load_trace_bytes
from tb_diagnostics.trace.model import row_indices


def naive_nearest_marked(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    out = np.full(parent.shape[0], -1, dtype=np.int64)
    for i in range(parent.shape[0]):
        r = i
        while r >= 0 and not marked[r]:
            r = int(parent[r])
        out[i] = r
    return out


def naive_innermost(analysis: SpanAnalysis) -> np.ndarray:
    """The former view: one parent level per pass over every row still climbing."""
    m = analysis.model
    ops = hierarchy.is_op(analysis)
    anc = m.parent.copy()
    todo = row_indices(anc >= 0)
    todo = todo[~ops[anc[todo]]]
    while todo.size:
        anc[todo] = m.parent[anc[todo]]
        todo = todo[anc[todo] >= 0]
        todo = todo[~ops[anc[todo]]]
    return anc


def naive_outermost(analysis: SpanAnalysis, inner: np.ndarray) -> np.ndarray:
    m = analysis.model
    ops = hierarchy.is_op(analysis)
    top = np.where(ops, np.arange(len(m), dtype=np.int32), inner)
    todo = row_indices(top >= 0)
    while todo.size:
        par = m.parent[top[todo]]
        up = (par >= 0) & ops[np.maximum(par, 0)]
        todo = todo[up]
        top[todo] = par[up]
    return top


def random_forest(rng: np.random.Generator, n: int, depth: int) -> np.ndarray:
    """Parents before children, chains up to ``depth`` long."""
    parent = np.full(n, -1, dtype=np.int32)
    level = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        if rng.random() < 0.9:
            p = i - 1 - int(rng.integers(0, min(i, 4)))
            if level[p] < depth:
                parent[i], level[i] = p, level[p] + 1
    return parent


@pytest.mark.parametrize("seed", range(6))
def test_nearest_marked_equals_the_walk(seed):
    rng = np.random.default_rng(seed)
    parent = random_forest(rng, 3000, depth=int(rng.integers(1, 400)))
    marked = rng.random(parent.shape[0]) < rng.choice([0.0, 0.01, 0.2, 0.9])
    got = hierarchy.nearest_marked(parent, marked)
    assert got.dtype == np.int32
    assert np.array_equal(got, naive_nearest_marked(parent, marked))


def test_nearest_marked_on_nothing():
    got = hierarchy.nearest_marked(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=bool))
    assert got.shape == (0,)


def deep_trace(rng: np.random.Generator, steps: int, depth: int) -> bytes:
    """A with_stack-shaped CPU trace: deep python_function stacks, ops under them, ops in
    ops, annotations between; every event strictly inside its parent."""
    events = []

    def emit(cat: str, name: str, ts: float, dur: float) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1,
                       "ts": round(ts, 3), "dur": round(dur, 3)})

    def fill(ts: float, dur: float, level: int) -> None:
        t, end = ts + 0.25, ts + dur - 0.25
        while t < end - 2:
            # The first child takes most of its parent (deep chains), the others are short.
            share = rng.uniform(0.85, 0.99) if t == ts + 0.25 else rng.uniform(0.05, 0.3)
            d = min(end - t, max(2.0, float(share * (end - t))))
            roll = rng.random()
            if level >= depth or d < 3:
                emit("cpu_op", f"aten::leaf{int(rng.integers(3))}", t, d)
            elif roll < 0.6:
                emit("python_function", f"m.py({level}): f{int(rng.integers(5))}", t, d)
                fill(t, d, level + 1)
            elif roll < 0.85:
                emit("cpu_op", f"aten::op{int(rng.integers(4))}", t, d)
                fill(t, d, level + 1)
            else:
                emit("user_annotation", "label", t, d)
                fill(t, d, level + 1)
            t += d + 0.25

    for k in range(steps):
        emit("user_annotation", f"ProfilerStep#{k}", k * 100_000.0, 90_000.0)
        fill(k * 100_000.0, 90_000.0, 1)
    return json.dumps({"traceEvents": events}).encode()


@pytest.mark.parametrize("seed,depth", [(0, 8), (1, 40), (2, 120)])
def test_views_equal_their_naive_forms_on_deep_traces(seed, depth):
    rng = np.random.default_rng(seed)
    model = load_trace_bytes(deep_trace(rng, steps=1, depth=depth), "deep.json")
    assert len(model) > 500
    a = SpanAnalysis(model)
    inner = hierarchy.innermost_op(a)
    assert inner.dtype == np.int32
    expected = naive_innermost(a)
    assert np.array_equal(inner, expected)
    assert np.array_equal(hierarchy.outermost_op(a), naive_outermost(a, expected))


@pytest.mark.shared
def test_views_equal_their_naive_forms_on_the_shared_traces():
    from conftest import SHARED_TRACES

    paths = sorted(SHARED_TRACES.glob("*/*.pt.trace.json*")) if SHARED_TRACES.is_dir() else []
    if not paths:
        pytest.skip("../shared/traces is not present")
    for path in paths:
        a = SpanAnalysis(load_trace(str(path)))
        expected = naive_innermost(a)
        assert np.array_equal(hierarchy.innermost_op(a), expected), path.name
        assert np.array_equal(hierarchy.outermost_op(a), naive_outermost(a, expected)), path.name


@pytest.mark.parametrize("seed", range(4))
def test_the_replay_graphs_top_level_rows_equal_the_walk_to_the_root(seed):
    from tb_diagnostics.analysis.replay.host_points import top_level as _top_level

    rng = np.random.default_rng(seed)
    parent = random_forest(rng, 3000, depth=int(rng.integers(1, 400)))
    rows = rng.choice(parent.shape[0], size=500)
    want = []
    for r in rows.tolist():
        while parent[r] >= 0:
            r = int(parent[r])
        want.append(r)
    assert _top_level(parent, rows).tolist() == want
