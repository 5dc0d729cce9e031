"""Reading log directories: runs, workers, spans, fsspec URLs, and never writing."""

from __future__ import annotations

import gzip
import json

import fsspec
import pytest

from conftest import TraceBuilder, tree_digest
from tb_diagnostics.engine import build_document
from tb_diagnostics.errors import LogDirError
from tb_diagnostics.logdir import parse_trace_name, scan_logdir


def tiny(n: int = 1) -> bytes:
    t = TraceBuilder()
    t.step(n, 0, 100)
    t.op("aten::add", 10, 20)
    return json.dumps(t.document()).encode()


@pytest.mark.parametrize("name, expected", [
    ("worker0.1623143089861.pt.trace.json.gz", ("worker0", "1623143089861")),
    ("worker0.1623143089861.pt.trace.json", ("worker0", "1623143089861")),
    ("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", ("rank-34.Jul_15_10_52_41", "1074")),
    ("rank0.pt.trace.json.gz", ("rank0", "rank0.pt.trace.json.gz")),
    ("host_123.456.pt.trace.json", ("host_123", "456")),
    ("events.out.tfevents.1", None),
    ("worker0.pt.trace.json.tmp", None),
])
def test_trace_file_names(name, expected):
    assert parse_trace_name(name) == expected


def test_runs_are_directories_at_any_depth_and_spans_are_ordered(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "worker0.200.pt.trace.json").write_bytes(tiny(2))
    (tmp_path / "a" / "worker0.100.pt.trace.json.gz").write_bytes(gzip.compress(tiny(1)))
    (tmp_path / "a" / "worker1.150.pt.trace.json").write_bytes(tiny())
    (tmp_path / "exp" / "deep" / "run").mkdir(parents=True)
    (tmp_path / "exp" / "deep" / "run" / "w.1.pt.trace.json").write_bytes(tiny())
    (tmp_path / "notes.txt").write_text("not a trace")
    (tmp_path / "w.5.pt.trace.json").write_bytes(tiny())

    ld = scan_logdir(str(tmp_path))
    assert [r.name for r in ld.runs] == [".", "a", "exp/deep/run"]
    a = ld.run("a")
    assert [w.name for w in a.workers] == ["worker0", "worker1"]
    assert [s.span for s in a.workers[0].spans] == ["100", "200"]
    assert a.workers[0].spans[0].relpath == "a/worker0.100.pt.trace.json.gz"
    assert ld.run(".").files[0].relpath == "w.5.pt.trace.json"


def test_missing_or_non_directory_logdir_is_a_clear_error(tmp_path):
    with pytest.raises(LogDirError, match="does not exist"):
        scan_logdir(str(tmp_path / "nope"))
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(LogDirError, match="not a directory"):
        scan_logdir(str(f))


def test_memory_filesystem_through_fsspec():
    fs = fsspec.filesystem("memory")
    fs.pipe("/tbd-test/runA/worker0.7.pt.trace.json", tiny())
    fs.pipe("/tbd-test/runA/worker0.9.pt.trace.json.gz", gzip.compress(tiny(2)))
    try:
        doc = build_document(scan_logdir("memory://tbd-test"))
        (run,) = doc["runs"]
        spans = run["workers"][0]["spans"]
        assert [s["span"] for s in spans] == ["7", "9"]
        assert [s["steps"][0]["step"] for s in spans] == [1, 2]
        assert all(not s["errors"] for s in spans)
    finally:
        fs.rm("/tbd-test", recursive=True)


def test_analysing_never_writes_into_the_logdir(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "worker0.1.pt.trace.json").write_bytes(tiny())
    (tmp_path / "r" / "worker0.2.pt.trace.json").write_bytes(b'{"traceEvents": [')
    before = tree_digest(tmp_path)
    build_document(scan_logdir(str(tmp_path)))
    assert tree_digest(tmp_path) == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        ["r", "worker0.1.pt.trace.json", "worker0.2.pt.trace.json"])


def test_symlinks_are_not_followed_out_of_the_logdir(tmp_path):
    outside = tmp_path / "outside"
    (outside / "run2").mkdir(parents=True)
    (outside / "secret.1.pt.trace.json").write_bytes(tiny())
    (outside / "run2" / "w.1.pt.trace.json").write_bytes(tiny())
    logs = tmp_path / "logs"
    (logs / "run").mkdir(parents=True)
    (logs / "run" / "w.1.pt.trace.json").write_bytes(tiny())
    (logs / "run" / "secret.1.pt.trace.json").symlink_to(outside / "secret.1.pt.trace.json")
    (logs / "linked").symlink_to(outside / "run2")
    assert [f.relpath for f in scan_logdir(str(logs)).files] == ["run/w.1.pt.trace.json"]
