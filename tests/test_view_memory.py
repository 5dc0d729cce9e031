"""The Memory view (report/views/memory.py, analysis/views/memory_view.py): its peak, its
allocations alive at the peak and its per-step figures against an independent reading of
the raw ``[memory]`` events, on hand-made traces and on the shared real ones."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import HOST_PID, HOST_TID, TraceBuilder, analyse
from tb_diagnostics.analysis.views.memory_view import MAX_CURVE_POINTS
from tb_diagnostics.report.views import ViewParamError, ViewParams, all_views

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
MB = 10**6
#: The shared runs recorded with profile_memory=True (../shared/traces/README.md).
MEMORY_RUNS = ("hta_v100_profile_memory_rank1_of2", "kineto_resnet50_v100_dataloader_workers0",
               "tracelens_h100_bert_small_inference", "tracelens_h100_qwen1.5_0.5b_inference")


def memory(analysis, **kw):
    extra = kw.pop("extra", None)
    return all_views()["memory"].document(analysis, ViewParams(limit=1000, extra=extra, **kw))


def mem(t: TraceBuilder, ts: float, nbytes: float, total: float, addr: int, *,
        device: int = 0, tid: int = HOST_TID) -> None:
    t.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                     "pid": HOST_PID, "tid": tid, "ts": ts,
                     "args": {"Device Type": 1, "Device Id": device, "Addr": addr,
                              "Bytes": nbytes, "Total Allocated": total,
                              "Total Reserved": 512 * MB}})


def built(t: TraceBuilder) -> TraceBuilder:
    """Two steps on one thread. A free of a block from before the trace (D, 20 MB of the
    200 MB) comes first. Step 1: ``aten::linear`` (→ ``aten::empty``) allocates A (100 MB)
    and B (50 MB); B is freed and its address reused by a lone ``aten::empty`` (B', 5 MB);
    ``aten::relu`` allocates C (80 MB): the peak (A + B' + C + 180 MB). C is freed in step
    2, A and B' never. Step 2: ``aten::cat`` allocates E (10 MB), kept."""
    base = 200 * MB
    t.step(1, 0, 1000)
    mem(t, 5, -20 * MB, base - 20 * MB, 0xD000)  # allocated before the trace, freed
    base -= 20 * MB
    t.op("aten::linear", 10, 100)
    t.op("aten::empty", 20, 5)
    mem(t, 21, 100 * MB, base + 100 * MB, 0xA000)
    t.op("aten::empty", 40, 5)
    mem(t, 41, 50 * MB, base + 150 * MB, 0xB000)
    mem(t, 150, -50 * MB, base + 100 * MB, 0xB000)
    # The same address as B, after B's free: a new block, still alive at the end.
    t.op("aten::empty", 155, 5)
    mem(t, 156, 5 * MB, base + 105 * MB, 0xB000)
    t.op("aten::relu", 200, 40)
    mem(t, 210, 80 * MB, base + 185 * MB, 0xC000)
    t.step(2, 1000, 1000)
    mem(t, 1100, -80 * MB, base + 105 * MB, 0xC000)
    t.op("aten::cat", 1200, 20)
    mem(t, 1210, 10 * MB, base + 115 * MB, 0xE000)
    return t


def raw_memory(events: list[dict]) -> dict[tuple[int, int], list[dict]]:
    """The [memory] events of a trace by (device type, device id), in time order."""
    out = defaultdict(list)
    for e in sorted((e for e in events if e.get("name") == "[memory]"
                     and e.get("ph") in ("i", "I")), key=lambda e: e["ts"]):
        a = e["args"]
        out[(a.get("Device Type"), a.get("Device Id"))].append(e)
    return out


def raw_alive_at_peak(evs: list[dict]) -> tuple[float, float, dict[int, dict] | None]:
    """Independently: the peak (the largest Total Allocated, the first such), its time, and
    the blocks alive right after it, by address (a free ends its block, a new allocation at
    a live address replaces it). 2021 traces have no totals: their curve is the running sum
    of Bytes."""
    if all("Total Allocated" in e["args"] for e in evs):
        totals = [e["args"]["Total Allocated"] for e in evs]
    else:
        totals, acc = [], 0
        for e in evs:
            acc += e["args"]["Bytes"]
            totals.append(acc)
    peak = max(totals)
    at = totals.index(peak)
    if not all("Addr" in e["args"] for e in evs):
        return peak, evs[at]["ts"], None  # 2021: no addresses, nothing to match
    live: dict[int, dict] = {}
    for e in evs[:at + 1]:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = e
        else:
            live.pop(a["Addr"], None)
    return peak, evs[at]["ts"], live


def test_peak_and_alive_at_peak_are_matched_by_address(trace, tmp_path):
    t = built(trace)
    doc = memory(analyse(t, tmp_path))
    (dev,) = doc["devices"]
    (evs,) = raw_memory(t.events).values()
    peak, ts, live = raw_alive_at_peak(evs)
    assert dev["peak_allocated_bytes"] == peak == 365 * MB
    assert dev["peak_at_us"] == ts - min(e["ts"] for e in t.events if e["ph"] == "X")
    assert dev["peak_step"] == 1 and dev["peak_reserved_bytes"] == 512 * MB
    alive = dev["alive_at_peak"]
    assert alive["count"] == len(live) == 3 and alive["bytes"] == 185 * MB
    assert {e["args"]["Addr"] for e in live.values()} == {0xA000, 0xB000, 0xC000}
    assert alive["before_trace_bytes"] == 180 * MB  # 200 MB before, 20 MB of it freed
    # By the outermost op around each allocation: A under aten::linear, C under aten::relu.
    rows = {r["op"]: r for r in doc["rows"]}
    assert {k: r["bytes"] for k, r in rows.items()} == {
        "aten::linear": 100 * MB, "aten::relu": 80 * MB, "aten::empty": 5 * MB}
    assert (rows["aten::linear"]["bytes"], rows["aten::linear"]["count"]) == (100 * MB, 1)
    assert rows["aten::linear"]["stack"] == "aten::linear > aten::empty"
    assert doc["rows"][0]["op"] == "aten::linear"  # largest first
    inner = {r["op"]: r["bytes"] for r in memory(analyse(t, tmp_path), group="inner")["rows"]}
    assert inner == {"aten::empty": 105 * MB, "aten::relu": 80 * MB}


def test_per_step_what_was_allocated_and_not_freed(trace, tmp_path):
    t = built(trace)
    (dev,) = memory(analyse(t, tmp_path))["devices"]
    s1, s2 = dev["per_step"]
    # Step 1 keeps A (100 MB, aten::linear), C (80 MB, freed only in step 2) and B' (5 MB).
    assert (s1["step"], s1["kept_count"], s1["kept_bytes"]) == (1, 3, 185 * MB)
    assert {o["op"]: o["bytes"] for o in s1["kept_by_op"]} == {
        "aten::linear": 100 * MB, "aten::relu": 80 * MB, "aten::empty": 5 * MB}
    assert (s1["start_allocated_bytes"], s1["end_allocated_bytes"]) == (200 * MB, 365 * MB)
    assert (s2["kept_count"], s2["kept_bytes"], s2["kept_by_op"][0]["op"]) == (1, 10 * MB,
                                                                               "aten::cat")
    # The step's own view: its curve, peak and rows.
    d2 = memory(analyse(t, tmp_path), step="2")
    (dev2,) = d2["devices"]
    assert dev2["events"] == 2 and dev2["peak_allocated_bytes"] == 295 * MB
    assert [s["step"] for s in d2["steps"]] == [2]


def test_an_event_outside_every_op_and_on_another_thread(trace, tmp_path):
    t = trace
    t.step(1, 0, 100)
    t.op("aten::mm", 10, 20)
    mem(t, 50, 8 * MB, 8 * MB, 0x10)  # after the op, inside the step only
    mem(t, 60, 4 * MB, 12 * MB, 0x20, tid=99)  # a thread with no complete events
    rows = {r["op"]: r["bytes"] for r in memory(analyse(t, tmp_path))["rows"]}
    assert rows == {"(no op on its thread)": 12 * MB}


def test_a_trace_without_memory_events_says_how_to_record_them(trace, tmp_path):
    trace.step(1, 0, 100)
    trace.op("aten::mm", 10, 20)
    doc = memory(analyse(trace, tmp_path))
    assert doc["available"] is False and doc["devices"] == [] and doc["rows"] == []
    assert "profile_memory=True" in doc["empty_reason"]
    assert "profile_memory=True" in all_views()["memory"].text(doc)


def test_the_curve_is_bounded_and_keeps_the_peak(trace, tmp_path):
    t = trace
    t.step(1, 0, 100_000)
    total, n = 0.0, 20_000
    for i in range(n):
        # A saw tooth with one spike: the spike must survive the downsampling.
        size = (50 * MB if i // 2 == 6172 else MB) * (1 if i % 2 == 0 else -1)
        total += size
        mem(t, 1 + i * 4, size, total, 0x1000 + (i // 2) * 64)
    doc = memory(analyse(t, tmp_path))
    (dev,) = doc["devices"]
    curve = dev["curve"]
    assert curve["of_events"] == n and curve["points"] <= MAX_CURVE_POINTS + 2
    assert max(curve["allocated_bytes"]) == dev["peak_allocated_bytes"] == 50 * MB
    assert min(curve["allocated_bytes"]) == 0.0
    assert curve["ts_us"] == sorted(curve["ts_us"])


def test_device_and_group_parameters_are_checked(trace, tmp_path):
    a = analyse(built(trace), tmp_path)
    with pytest.raises(ViewParamError, match="group must be op or inner"):
        memory(a, group="shapes")
    with pytest.raises(ViewParamError, match="device: no 'CUDA 7'"):
        memory(a, extra={"device": "CUDA 7"})
    assert {r["device"] for r in memory(a, extra={"device": "CUDA 0"})["rows"]} == {"CUDA 0"}
    got = memory(a, sort="count", q="relu")["rows"]
    assert [r["op"] for r in got] == ["aten::relu"]


def test_memory_findings_are_listed_for_the_chart(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 10_000)  # one step: growth inside it counts (memory-growth)
    t.op("aten::index_select", 100, 50)
    mem(t, 110, 1.5 * 2**30, 2.3e9, 0x100)
    t.op("aten::index_select", 300, 50)
    mem(t, 310, 20 * 2**30, 2.3e9 + 20 * 2**30, 0x200)
    doc = memory(analyse(t, tmp_path))
    (f,) = [f for f in doc["findings"] if f["rule"] == "memory-growth"]
    assert f["device"] == "CUDA 0" and f["steps"] == [1] and f["severity"] == "warning"


def test_memory_findings_are_the_reports_under_the_runs_thresholds(tmp_path):
    """Through the tab's route, with thresholds that are not the defaults: the card lists
    exactly the memory findings of the span's summary (the report's rules run)."""
    import time

    from tb_diagnostics.analysis import Thresholds
    from tb_diagnostics.server.provider import DataProvider

    # 100 MB more at each of four steps' ends (memory-growth), 512 MB reserved on a part
    # of 550 MB (memory-near-capacity).
    t = TraceBuilder(device_properties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                         "totalGlobalMem": 550 * MB}])
    for s in range(4):
        t.step(s, s * 1000, 900)
        t.op("aten::cat", s * 1000 + 10, 20)
        mem(t, s * 1000 + 15, 100 * MB, (s + 1) * 100 * MB, 0x100 + s)
    t.write(tmp_path / "log" / "r" / "w.1.pt.trace.json")
    th = Thresholds(compute_bound=0.9, low_busy=0.5, cpu_heavy_self_us=1.0)
    provider = DataProvider(str(tmp_path / "log"), thresholds=th, fresh_s=0.0)
    try:
        deadline = time.monotonic() + 60
        while (got := provider.view("memory", "r", "w", "1", {}))[0] != 200:
            assert time.monotonic() < deadline, got
            time.sleep(0.02)
        card = got[1]["findings"]
        summary = provider.span("r", "w", "1")[1]["summary"]
    finally:
        provider.shutdown()
    rules = {"memory-growth", "memory-near-capacity"}
    reported = [{"rule": f["rule"], "severity": f["severity"], "title": f["title"],
                 "device": f["subject"], "message": f["message"], "steps": f["steps"]}
                for f in summary["findings"] if f["rule"] in rules]
    assert {f["rule"] for f in card} == rules
    assert card == reported


def _shared(run: str) -> Path:
    files = sorted((SHARED / run).glob("*.pt.trace.json*")) if (SHARED / run).is_dir() else []
    if not files:
        pytest.skip(f"shared trace {run} not available")
    return files[0]


@pytest.mark.parametrize("run", MEMORY_RUNS)
def test_shared_peak_and_alive_match_the_raw_events(run, tmp_path):
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    path = _shared(run)
    raw = path.read_bytes()
    events = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["traceEvents"]
    by_device = raw_memory(events)
    doc = memory(SpanAnalysis(load_trace(str(path))))
    assert doc["available"] and len(doc["devices"]) == len(by_device)
    for dev in doc["devices"]:
        key = (dev["device_type"], dev["device_id"])
        evs = by_device[key]
        peak, _, live = raw_alive_at_peak(evs)
        assert dev["events"] == len(evs)
        assert dev["peak_allocated_bytes"] == peak
        assert max(x for x in dev["curve"]["allocated_bytes"] if x is not None) == peak
        reserved = [e["args"]["Total Reserved"] for e in evs if "Total Reserved" in e["args"]]
        assert dev["peak_reserved_bytes"] == (max(reserved) if reserved else None)
        assert dev["relative"] == (len(reserved) < len(evs))
        alive = dev["alive_at_peak"]
        if live is None:  # 2021: nothing to match
            assert alive["matched"] is False and alive["count"] is None
            assert "no Addr" in alive["note"]
            assert all(st["kept_bytes"] is None for st in dev["per_step"])
            continue
        assert alive["matched"] and alive["count"] == len(live), dev["device"]
        assert alive["bytes"] == sum(e["args"]["Bytes"] for e in live.values())
        rows = [r for r in doc["rows"] if r["device"] == dev["device"]]
        assert sum(r["count"] for r in rows) == len(live)


def test_cli_json_csv_text_and_the_api_frame(trace, tmp_path, capsys):
    import csv
    import io

    import tb_diagnostics
    from tb_diagnostics.cli import main

    built(trace).write(tmp_path / "log" / "run" / "w.1.pt.trace.json")
    logdir = str(tmp_path / "log")
    assert main(["memory", logdir, "--format", "json", "--no-cache"]) == 0
    view = json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["spans"][0]["memory"]
    assert view["devices"][0]["peak_allocated_bytes"] == 365 * MB
    assert {r["op"]: r["count"] for r in view["rows"]} == {
        "aten::linear": 1, "aten::relu": 1, "aten::empty": 1}
    assert main(["memory", logdir, "--format", "csv", "--group", "inner", "--no-cache"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["op"]: r["bytes"] for r in rows} == {"aten::empty": "105000000.0",
                                                   "aten::relu": "80000000.0"}
    assert main(["memory", logdir, "--step", "2", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "CUDA 0: peak allocated 295.00 MB" in text and "aten::cat" in text
    pytest.importorskip("pandas")
    frame = tb_diagnostics.analyze(logdir, cache=False).memory_frame()
    assert list(frame.columns[:5]) == ["run", "worker", "span", "device", "op"]
    assert dict(zip(frame["op"], frame["bytes"], strict=True)) == {
        "aten::linear": 100 * MB, "aten::relu": 80 * MB, "aten::empty": 5 * MB}


def test_memory_events_without_any_complete_event(trace, tmp_path):
    for i in range(3):
        mem(trace, 10 + i, 10, 10 * (i + 1), 0x100 + i)
    doc = memory(analyse(trace, tmp_path))
    (dev,) = doc["devices"]
    assert dev["peak_allocated_bytes"] == 30 and dev["alive_at_peak"]["count"] == 3
    assert [(r["op"], r["bytes"]) for r in doc["rows"]] == [("(no op on its thread)", 30)]


def test_many_steps_are_spread_over_the_span(trace, tmp_path):
    from tb_diagnostics.report.views.memory import MAX_STEPS

    n = MAX_STEPS * 3
    for s in range(n):
        trace.step(s, s * 10, 9)
        mem(trace, s * 10 + 1, MB, MB * (s + 1), 0x100 + s)
    doc = memory(analyse(trace, tmp_path))
    steps = [s["step"] for s in doc["steps"]]
    assert len(steps) == MAX_STEPS and steps[0] == 0 and steps[-1] == n - 1
    assert doc["steps_total"] == n
    kept = doc["devices"][0]["per_step"]
    assert len(kept) == MAX_STEPS and kept[-1]["step"] == n - 1 and kept[-1]["kept_bytes"] == MB
