""""Open in Perfetto": a span or a step as Chrome-trace JSON (trace/chrome_export.py), the
CLI (``export --format chrome-trace``) and the routes (/chrome_trace, /timeline).

The step's events are counted here from the raw trace JSON and compared with the
export, by name and event by event; the export is loaded back through our own loader.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from test_tb_plugin import BASE, get_ready, tb_app

from conftest import SHARED_TRACES, TraceBuilder
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.span_timeline import file_range
from tb_diagnostics.analysis.timeline import step_range
from tb_diagnostics.cli import main
from tb_diagnostics.trace import load_trace
from tb_diagnostics.trace.chrome_export import EPS_US, chrome_trace


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path_factory.mktemp("cache")))


def three_steps(base_ns: int | None = 1_700_000_000_000_000_000) -> TraceBuilder:
    """Three steps with launches, flows, memory samples and thread names, in a file whose
    ts are offsets from baseTimeNanoseconds (PyTorch >= 2.4)."""
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    if base_ns is not None:
        t.top["baseTimeNanoseconds"] = base_ns
    t.events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
                     "args": {"name": "main thread"}})
    for n in range(3):
        s = 1000 + 1000 * n
        t.step(n + 1, s, 1000)
        t.op("aten::mm", s + 10, 300, **{"Input Dims": [[8, 8], [8, 8]]})
        c = t.launch(s + 20, 10, f"gemm_{n}", s + 50, 700, grid=[4, 1, 1], block=[128, 1, 1])
        t.events += [{"ph": "s", "id": c, "pid": 1, "tid": 1, "ts": s + 20, "cat": "ac2g",
                      "name": "ac2g"},
                     {"ph": "f", "id": c, "pid": 1, "tid": 7, "ts": s + 50, "cat": "ac2g",
                      "name": "ac2g", "bp": "e"},
                     {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": s + 15,
                      "args": {"Addr": 1 + n, "Bytes": 256, "Total Allocated": 256 * (n + 1),
                               "Device Id": 0, "Device Type": 1}}]
        t.op("aten::relu", s + 400, 100)
    t.x("python_function", "model.py(1): <module>", 900, 3200)
    return t


def raw_in_range(doc: dict, lo: float, hi: float) -> list[dict]:
    """The events of ``[lo, hi)`` (the file's clock) by the export's documented rule."""
    out = []
    for e in doc["traceEvents"]:
        ts, ph = e.get("ts"), e.get("ph")
        if ph == "M":
            out.append(e)
        elif ph == "X" and (e.get("dur") or 0) > 0:
            if ts < hi - EPS_US and ts + e["dur"] > lo + EPS_US:
                out.append(e)
        elif isinstance(ts, (int, float)) and lo - EPS_US <= ts < hi - EPS_US:
            out.append(e)
    return out


def canon(events: list[dict]) -> Counter:
    return Counter(json.dumps(e, sort_keys=True) for e in events)


def check_step_export(path: Path, doc: dict, step_pos: int, tmp_path: Path) -> None:
    """The export of one step holds exactly the raw events of its range and loads back."""
    a = SpanAnalysis(load_trace(str(path)))
    w = a.windows[step_pos]
    xs = [e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X"
          and isinstance(e.get("ts"), (int, float))]
    origin = min(xs)  # the file's clock at the model's time 0
    lo, hi = step_range(a, w.index)
    assert file_range(a, w.index) == pytest.approx((lo + origin, hi + origin), abs=1e-3)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    out = chrome_trace(data, path.name, file_range(a, w.index))
    got = json.loads(out)
    want = raw_in_range(doc, lo + origin, hi + origin)
    assert Counter(e.get("name") for e in got["traceEvents"]) == \
        Counter(e.get("name") for e in want)
    assert canon(got["traceEvents"]) == canon(want)  # each event as recorded, args and all
    assert {k: v for k, v in got.items() if k != "traceEvents"} == \
        {k: v for k, v in doc.items() if k != "traceEvents"}
    # Our own loader reads it back: the same complete events of the range, same clock.
    back_path = tmp_path / "back" / "worker0.1.pt.trace.json.gz"
    back_path.parent.mkdir(parents=True, exist_ok=True)
    back_path.write_bytes(gzip.compress(out))
    back = load_trace(str(back_path))
    m = a.model
    inside = [r for r in range(len(m))
              if (m.start[r] < hi - EPS_US and m.end[r] > lo + EPS_US)
              or (m.dur[r] == 0 and lo - EPS_US <= m.start[r] < hi - EPS_US)]
    assert Counter(back.name_of(r) for r in range(len(back))) == \
        Counter(m.name_of(r) for r in inside)
    assert back.origin_us == pytest.approx(m.origin_us + float(m.start[inside].min()), abs=1e-3)
    if w.step is not None:
        assert w.step in [x.step for x in SpanAnalysis(back).windows]


@pytest.mark.parametrize("base_ns", [1_700_000_000_000_000_000, None])
def test_step_export_is_the_raw_events_of_the_step(tmp_path, base_ns):
    t = three_steps(base_ns)
    path = t.write(tmp_path / "log" / "run" / "worker0.1.pt.trace.json")
    check_step_export(path, t.document(), 1, tmp_path)
    got = json.loads(chrome_trace(path.read_bytes(), "x"))
    assert canon(got["traceEvents"]) == canon(t.document()["traceEvents"])  # the whole span
    # The middle step keeps its flows and memory sample and no other step's.
    mid = json.loads(chrome_trace(path.read_bytes(), "x", file_range(
        SpanAnalysis(load_trace(str(path))), 1)))
    names = Counter(e["name"] for e in mid["traceEvents"])
    assert names["gemm_1"] == 1 and names["ac2g"] == 2 and names["[memory]"] == 1
    assert names["thread_name"] == 1
    assert "gemm_0" not in names and "gemm_2" not in names


def test_shared_trace_step_export(tmp_path):
    found = sorted((SHARED_TRACES / "kineto_resnet50_v100_dataloader_workers0")
                   .glob("*.pt.trace.json.gz")) if SHARED_TRACES.is_dir() else []
    if not found:
        pytest.skip("../shared/traces is not present")
    with gzip.open(found[0], "rt") as fh:
        doc = json.load(fh)
    n = len(SpanAnalysis(load_trace(str(found[0]))).windows)
    check_step_export(found[0], doc, n // 2, tmp_path)


def test_cli_export_chrome_trace(tmp_path, capsys):
    log = tmp_path / "log"
    t = three_steps()
    t.write(log / "run" / "worker0.1.pt.trace.json")
    out = tmp_path / "step2.json.gz"
    assert main(["export", str(log), "--format", "chrome-trace", "--step", "2",
                 "-o", str(out), "--no-cache"]) == 0
    got = json.loads(gzip.decompress(out.read_bytes()))
    assert {e["name"] for e in got["traceEvents"] if e["ph"] == "X"} >= {"ProfilerStep#2",
                                                                       "gemm_1"}
    assert "ui.perfetto.dev" in capsys.readouterr().err
    plain = tmp_path / "span.json"
    assert main(["export", str(log), "--format", "chrome-trace", "-o", str(plain),
                 "--no-cache"]) == 0
    assert len(json.loads(plain.read_text())["traceEvents"]) == len(t.events)
    assert main(["export", str(log), "--format", "chrome-trace", "--step", "9",
                 "-o", str(plain), "--no-cache"]) == 2
    assert "no step 9" in capsys.readouterr().err
    t.write(log / "run" / "worker0.2.pt.trace.json")
    assert main(["export", str(log), "--format", "chrome-trace", "-o", str(plain),
                 "--no-cache"]) == 2
    assert "2 spans match" in capsys.readouterr().err
    assert main(["export", str(log), "--format", "chrome-trace", "--span", "2", "-o",
                 str(plain), "--no-cache"]) == 0
    assert main(["export", str(log), "--step", "2", "-o", str(plain), "--no-cache"]) == 2


def test_routes(tmp_path):
    log = tmp_path / "log"
    three_steps().write(log / "run" / "worker0.1.pt.trace.json")
    client = tb_app(["--logdir", str(log)])
    q = "run=run&worker=worker0&span=1"
    tl = get_ready(client, f"{BASE}/timeline?{q}&width=400")
    assert tl.status_code == 200
    body = tl.get_json()
    assert body["status"] == "ready" and body["mode"] == "span"
    assert [s["step"] for s in body["steps"]] == [1, 2, 3]
    z = client.get(f"{BASE}/timeline?{q}&t0=1000&t1=1500&width=400").get_json()
    assert z["range"] == {"start_us": 1000.0, "end_us": 1500.0}
    for bad, words in (("&t0=5&t1=1", "after"), ("&t0=x", "number"), ("&width=3", "width")):
        r = client.get(f"{BASE}/timeline?{q}{bad}")
        assert r.status_code == 400 and words in r.get_json()["error"]
    r = client.get(f"{BASE}/chrome_trace?{q}&step=2")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/gzip"
    assert "worker0.1.step2.pt.trace.json.gz" in r.headers["Content-Disposition"]
    got = json.loads(gzip.decompress(r.data))
    assert "ProfilerStep#2" in {e["name"] for e in got["traceEvents"]}
    assert client.get(f"{BASE}/chrome_trace?{q}&step=7").status_code == 404
    whole = json.loads(gzip.decompress(client.get(f"{BASE}/chrome_trace?{q}").data))
    assert len(whole["traceEvents"]) == len(three_steps().events)


def test_odd_times_are_cut_by_the_rule_not_refused(tmp_path):
    """An event whose ts is a string or null has no place in a range: a step leaves it out
    (the whole span keeps it, as recorded); the rest is cut as usual."""
    t = three_steps(None)
    t.events.append({"ph": "X", "cat": "cpu_op", "name": "odd", "pid": 1, "tid": 1,
                     "ts": "1500", "dur": 5})
    t.events.append({"ph": "i", "name": "no time", "pid": 1, "tid": 1, "ts": None})
    path = t.write(tmp_path / "log" / "run" / "worker0.1.pt.trace.json")
    doc = t.document()
    check_step_export(path, {**doc, "traceEvents": [e for e in doc["traceEvents"]
                                                    if e["name"] not in ("odd", "no time")]},
                      0, tmp_path)
    whole = json.loads(chrome_trace(path.read_bytes(), "x"))
    assert {"odd", "no time"} <= {e["name"] for e in whole["traceEvents"]}
    with pytest.raises(Exception, match="not strict JSON"):
        chrome_trace(b'{"traceEvents": [NaN]}', "x", (0.0, 1.0))
