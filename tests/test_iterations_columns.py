"""The iteration search's per-iteration comparisons as column work (issue 28): each
against the Python form it replaced (a frozenset, a tuple, an ``array_equal`` or a climb
per iteration), on made-up columns; and the search itself on a loop of many iterations
with no Python per iteration (lines counted at N and 10·N, as ``test_linearity_steps``).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pytest
from linecount import executed_lines
from test_linearity_steps import GROWTH

from tb_diagnostics.analysis.iterations import search_iterations, slices
from tb_diagnostics.analysis.iterations.repeats import _mode_slice, _same_run
from tb_diagnostics.trace.load import load_trace_bytes


def _cuts(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return np.sort(np.r_[0, rng.integers(0, n + 1, k - 1), n])


def test_slice_groups_group_equal_slices_and_only_them():
    rng = np.random.default_rng(3)
    for _ in range(20):
        values = rng.integers(-1, 3, 300)
        at = _cuts(rng, 300, 60)
        got = slices.slice_groups(values, at)
        ids: dict[tuple, int] = {}
        want = [ids.setdefault(tuple(values[a:b].tolist()), len(ids))
                for a, b in itertools.pairwise(at)]
        assert got is not None and got.tolist() == want
    assert slices.slice_groups(np.arange(3), np.asarray([1])).tolist() == []


def test_set_groups_are_frozensets():
    rng = np.random.default_rng(4)
    for _ in range(20):
        values = rng.integers(-1, 5, 400)
        at = _cuts(rng, 400, 50)
        got = slices.set_groups(values, at, 5)
        ids: dict[frozenset, int] = {}
        want = [ids.setdefault(frozenset(values[a:b].tolist()), len(ids))
                for a, b in itertools.pairwise(at)]
        assert got is not None and got.tolist() == want


def test_a_fingerprint_collision_is_told_not_grouped(monkeypatch):
    # Every place weighs 0: every two slices of one length collide.
    monkeypatch.setattr(slices, "_places", lambda n: np.zeros(n, dtype=np.uint64))
    assert slices.slice_groups(np.asarray([1, 2, 3, 4]), np.asarray([0, 2, 4])) is None
    assert slices.slice_groups(np.asarray([1, 2, 1, 2]), np.asarray([0, 2, 4])).tolist() \
        == [0, 0]


def test_mode_slice_is_counter_s_most_common():
    rng = np.random.default_rng(5)
    for _ in range(30):
        values = rng.integers(0, 2, 200)
        at = _cuts(rng, 200, 80)
        want = Counter(tuple(values[a:b].tolist())
                       for a, b in itertools.pairwise(at)).most_common(1)[0]
        assert _mode_slice(values, at) == want
    assert _mode_slice(np.arange(4), np.asarray([0])) is None


@pytest.mark.parametrize("length", [1, 3, 7])
def test_same_run_is_array_equal_per_cut(length):
    rng = np.random.default_rng(length)
    inverse = np.tile(np.arange(length), 40)
    inverse[rng.integers(0, inverse.size, 15)] = 9
    for b in (0, 2, inverse.size - 2):
        cuts = np.arange(b, inverse.size, length)
        want = [np.array_equal(inverse[c:c + length], inverse[b:b + length]) for c in cuts]
        assert _same_run(inverse, cuts, b, length).tolist() == want


def _loop(n: int, kind: str) -> bytes:
    events = []
    for k in range(n):
        t = 1000 + 20 * k
        if kind == "optimizer":
            events += [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1,
                 "ts": t, "dur": 5},
                {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step",
                 "pid": 1, "tid": 1, "ts": t + 8, "dur": 10},
                {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1,
                 "ts": t + 9, "dur": 6}]
        else:
            events += [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                        "ts": t + dt, "dur": 3}
                       for name, dt in (("aten::mm", 0), ("aten::relu", 6), ("aten::sum", 10),
                                        ("aten::item", 14))]
    return json.dumps({"traceEvents": events}).encode()


@pytest.mark.parametrize("kind", ["optimizer", "repeats"])
def test_the_search_runs_no_python_per_iteration(kind):
    # 600 and 6,000: past the few bounded searches (the loop's seams try at most
    # MAX_BLOCKS groupings), so only what grows with the iterations counts.
    models = {n: load_trace_bytes(_loop(n, kind), "t.pt.trace.json") for n in (600, 6000)}
    for n, m in models.items():
        it, _ = search_iterations(m)
        assert it is not None and len(it) == n
        assert (it.host_start - it.host_start[0]).tolist() == [20.0 * k for k in range(n)]
    lines = {n: executed_lines(lambda m=m: search_iterations(m)) for n, m in models.items()}
    assert lines[6000] <= GROWTH * lines[600], lines
