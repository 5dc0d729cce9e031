"""A trace's device from its first bytes (trace/header.py), without decoding its events.

Hand-written traces: deviceProperties before the events (plain and gzip), after the
events beyond the bound, missing, empty, mixed, AMD, a metadata object before it, small
files read whole (where the model's own device is given), broken and unreadable files;
the bytes read are bounded. On the shared traces: every device read agrees with the
README's deviceProperties column, and the whole log dir is read in a fraction of a
second.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import time
from pathlib import Path

import pytest

from conftest import TraceBuilder
from tb_diagnostics.trace import header
from tb_diagnostics.trace.header import HEADER_BYTES, device_of_prefix, read_header_device

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
V100 = {"id": 0, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16 << 30,
        "computeMajor": 7, "computeMinor": 0}


def padding_events(n_bytes: int) -> list[dict]:
    """Host ops enough to make the events take more than ``n_bytes`` of JSON."""
    one = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1}
    return [dict(one, ts=i) for i in range(n_bytes // len(json.dumps(one)) + 1)]


def write(path: Path, doc_text: str, gz: bool = False) -> Path:
    data = doc_text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def big_trace(top_before: dict, top_after: dict | None = None) -> str:
    """A trace over the header bound: ``top_before`` keys, the events, ``top_after`` keys."""
    events = json.dumps(padding_events(HEADER_BYTES + 1))
    before = "".join(f"{json.dumps(k)}: {json.dumps(v, indent=2)},\n"
                     for k, v in top_before.items())
    after = "".join(f",\n{json.dumps(k)}: {json.dumps(v)}" for k, v in (top_after or {}).items())
    return "{\n" + before + '"traceEvents": ' + events + after + "\n}"


@pytest.mark.parametrize("gz", [False, True])
def test_device_before_the_events(tmp_path, gz):
    f = write(tmp_path / "w.pt.trace.json", big_trace(
        {"schemaVersion": 1, "deviceProperties": [V100, dict(V100, id=1)]}), gz=gz)
    d = read_header_device(str(f))
    assert (d.kind, d.name, d.count, d.source) == ("cuda", "Tesla V100-SXM2-16GB", 2, "header")
    assert d.as_json()["from"] == "header" and "2 GPUs" in d.why


def test_device_after_the_events_beyond_the_bound_is_unknown(tmp_path):
    f = write(tmp_path / "w.pt.trace.json", big_trace(
        {"schemaVersion": 1}, {"deviceProperties": [V100]}))
    d = read_header_device(str(f))
    assert d.kind is None and d.source == "unknown" and d.as_json() is None
    assert d.why == "no deviceProperties before the events"


def test_no_device_properties_in_a_large_2021_style_trace(tmp_path):
    f = write(tmp_path / "w.pt.trace.json.gz", big_trace({"schemaVersion": 1}), gz=True)
    assert read_header_device(str(f)).kind is None


def test_a_metadata_object_before_the_device_is_walked_over(tmp_path):
    # TraceLens-style files open with a large metadata object; the walk decodes it whole.
    meta = {"profiler": {"activities": ["CPU", "CUDA"]}, "notes": ["x" * 100] * 200}
    f = write(tmp_path / "w.pt.trace.json", big_trace(
        {"metadata": meta, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}))
    assert read_header_device(str(f)).name == "NVIDIA H100 80GB HBM3"


def test_a_header_over_the_bound_is_unknown_not_guessed(tmp_path):
    meta = {"blob": "y" * (HEADER_BYTES + 10)}
    f = write(tmp_path / "w.pt.trace.json",
              big_trace({"metadata": meta, "deviceProperties": [V100]}))
    d = read_header_device(str(f))
    assert d.kind is None and d.why == f"no deviceProperties in the first {HEADER_BYTES >> 10} KiB"
    # The same file with a larger bound finds it: the bound is what stopped it.
    bigger = read_header_device(str(f), limit=HEADER_BYTES + 4096)
    assert (bigger.name, bigger.source) == (V100["name"], "header")


def test_empty_device_properties_is_the_cpu(tmp_path):
    f = write(tmp_path / "w.pt.trace.json", big_trace({"deviceProperties": []}))
    d = read_header_device(str(f))
    assert (d.kind, d.name, d.count, d.source) == ("cpu", None, 0, "header")


def test_mixed_gpus_give_the_kind_but_no_name(tmp_path):
    f = write(tmp_path / "w.pt.trace.json", big_trace(
        {"deviceProperties": [V100, {"id": 1, "name": "NVIDIA A100-SXM4-40GB"}]}))
    d = read_header_device(str(f))
    assert (d.kind, d.name, d.count) == ("cuda", None, 2)


def test_amd_parts_are_rocm():
    props = [{"id": 0, "name": "AMD Instinct MI250X", "gcnArchName": "gfx90a"}]
    text = big_trace({"deviceProperties": props}).encode()[:HEADER_BYTES]
    assert device_of_prefix(text, complete=False).kind == "rocm"
    unnamed = [{"id": 0, "name": "", "gcnArchName": "gfx942"}]
    assert device_of_prefix(json.dumps({"deviceProperties": unnamed, "traceEvents": []})
                            .encode()[:40], complete=False).kind is None  # cut inside it
    assert header.properties_kind(unnamed) == "rocm"


def test_a_small_file_is_read_whole_and_gives_the_models_device(tmp_path):
    # A GPU machine's CPU-only profile lists the GPU, yet nothing ran on it: read whole,
    # the file says so (as the analysis will).
    t = TraceBuilder(device_properties=[V100])
    t.step(1, 0, 100)
    t.op("aten::mm", 10, 50)
    f = t.write(tmp_path / "cpu.pt.trace.json.gz", gz=True)
    d = read_header_device(str(f))
    assert (d.kind, d.name, d.source) == ("cpu", None, "trace")
    t.launch(20, 5, "volta_sgemm", 30, 40)
    d = read_header_device(str(t.write(tmp_path / "gpu.pt.trace.json")))
    assert (d.kind, d.name, d.count, d.source) == ("cuda", V100["name"], 1, "trace")
    # No deviceProperties at all, but kernels: a GPU, unnamed.
    t.top.pop("deviceProperties")
    d = read_header_device(str(t.write(tmp_path / "old.pt.trace.json")))
    assert (d.kind, d.name) == ("cuda", None)


@pytest.mark.parametrize("content", [
    b"", b"not json at all", b"\x1f\x8b\x08\x00garbage", b'{"traceEvents": [{"ph": "X"',
    b"[1, 2, 3]",
])
def test_broken_files_are_unknown_and_never_raise(tmp_path, content):
    f = tmp_path / "w.pt.trace.json"
    f.write_bytes(content)
    d = read_header_device(str(f))
    assert d.kind is None and d.why


def test_a_device_list_that_is_not_one_is_unknown(tmp_path):
    for odd in (5, [1, 2], {"name": "x"}):
        f = write(tmp_path / "w.pt.trace.json", big_trace({"deviceProperties": odd}))
        d = read_header_device(str(f))
        assert d.kind is None and d.why == "deviceProperties is not a list of devices"


def test_a_truncated_gzip_is_unknown(tmp_path):
    data = gzip.compress(big_trace({"schemaVersion": 1}).encode())
    f = tmp_path / "w.pt.trace.json.gz"
    f.write_bytes(data[:200])  # the profiler still writing it
    d = read_header_device(str(f))
    assert d.kind is None and "truncated gzip" in d.why


def test_unreadable_paths_are_unknown(tmp_path):
    assert "cannot read" in read_header_device(str(tmp_path / "missing.pt.trace.json")).why
    assert read_header_device(str(tmp_path)).kind is None  # a directory
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.pt.trace.json"
        os.mkfifo(fifo)
        assert "FIFO" in read_header_device(str(fifo)).why  # refused, never waited on
    link = tmp_path / "link.pt.trace.json"
    link.symlink_to(tmp_path / "missing.pt.trace.json")
    assert read_header_device(str(link)).kind is None


def test_the_bytes_read_are_bounded():
    """However large the file, at most the bound (and one block) is decompressed, and the
    compressed input read is what that takes."""
    # Names that do not compress, so the input read tells how far the read went.
    events = [{"ph": "X", "cat": "cpu_op", "name": os.urandom(24).hex(), "ts": i, "dur": 1}
              for i in range(40_000)]
    data = gzip.compress(json.dumps({"deviceProperties": [V100], "traceEvents": events}).encode())
    assert len(data) > 1 << 20

    class Counting(io.BytesIO):
        read_bytes = 0

        def read(self, n=-1):
            out = super().read(n)
            Counting.read_bytes += len(out)
            return out

    text, complete = header._head(Counting(data), HEADER_BYTES)
    assert not complete and len(text) == HEADER_BYTES
    assert Counting.read_bytes < len(data) / 4


def test_a_remote_fsspec_file(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/hdr/run/w.pt.trace.json.gz",
            gzip.compress(big_trace({"deviceProperties": [V100]}).encode()))
    try:
        d = read_header_device("memory:///hdr/run/w.pt.trace.json.gz")
        assert (d.kind, d.name, d.source) == ("cuda", V100["name"], "header")
        assert read_header_device("memory:///hdr/run/missing.pt.trace.json").kind is None
    finally:
        fs.rm("/hdr", recursive=True)


def _readme_gpus() -> dict[str, str]:
    """run -> the README's 'GPU (deviceProperties)' cell ('8 x NVIDIA A100-PG509-200')."""
    rows = {}
    for line in (SHARED / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and cells[1].startswith("`"):
            rows[cells[1].strip("`")] = cells[4]
    return rows


@pytest.mark.skipif(not (SHARED / "README.md").is_file(), reason="needs ../shared/traces")
def test_shared_traces_agree_with_their_readme():
    gpus = _readme_gpus()
    files = sorted(SHARED.glob("*/*.pt.trace.json*"))
    assert len(files) >= 20 and len(gpus) >= 20
    t0 = time.perf_counter()
    devices = {f: read_header_device(str(f)) for f in files}
    took = time.perf_counter() - t0
    assert took < 5.0, took  # ~0.07 s on an idle core: one small read per file
    for f, d in devices.items():
        listed = gpus[f.parent.name]
        m = re.fullmatch(r"(\d+) x (.+)", listed)
        if d.source == "header" and d.kind != "cpu":
            assert m and (d.count, d.name) == (int(m.group(1)), m.group(2)), (f, d, listed)
        elif d.source == "unknown":
            assert d.why == "no deviceProperties before the events", (f, d)
        if listed == "none recorded" and d.source == "header":
            assert d.kind == "cpu"  # an empty list
    # What the bound leaves unknown here: the 2021 traces (no deviceProperties), the
    # sampled ranks, and TraceLens' files (re-serialised with the key after the events).
    unknown = {f.parent.name for f, d in devices.items() if d.kind is None}
    assert all(n.startswith(("kineto_2021", "hta_sampled", "tracelens_")) for n in unknown)
    amd = next(f for f in files if f.parent.name == "hta_amd_mi250_rocm_tiny")
    assert devices[amd].kind == "rocm"
