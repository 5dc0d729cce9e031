"""No view climbs the nesting one level per pass (issue 28, item 1).

A trace 10x deeper and one 10x wider than a base trace (the same number of rows) must cost
each view about the same: the views walk the nesting by pointer jumping, log2(depth)
passes, where a climb of one parent level per pass takes ten times the passes on the
deep trace. The cost is counted, not timed: the lines of ``tb_diagnostics`` that a view
executes (each pass of a vectorised loop is a few lines, whatever its length), which is
the same on any machine and under any load. The results are checked against the plain
one-level-per-pass climbs they replace.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from linecount import executed_lines

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.load import load_trace_bytes

#: Base trace: steps x nesting depth. The deep one is 10x deeper, the wide one has 10x
#: the steps: both have 10x the base's rows.
STEPS, DEPTH = 6, 30
#: Allowed growth of the executed lines from the wide to the deep trace (and from the
#: base to the wide one): at most log2(300) / log2(30) = 1.7 for pointer jumping (1.0 to
#: 1.3 measured); the level-by-level climbs it replaced took 3.0 to 8.6.
GROWTH = 2.0


def comb_trace(steps: int, depth: int) -> bytes:
    """A GPU trace whose steps nest ``depth`` levels, a with_stack trace's shape: runs of
    Python frames (half the depth long) between ops of no known family (ops in
    ops); at every level, after the level below, a leaf op (``aten::add``, ``aten::mm``
    with shapes, or a custom op without) that launches one kernel. Every level holds a
    leaf, so climbs start at every depth."""
    events: list[dict] = []
    corr = 0

    def x(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1,
          **args: object) -> None:
        ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
              "dur": dur}
        if args:
            ev["args"] = args
        events.append(ev)

    width = 20 * depth + 40
    dims = {"Input Dims": [[8, 8], [8, 8]], "Input type": ["float", "float"]}
    for k in range(steps):
        base = k * (width + 20)
        x("user_annotation", f"ProfilerStep#{k}", base, width)
        for lv in range(depth):
            start, end = base + 5 + 10 * lv, base + width - 5 - 10 * lv
            if lv % max(3, depth // 2) == 0:
                x("cpu_op", "my::block", start, end - start)
            else:
                x("python_function", f"m.py({lv % 10}): f", start, end - start)
            leaf = ("aten::add", "aten::mm", "my::custom")[lv % 3]
            x("cpu_op", leaf, end - 8, 6, **(dims if lv % 3 < 2 else {}))
            corr += 1
            x("cuda_runtime", "cudaLaunchKernel", end - 7, 4, correlation=corr)
            x("kernel", f"kernel_{leaf}", end - 6, 1, pid=0, tid=7, correlation=corr,
              stream=7, device=0)
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU",
                                                     "totalGlobalMem": 1}],
           "traceEvents": events}
    return json.dumps(doc).encode()


def analysis_of(steps: int, depth: int) -> SpanAnalysis:
    return SpanAnalysis(load_trace_bytes(comb_trace(steps, depth), "comb.pt.trace.json"))




def _op_costs(a: SpanAnalysis) -> object:
    from tb_diagnostics.analysis.views.op_costs import op_costs

    return op_costs(a)


def _ancestry(a: SpanAnalysis) -> object:
    from tb_diagnostics.analysis.views import hierarchy

    return hierarchy.outermost_op(a), hierarchy.launching_op(a)


def _lane(a: SpanAnalysis) -> object:
    from tb_diagnostics.analysis.iterations.lane import make_lane

    return make_lane(a.model, a.model.host_rows, -1)


def _op_above(a: SpanAnalysis) -> object:
    from tb_diagnostics.analysis.critpath.names import op_above

    return op_above(a, np.arange(len(a.model)))


VIEWS = {"op_costs": _op_costs, "ancestry": _ancestry, "iteration lane": _lane,
         "critical-path op names": _op_above}


@pytest.fixture(scope="module")
def shapes() -> dict[str, SpanAnalysis]:
    return {"base": analysis_of(STEPS, DEPTH), "deep": analysis_of(STEPS, 10 * DEPTH),
            "wide": analysis_of(10 * STEPS, DEPTH)}


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_view_costs_the_same_on_a_deeper_trace_as_on_a_wider_one(view, shapes):
    rows = {k: len(a.model) for k, a in shapes.items()}
    assert 9 * rows["base"] < rows["deep"] < 11 * rows["base"]
    assert 0.9 < rows["deep"] / rows["wide"] < 1.1
    fn = VIEWS[view]
    fn(SpanAnalysis(shapes["base"].model))  # imports done: their lines are no view's cost
    # A fresh analysis each time: the views are memoised per span.
    lines = {k: executed_lines(lambda a=a: fn(SpanAnalysis(a.model)))
             for k, a in shapes.items()}
    assert lines["deep"] <= GROWTH * lines["wide"], lines
    assert lines["wide"] <= GROWTH * lines["base"], lines


# ---- the results: equal to the one-level-per-pass climbs they replace ----------------

def naive_climb(parent: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The former climb: one parent level per pass over the rows still climbing."""
    at = start.astype(np.int32).copy()
    todo = np.flatnonzero((at >= 0) & ~stop[np.maximum(at, 0)])
    while todo.size:
        at[todo] = parent[at[todo]]
        todo = todo[at[todo] >= 0]
        todo = todo[~stop[at[todo]]]
    return at


def naive_counted(a: SpanAnalysis) -> np.ndarray:
    """The former rule for the counted calls: a known op with a known op of its kind
    below it is not counted, found by climbing from every known op."""
    from tb_diagnostics.analysis.cost.model import family_of
    from tb_diagnostics.analysis.views.op_costs import _KINDS, _PRODUCTS

    m = a.model
    ops = a.op_rows
    kinds = np.zeros(ops.shape[0], dtype=np.int64)
    for i, r in enumerate(ops.tolist()):
        f = family_of(m.name_of(r))
        kinds[i] = 0 if f is None else 1 + _KINDS.index("product" if f in _PRODUCTS else f)
    inside = np.zeros(len(m), dtype=bool)
    for kind in range(1, len(_KINDS) + 1):
        rows = ops[kinds == kind]
        mask = np.zeros(len(m), dtype=bool)
        mask[rows] = True
        above = naive_climb(m.parent, m.parent[rows], mask)
        inside[above[above >= 0]] = True
    known = ops[kinds > 0]
    return known[~inside[known]]


@pytest.mark.parametrize("depth", [DEPTH, 10 * DEPTH])
def test_op_costs_equal_the_level_by_level_climb(depth):
    from tb_diagnostics.analysis.cost.model import family_of
    from tb_diagnostics.analysis.views.hierarchy import launching_op
    from tb_diagnostics.analysis.views.op_costs import op_costs

    a = analysis_of(3, depth)
    costs = op_costs(a)
    counted = naive_counted(a)
    m = a.model
    known = np.asarray([family_of(m.name_of(r)) is not None for r in costs.rows.tolist()])
    # The other rows are the ops bounding unowned work: never ops the model knows.
    assert counted.size and np.array_equal(costs.rows[known], counted)
    is_counted = np.zeros(len(m), dtype=bool)
    is_counted[counted] = True
    owner = naive_climb(m.parent, launching_op(a), is_counted)
    # Work no counted op owns went to a lower bound (or nothing); the rest, to its owner.
    owned = owner >= 0
    assert np.array_equal(costs.activity_owner[owned], owner[owned])
    assert (~owned).any()  # the custom ops' kernels climb to the root


def random_forest(rng: np.random.Generator, n: int, depth: int) -> np.ndarray:
    """Parents before children, chains up to ``depth`` long."""
    parent = np.full(n, -1, dtype=np.int32)
    level = np.zeros(n, dtype=np.int64)
    for i in range(1, n):
        if rng.random() < 0.95:
            p = i - 1 - int(rng.integers(0, min(i, 3)))
            if level[p] < depth:
                parent[i], level[i] = p, level[p] + 1
    return parent


@pytest.mark.parametrize("seed", range(5))
def test_count_above_equals_the_walk(seed):
    from tb_diagnostics.analysis.views.hierarchy import count_above

    rng = np.random.default_rng(seed)
    parent = random_forest(rng, 3000, depth=int(rng.integers(1, 500)))
    counted = rng.random(parent.shape[0]) < rng.choice([0.0, 0.3, 1.0])
    want = np.zeros(parent.shape[0], dtype=np.int64)
    for i in range(parent.shape[0]):
        p = int(parent[i])
        while p >= 0:
            want[i] += bool(counted[p])
            p = int(parent[p])
    assert np.array_equal(count_above(parent, counted), want)


@pytest.mark.parametrize("depth", [DEPTH, 10 * DEPTH])
def test_climb_ops_equals_the_level_by_level_climb(depth):
    from tb_diagnostics.analysis.views.hierarchy import climb_ops

    a = analysis_of(2, depth)
    m = a.model
    rng = np.random.default_rng(depth)
    start = rng.integers(-1, len(m), size=2000)
    for share in (0.0, 0.1, 0.7):
        stop = np.zeros(len(m), dtype=bool)
        stop[a.op_rows] = rng.random(a.op_rows.shape[0]) < share
        assert np.array_equal(climb_ops(a, start, stop), naive_climb(m.parent, start, stop))
    # A stop row that is not an op: the climb over every row, still the same answer.
    stop[np.flatnonzero(m.kind == Kind.PYTHON)[::7]] = True
    assert np.array_equal(climb_ops(a, start, stop), naive_climb(m.parent, start, stop))


def test_the_iteration_lane_depth_counts_the_calls_above(shapes):
    from tb_diagnostics.analysis.iterations.lane import make_lane

    m = shapes["deep"].model
    rows = m.host_rows
    lane = make_lane(m, rows, -1)
    want = np.zeros(rows.shape[0], dtype=np.int64)
    for i, r in enumerate(rows.tolist()):
        p = int(m.parent[r])
        while p >= 0:
            want[i] += m.kind[p] != Kind.PYTHON
            p = int(m.parent[p])
    assert np.array_equal(lane.depth, want)
    assert want.max() >= 3  # the step, the blocks: calls above calls, frames between
