"""The span's per-step figures from the window columns, not a view per window (issue 28).

Each column form is checked against the per-window form it replaced, to the bit, and the
span-level readers (the span's verdict, the verdict's paths) are checked to run no Python
per window: the lines they execute on 10x the steps stay within ``GROWTH`` of the base.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from linecount import executed_lines
from test_linearity_steps import GROWTH, STEPS, analysis_of

from tb_diagnostics.analysis import headline, path_clause
from tb_diagnostics.analysis.headline import verdict_by_time, verdict_split
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.step_names import _STEP_PREFIX, step_numbers
from tb_diagnostics.analysis.steps import find_host_steps
from tb_diagnostics.analysis.views import roofline, warmth
from tb_diagnostics.trace.categories import STEP_NAME
from tb_diagnostics.trace.load import load_trace_bytes


@pytest.fixture(scope="module")
def spans() -> dict[str, SpanAnalysis]:
    out = {"base": analysis_of(STEPS), "wide": analysis_of(10 * STEPS)}
    for a in out.values():
        path_clause.verdict_paths(a)  # every view they read, computed once (cached)
    return out


def test_verdict_split_is_verdict_by_time_to_the_bit():
    rng = np.random.default_rng(5)
    n = 500
    verdict = np.asarray(rng.choice(["mixed", "compute-bound", "input-bound"], n),
                         dtype=object)
    wall = rng.random(n) * 1e4 / 3  # sums that round differently pairwise and in order
    judged = wall - rng.random(n)
    judged[::7] = -0.0
    steps = np.arange(n, dtype=np.int64) * 3
    want = verdict_by_time(zip(steps.tolist(), verdict.tolist(), wall.tolist(),
                               judged.tolist(), strict=True))
    assert verdict_split(steps, verdict, wall, judged) == want
    none = verdict_by_time(zip([None] * n, verdict.tolist(), wall.tolist(), judged.tolist(),
                               strict=True))
    assert verdict_split(None, verdict, wall, judged) == none
    # A verdict whose every time is -0.0 sums to 0.0, as sum() starting at 0 does.
    (only,) = verdict_split(None, np.asarray(["mixed"], dtype=object), np.asarray([-0.0]),
                            np.asarray([-0.0]))
    assert math.copysign(1.0, only.judged_us) == 1.0 and only.wall_us == 0.0
    # Equal times: the verdict of the earlier step first.
    tie = verdict_split(np.asarray([1, 2]), np.asarray(["b", "a"], dtype=object),
                        np.asarray([1.0, 1.0]), np.asarray([1.0, 1.0]))
    assert [x.verdict for x in tie] == ["b", "a"]


def test_span_verdict_and_its_paths_run_no_python_per_window(spans):
    for fn in (headline.span_verdict.__wrapped__, path_clause.verdict_paths):
        lines = {k: executed_lines(lambda a=a, fn=fn: fn(a)) for k, a in spans.items()}
        assert lines["base"] > 0
        assert lines["wide"] <= GROWTH * lines["base"], (fn.__name__, lines)


def test_the_paths_take_the_windows_of_each_verdict(spans):
    a = spans["wide"]
    warm = warmth.step_walls(a).judged
    for x, clause in zip(headline.span_verdict(a).split, path_clause.verdict_paths(a),
                         strict=True):
        want = tuple(k for k, w in enumerate(a.windows) if warm[k] and w.verdict == x.verdict)
        assert clause.windows == want
        assert clause == path_clause.path_clause(a, list(want))


def test_window_shares_and_busy_columns_are_the_windows_figures(spans):
    a = spans["wide"]
    c = a.windows.columns
    assert c.device_busy.tolist() == [w.device_busy for w in a.windows]
    assert c.compute_busy.tolist() == [w.compute_busy for w in a.windows]
    got = roofline.compute_busy_us(a)
    assert got.tolist() == [w.compute_busy_us for w in a.windows]
    got[0] = -1.0  # a copy: the caller's to change
    assert a.windows[0].compute_busy_us != -1.0


def test_share_of_a_window_of_no_wall_is_zero():
    from tb_diagnostics.analysis.window_columns import _share

    got = _share(np.asarray([1.0, 2.0, 3.0]), np.asarray([0.0, math.nan, 4.0]))
    assert got.tolist() == [0.0, 0.0, 0.75]


def test_medians_by_key_are_numpy_medians():
    rng = np.random.default_rng(7)
    key = rng.integers(0, 9, 400).astype(np.int32)
    values = np.round(rng.random(400) * 100, 1)  # ties, odd and even counts
    got = warmth._medians_by(key, values)
    want = {int(k): float(np.median(values[key == k])) for k in np.unique(key).tolist()}
    assert got == want
    assert warmth._medians_by(key[:0], values[:0]) == {}
    assert warmth._medians_by(np.asarray([3, 3]), np.asarray([1.0, 4.0])) == {3: 2.5}


def _trace(names: list[str]) -> SpanAnalysis:
    events = [{"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": 1,
               "ts": 1000 + 100 * k, "dur": 100} for k, n in enumerate(names)]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                   "ts": 1010, "dur": 5})
    return SpanAnalysis(load_trace_bytes(json.dumps({"traceEvents": events}).encode(),
                                         "t.pt.trace.json"))


def _numbers_by_regex(strings: list[str]) -> tuple[list[int], list[int]]:
    found = [(i, g.group(1)) for i, s in enumerate(strings) if (g := STEP_NAME.match(s))]
    return [i for i, d in found if len(d) <= 15], [int(d) for _, d in found if len(d) <= 15]


@pytest.mark.parametrize("extra", [[], ["ProfilerStep#8\n"], ["ProfilerStep#\u0661\u0662"]])
def test_step_numbers_read_as_bytes_are_the_regex_s(extra):
    strings = ["aten::add", "ProfilerStep#0", "ProfilerStep#7", "ProfilerStep#" + "9" * 15,
               "ProfilerStep#" + "9" * 16, "ProfilerStep#1" + "0" * 40, "ProfilerStep#x",
               "ProfilerStep#000000000000042", "ProfilerStep#12a", *extra,
               *(f"ProfilerStep#{k}" for k in range(1000, 1300, 7))]
    ids = np.asarray([i for i, s in enumerate(strings) if STEP_NAME.search(s)], np.int32)
    got_ids, got = step_numbers(strings, ids)
    want_ids, want = _numbers_by_regex(strings)
    assert got_ids.tolist() == want_ids and got.tolist() == want
    assert got_ids.dtype == np.int32 and got.dtype == np.int64
    for few in (ids[:0], ids[:1]):
        one_ids, one = step_numbers(strings, few)
        assert one_ids.tolist() == few.tolist()[:1] and one.tolist() == want[:few.size]


def test_step_numbers_are_the_step_name_s_digits():
    assert STEP_NAME.pattern.startswith("^" + _STEP_PREFIX)
    names = ["ProfilerStep#7", "ProfilerStep#8\n", "ProfilerStep#" + "9" * 16,
             "ProfilerStep#10x", "xProfilerStep#11", "ProfilerStep#\u0661\u0662",
             "ProfilerStep#000123456789012"]
    a = _trace(names)
    hs = find_host_steps(a.model)
    want = [int(g.group(1)) for n in names
            if (g := STEP_NAME.match(n)) and len(g.group(1)) <= 15]
    assert hs.numbers.tolist() == want == [7, 8, 12, 123456789012]


def test_names_among_rows_are_the_model_s_matches_among_them():
    from tb_diagnostics.analysis.span import _names_among

    a = _trace([f"ProfilerStep#{k}" for k in range(40)])
    m = a.model
    pattern = STEP_NAME
    for rows in (np.arange(len(m)), np.arange(3), np.arange(0)):
        got = _names_among(m, rows, pattern)
        want = np.intersect1d(m.name_ids_matching(pattern), m.name[rows])
        assert got.tolist() == want.tolist() and got.dtype == np.int32


def _rows_during_by_scan(analysis: SpanAnalysis, lo: float, hi: float, limit: int) -> list[int]:
    """views.gaps.host_rows_during as it was: a scan of every row starting before hi."""
    from tb_diagnostics.analysis.views.gaps import _telling_rows

    m = analysis.model
    rows = _telling_rows(analysis)
    rows = rows[: np.searchsorted(m.start[rows], hi, side="left")]
    rows = rows[m.end[rows] > lo]
    if not rows.size:
        return []
    overlap = np.minimum(m.end[rows], hi) - np.maximum(m.start[rows], lo)
    order = np.lexsort((-m.start[rows], -np.round(overlap, 3)))
    return [int(r) for r in rows[order[:limit]]]


@pytest.mark.parametrize("n_long", [0, 3, 100])
def test_host_rows_during_reads_only_what_can_overlap(n_long):
    from tb_diagnostics.analysis.views import gaps

    rng = np.random.default_rng(n_long)
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{k % 7}", "pid": 1, "tid": 1 + k % 3,
               "ts": float(t), "dur": float(d)}
              for k, (t, d) in enumerate(zip(np.sort(rng.integers(0, 10_000, 400)),
                                             rng.integers(1, 60, 400), strict=True))]
    events += [{"ph": "X", "cat": "user_annotation", "name": "train", "pid": 1, "tid": 9,
                "ts": float(rng.integers(0, 5000)), "dur": float(rng.integers(3000, 9000))}
               for _ in range(n_long)]
    # Rows that end before they start (a damaged trace has them): a running latest end
    # behind the starts.
    events += [{"ph": "X", "cat": "cpu_op", "name": "odd", "pid": 1, "tid": 5,
                "ts": float(t), "dur": -50.0} for t in range(500, 10_000, 700)]
    a = SpanAnalysis(load_trace_bytes(json.dumps({"traceEvents": events}).encode(),
                                      "t.pt.trace.json"))
    for lo in rng.uniform(-100, 10_100, 60).tolist():
        hi = lo + float(rng.uniform(0, 400))
        assert gaps.host_rows_during(a, lo, hi, limit=7) == \
            _rows_during_by_scan(a, lo, hi, limit=7)


def test_host_rows_during_leaves_out_long_rows_that_start_after_the_interval():
    from tb_diagnostics.analysis.views import gaps

    # Fewer rows than _LONGEST: every row is a "longest" one, none in the running end.
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts,
               "dur": dur}
              for name, tid, ts, dur in (("a", 1, 0.0, 10.0), ("b", 2, 5.0, 40.0),
                                         ("c", 3, 31.0, 1000.0), ("d", 4, 32.0, 5.0))]
    a = SpanAnalysis(load_trace_bytes(json.dumps({"traceEvents": events}).encode(),
                                      "t.pt.trace.json"))
    t0 = float(a.model.start.min())
    for lo, hi in ((20.0, 25.0), (0.0, 31.0), (31.5, 40.0), (50.0, 60.0), (-5.0, 0.0)):
        got = gaps.host_rows_during(a, t0 + lo, t0 + hi, limit=5)
        assert got == _rows_during_by_scan(a, t0 + lo, t0 + hi, 5), (lo, hi)


def _self_segments_by_walk(m, rows) -> tuple[list[float], list[float]]:
    """SpanAnalysis.busy_intervals' CPU-only walk as it was: each op's children in turn."""
    starts, ends = [], []
    for r in rows.tolist():
        s, e = m.start[r], m.end[r]
        cursor = s
        for k in m.children(r).tolist():
            ks = max(m.start[k], cursor)
            if ks > cursor:
                starts.append(cursor)
                ends.append(min(ks, e))
            cursor = max(cursor, min(m.end[k], e))
        if e > cursor:
            starts.append(cursor)
            ends.append(e)
    return starts, ends


def test_self_segments_are_the_walk_s():
    from tb_diagnostics.analysis.intervals import union
    from tb_diagnostics.analysis.span import self_segments

    rng = np.random.default_rng(11)
    events = []
    for k in range(150):  # nested ops on two threads, children overlapping or spilling out
        t = float(rng.integers(0, 100_000))
        events.append({"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": k % 2,
                       "ts": t, "dur": 500.0})
        for j in range(int(rng.integers(0, 5))):
            events.append({"ph": "X", "cat": "cpu_op", "name": f"k{j}", "pid": 1,
                           "tid": k % 2, "ts": t + float(rng.integers(0, 520)),
                           "dur": float(rng.integers(0, 200))})
    m = load_trace_bytes(json.dumps({"traceEvents": events}).encode(), "t.pt.trace.json")
    for rows in (np.arange(len(m)), np.flatnonzero(m.parent < 0), np.arange(0)):
        s, e = self_segments(m, rows)
        want_s, want_e = _self_segments_by_walk(m, rows)
        got, want = union(s, e), union(np.asarray(want_s), np.asarray(want_e))
        assert got.start.tolist() == want.start.tolist()
        assert got.end.tolist() == want.end.tolist()
        assert sorted(zip(s.tolist(), e.tolist(), strict=True)) == \
            sorted(zip(want_s, want_e, strict=True))


def test_span_rows_step_columns_are_the_windows(spans):
    from tb_diagnostics.analysis.span_rows import span_rows

    a = spans["base"]
    sr = span_rows(a)
    w = list(a.windows)
    assert sr.step_index.tolist() == [x.index for x in w]
    assert sr.step_number.tolist() == [-1 if x.step is None else x.step for x in w]
    assert sr.step_start.tolist() == [x.start for x in w]
    assert sr.step_end.tolist() == [x.end for x in w]
    assert sr.step_host_start.tolist() == [x.host_start for x in w]
    assert sr.step_host_end.tolist() == [x.host_end for x in w]
