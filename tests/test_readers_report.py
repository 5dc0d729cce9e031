"""bench/readers_report.py: the stretches of a trace that every JSON reader of
``bench/run_json_readers.py`` is timed on, the pieces ours decodes, the one-object-a-line
rewrite pyarrow needs, and the tables. On small hand-written traces; no reader is timed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import REPO
from tb_diagnostics.trace.stream import _cut

sys.path.insert(0, str(REPO / "bench"))

import readers_report as rr


def _events(n: int) -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 2,
             "ts": 10.0 * i, "dur": 1.5, "args": {"External id": i, "Input Dims": [[8, 8]]}}
            for i in range(n)]


def _write(path: Path, events: list[dict], pretty: bool) -> Path:
    """A trace as Kineto lays it out: pretty-printed (``workload.py large``) or one event a
    line (the deep CNN traces), metadata keys before the array."""
    sep = ",\n" if not pretty else ",\n  "
    body = sep.join(json.dumps(e, indent=4 if pretty else None) for e in events)
    path.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n  ' + body + "\n]}\n")
    return path


def _cut2(buf: bytes, limit: int) -> int:
    return _cut(buf, limit)


@pytest.mark.parametrize("pretty", [False, True])
def test_windows_hold_whole_events_spread_over_the_file(tmp_path: Path, pretty: bool) -> None:
    events = _events(6000)
    path = _write(tmp_path / "t.json", events, pretty)
    size_mb = path.stat().st_size / (1 << 20)
    windows = rr.cut_windows(path, size_mb / 4, 4, _cut2)
    assert len(windows) == 4
    decoded = [json.loads(b"[" + w + b"]") for w in windows]
    for got in decoded:
        assert got and all(e in events for e in got)  # whole events, as written
    # Spread from the start to the end: the first window opens on the first event, the
    # last one reaches the last quarter of the file, and none overlaps the next.
    assert decoded[0][0] == events[0]
    assert decoded[-1][-1]["args"]["External id"] > 0.7 * len(events)
    firsts = [d[0]["args"]["External id"] for d in decoded]
    lasts = [d[-1]["args"]["External id"] for d in decoded]
    assert all(lasts[i] < firsts[i + 1] for i in range(3))
    # About the size asked for, in all.
    total = sum(map(len, windows)) / (1 << 20)
    assert 0.8 * size_mb / 4 <= total <= size_mb / 4


@pytest.mark.parametrize("pretty", [False, True])
def test_pieces_split_a_window_between_events(tmp_path: Path, pretty: bool) -> None:
    events = _events(3000)
    path = _write(tmp_path / "t.json", events, pretty)
    (window,) = rr.cut_windows(path, path.stat().st_size / (1 << 20), 1, _cut2)
    whole = json.loads(b"[" + window + b"]")
    pieces = rr.pieces_of(window, _cut2, size=16 << 10)
    assert len(pieces) > 5
    longest = max(len(json.dumps(e, indent=4)) for e in events)
    assert all(len(p) <= (16 << 10) + longest + 2 for p in pieces)
    assert [e for p in pieces for e in json.loads(p)] == whole


@pytest.mark.parametrize("pretty", [False, True])
def test_ndjson_puts_one_event_on_each_line(tmp_path: Path, pretty: bool) -> None:
    events = _events(50)
    path = _write(tmp_path / "t.json", events, pretty)
    (window,) = rr.cut_windows(path, 1.0, 1, _cut2)
    lines = rr.to_ndjson(window).split(b"}\n{")
    assert len(lines) == len(json.loads(b"[" + window + b"]"))
    back = [json.loads(("{" if i else "") + part.decode() + ("}" if i < len(lines) - 1 else ""))
            for i, part in enumerate(lines)]
    assert back == json.loads(b"[" + window + b"]")


def test_ratio_table_sets_each_reader_against_ours() -> None:
    rows = [{"file": "deep_500mb", "mb": 64.0, "ours_wall": 0.4, "readers": {
        "ours": {"wall": 0.4, "cpu": 0.41, "rows": 100},
        "duckdb": {"wall": 0.3, "cpu": 0.31, "rows": 100},
        "polars": {"error": "ComputeError: not numeric"}}}]
    table = rr.ratio_table(rows).splitlines()
    assert table[0].startswith("| file | reader |")
    assert table[2] == "| deep_500mb | ours | 100 | 0.400 | 0.410 | 160 | 1.00× |"
    assert table[3] == "| deep_500mb | duckdb | 100 | 0.300 | 0.310 | 213 | 0.75× |"
    assert table[4] == "| deep_500mb | polars | — | failed: ComputeError: not numeric | | | |"


def test_whole_table_gives_peak_rss_over_the_file() -> None:
    rows = [{"file": "large_50mb", "mb": 48.0, "readers": {
        "ours": {"wall": 0.31, "cpu": 0.3, "rows": 70, "peak_mb": 54.0},
        "duckdb": {"wall": 2.76, "cpu": 2.7, "rows": 130, "peak_mb": 519.0}}}]
    table = rr.whole_table(rows).splitlines()
    assert table[2] == "| large_50mb | 48 | ours | 70 | 0.31 | 0.30 | 54 | 1.1× |"
    assert table[3] == "| large_50mb | 48 | duckdb | 130 | 2.76 | 2.70 | 519 | 10.8× |"
