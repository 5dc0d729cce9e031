"""The timeline across a span (analysis/span_timeline.py): level of detail on the server.

Every figure is checked against the raw events of the trace JSON, read here: the
merged bins' counts and busy time add up to the raw events in range, wide events
come as themselves, and the answer stays bounded whatever the span's size.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED_TRACES, TraceBuilder, analyse
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.span_rows import chain_depth, span_rows
from tb_diagnostics.analysis.span_timeline import SpanTimelineError, span_timeline
from tb_diagnostics.analysis.timeline import MAX_DEPTH, _depths
from tb_diagnostics.trace import load_trace

#: What neither timeline draws: Python frames and the profiler's own span.
NOT_DRAWN = {"python_function", "Trace"}


def raw_drawn(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") not in NOT_DRAWN]


def busy_trace(python: bool = True) -> TraceBuilder:
    """Two steps; step 1 holds 400 tiny ops (1 µs, every 2 µs) under one wide op, a long
    kernel and 300 tiny kernels; step 2 is one op with three nested children."""
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    t.step(1, 0, 1000)
    t.op("aten::wide", 0, 900)
    for i in range(400):
        t.op("aten::tiny_a" if i % 4 else "aten::tiny_b", 10 + 2 * i, 1)
    t.launch(850, 5, "big_gemm", 860, 500)
    for i in range(300):
        t.x("kernel", "small_kernel", 1400 + 1.5 * i, 0.5, pid=1, tid=7, stream=7, device=0)
    t.step(2, 1000, 1000)
    t.op("aten::outer", 1100, 800)
    t.op("aten::mid", 1150, 600)
    t.op("aten::inner", 1200, 100)
    if python:
        t.x("python_function", "model.py(3): forward", 1000, 900)
    t.x("gpu_user_annotation", "ProfilerStep#1", 850, 700, pid=1, tid=7, stream=7, device=0)
    return t


def clipped_busy(events: list[dict], lo: float, hi: float) -> float:
    return sum(max(min(e["ts"] + e["dur"], hi) - max(e["ts"], lo), 0.0) for e in events
               if e["ts"] < hi and e["ts"] + e["dur"] > lo)


def in_range(events: list[dict], lo: float, hi: float) -> list[dict]:
    return [e for e in events if e["ts"] < hi and e["ts"] + e["dur"] > lo]


def check_adds_up(tl: dict, raw: list[dict], origin: float) -> None:
    """Singles plus bins hold exactly the raw drawn events in range, and their time."""
    lo, hi = tl["range"]["start_us"] + origin, tl["range"]["end_us"] + origin
    want = in_range(raw, lo, hi)
    ev, merged = tl["events"], tl["merged"]
    bins = set(merged["index"])
    singles = [i for i in range(len(ev["row"])) if i not in bins]
    assert all(ev["row"][i] >= 0 for i in singles)
    assert all(ev["row"][i] == -1 for i in bins)
    assert len(singles) + sum(merged["count"]) == len(want) == tl["total"]
    busy = sum(ev["dur_us"][i] for i in singles) + sum(merged["busy_us"])
    assert busy == pytest.approx(clipped_busy(raw, lo, hi), rel=1e-6, abs=1e-3 * len(ev["row"]))


def test_bins_add_up_to_the_raw_events_and_wide_ones_stay_single(tmp_path):
    t = busy_trace()
    a = analyse(t, tmp_path)
    raw = raw_drawn(t.document())
    origin = min(e["ts"] for e in t.events)
    tl = span_timeline(a, width=200)
    check_adds_up(tl, raw, origin)
    names = [tl["names"][i] for i in tl["events"]["name"]]
    bins = set(tl["merged"]["index"])
    px = (tl["range"]["end_us"] - tl["range"]["start_us"]) / 200
    assert tl["bin_us"] == pytest.approx(px)
    # Every event at least a pixel wide is there as itself, with its model row.
    singles = Counter((names[i], tl["events"]["dur_us"][i]) for i in range(len(names))
                      if i not in bins)
    wide = Counter((e["name"], e["dur"]) for e in raw if e["dur"] >= px)
    assert wide and all(singles[k] >= n for k, n in wide.items()), (wide, singles)
    # The tiny ops are merged: 1 µs each at 10 µs a pixel.
    assert "aten::tiny_a" in {names[i] for i in bins}
    assert len(tl["events"]["row"]) < len(raw) / 4
    # A zoom to 40 µs shows them one by one (each 1 µs >= 40/200 µs).
    z = span_timeline(a, 100.0, 140.0, width=200)
    check_adds_up(z, raw, origin)
    assert not z["merged"]["index"] and z["single"] == z["total"]


def test_dominant_name_has_the_most_busy_time(tmp_path):
    t = TraceBuilder([])
    t.step(1, 0, 100)
    for i in range(3):
        t.op("aten::many", 10 + i, 0.3)  # 0.9 µs in all
    t.op("aten::one", 13.5, 0.6)  # the longest single event, but less time
    a = analyse(t, tmp_path)
    tl = span_timeline(a, 0.0, 100.0, width=50)  # bins of 2 µs: [10, 12), [12, 14)
    ev, merged = tl["events"], tl["merged"]
    by_start = {ev["start_us"][i]: (tl["names"][ev["name"][i]], merged["count"][k])
                for k, i in enumerate(merged["index"])}
    assert by_start[10.0] == ("aten::many", 2)
    assert by_start[12.0] == ("aten::one", 2)  # 0.3 µs of many, 0.6 µs of one


def test_bounded_whatever_the_span(tmp_path):
    t = TraceBuilder([])
    t.step(1, 0, 200_000)
    rng = np.random.default_rng(3)
    for tid in range(12):  # 12 threads, each 4,000 events of random length
        ts = 0.0
        for d in rng.exponential(20.0, 4000).tolist():
            t.op(f"op{tid % 3}", ts, d, tid=100 + tid)
            ts += d * 1.2
    a = analyse(t, tmp_path)
    raw = raw_drawn(t.document())
    for width, cap in ((1500, 5000), (4000, 5000), (800, 300)):
        tl = span_timeline(a, width=width, max_items=cap)
        assert tl["shown"] <= cap
        check_adds_up(tl, raw, 0.0)
    mid = span_timeline(a, 50_000.0, 60_000.0, width=1000, max_items=500)
    assert mid["shown"] <= 500
    check_adds_up(mid, raw, 0.0)


@pytest.mark.parametrize("python", [True, False])
def test_depths_are_the_step_timeline_walk(tmp_path, python):
    """With Python frames every lane is searched; without, the host takes the model's
    nesting and only the device lanes are searched: the walk's depths either way."""
    t = busy_trace(python)
    a = analyse(t, tmp_path)
    sr = span_rows(a)
    m = a.model
    rows = np.sort(sr.order)  # model order: the walk's
    want = _depths(m.lane[rows], m.start[rows], m.end[rows])
    got = np.empty(len(m), dtype=np.int64)
    for k, (x, y) in zip(sr.keys.tolist(), zip(sr.bounds[:-1], sr.bounds[1:], strict=True),
                         strict=True):
        got[sr.order[x:y]] = k % MAX_DEPTH
    assert got[rows].tolist() == want.tolist()
    assert chain_depth(np.asarray([-1, 0, 1, 0, 3, -1])).tolist() == [0, 1, 2, 1, 2, 0]
    names = {m.name_of(r): int(got[r]) for r in rows.tolist()}
    # Under ProfilerStep#2 (depth 0).
    assert (names["aten::outer"], names["aten::mid"], names["aten::inner"]) == (1, 2, 3)


def test_steps_and_lanes_and_errors(tmp_path):
    a = analyse(busy_trace(), tmp_path)
    tl = span_timeline(a, width=400)
    assert [s["step"] for s in tl["steps"]] == [1, 2]
    assert tl["steps"][1]["host_start_us"] == 1000.0
    # Lanes stay the same whatever the range: the step's thread first, then the streams.
    z = span_timeline(a, 1100.0, 1200.0, width=400)
    assert z["lanes"] == tl["lanes"] and not tl["lanes"][0]["device"]
    # Step 1's device window runs to 1360 µs (big_gemm): both steps are in view.
    want = [w.step for w in a.windows if min(w.start, w.host_start) < 1200
            and max(w.end, w.host_end) > 1100]
    assert [s["step"] for s in z["steps"]] == want == [1, 2]
    late = span_timeline(a, 1900.0, 1950.0, width=400)
    assert [s["step"] for s in late["steps"]] == [2]
    assert tl["links"]  # the wide launch → big_gemm
    for bad in ((10.0, 5.0, 400), (float("nan"), 5.0, 400), (0.0, 10.0, 5)):
        with pytest.raises(SpanTimelineError):
            span_timeline(a, *bad)


def _shared(name: str) -> Path:
    found = sorted((SHARED_TRACES / name).glob("*.pt.trace.json*")) if SHARED_TRACES.is_dir() \
        else []
    if not found:
        pytest.skip(f"../shared/traces/{name} is not present")
    return found[0]


@pytest.mark.parametrize("name", ["kineto_resnet50_v100_dataloader_workers0",
                                  "hta_a100_torch_compile_triton_tiny"])
def test_shared_trace_adds_up(name):
    path = _shared(name)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    a = SpanAnalysis(load_trace(str(path)))
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"
          and isinstance(e.get("ts"), (int, float))]
    origin = min(e["ts"] for e in xs)
    raw = [dict(e, dur=e.get("dur") or 0) for e in xs if e.get("cat") not in NOT_DRAWN]
    deep = span_rows(a).deep_start.size
    tl = span_timeline(a, width=1600)
    assert tl["shown"] <= 5000
    if not deep:  # nothing nested deeper than the timeline draws
        check_adds_up(tl, raw, origin)
    steps = a.windows
    w = steps[len(steps) // 2]
    z = span_timeline(a, w.host_start, w.host_end, width=1600)
    assert z["shown"] <= 5000
    if not deep:
        check_adds_up(z, raw, origin)
    # By name: what the singles and the bins' dominant names hold never exceeds the raw.
    names = Counter(tl["names"][i] for i in tl["events"]["name"])
    raw_names = Counter(e["name"] for e in raw)
    assert all(raw_names[n] >= c for n, c in names.items())


def test_warm_lays_the_rows_out_once_in_the_background(tmp_path, monkeypatch):
    import tb_diagnostics.analysis.span_rows as st

    a = analyse(busy_trace(), tmp_path)
    calls = []
    real = st.span_rows.__wrapped__

    def counted(analysis):
        calls.append(1)
        return real(analysis)

    monkeypatch.setattr(st, "span_rows", st.computed(counted))
    st.warm(a)
    st.warm(a)  # once per analysis
    tl = span_timeline(a, width=400)  # waits for the layout rather than building it again
    assert len(calls) == 1 and tl["total"] > 0
