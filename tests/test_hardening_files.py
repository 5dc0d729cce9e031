"""Issue 22, files read once and as what they are: multi-member gzip (case 2), one open per
trace (4), FIFOs and stalled reads (5), the scan's stats (11), symbolic links (12, 15c),
``::`` in local paths (13), the byte-order mark (15a) and other compressions (15b)."""

from __future__ import annotations

import bz2
import gzip
import io
import itertools
import json
import lzma
import os
import random
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from conftest import TraceBuilder
from tb_diagnostics import storage
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.engine import build_document, open_model
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.text import render_text
from tb_diagnostics.trace import load, load_trace, load_trace_bytes, parallel
from tb_diagnostics.trace.source import BoundedCalls, ReadStalled
from tb_diagnostics.trace.stream import BLOCK_BYTES, TraceTooLarge, read_blocks


def trace_bytes(steps: int = 3, first: int = 1, pad: int = 0, indent: int | None = None
                ) -> bytes:
    """A small Kineto-shaped trace; ``pad`` adds that many ops (to make it big)."""
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    for k in range(steps):
        n = first + k
        t.step(n, k * 1000, 900)
        t.launch(k * 1000 + 5, 5, "gemm", k * 1000 + 20, 500)
    for i in range(pad):
        t.op(f"aten::op{i % 97}", 3000 + i * 0.01, 0.005)
    return json.dumps(t.document(), indent=indent).encode()


def step_names(model) -> list[str]:
    return sorted({model.name_of(i) for i in range(len(model))
                   if model.name_of(i).startswith("ProfilerStep#")})


def members(data: bytes, cuts: list[int]) -> bytes:
    """``data`` gzipped as one member per piece between ``cuts`` (``cat a.gz b.gz …``)."""
    edges = [0, *cuts, len(data)]
    return b"".join(gzip.compress(data[a:b]) for a, b in itertools.pairwise(edges))


def inflated(raw: bytes, limit: int | None = None) -> bytes:
    return b"".join(read_blocks(io.BytesIO(raw), limit=limit))


# ---- case 2: a gzip of several members -------------------------------------------------------
@pytest.fixture(scope="module")
def big_doc() -> bytes:
    return trace_bytes(pad=40_000)  # a few MB of JSON: members of every size fit in it


@pytest.mark.parametrize("cuts", [
    pytest.param(lambda n: [10], id="tiny-first"),
    pytest.param(lambda n: [n - 10], id="tiny-last"),
    pytest.param(lambda n: [BLOCK_BYTES], id="block-sized-first"),
    pytest.param(lambda n: [BLOCK_BYTES, 2 * BLOCK_BYTES], id="block-sized-members"),
    pytest.param(lambda n: [600_000], id="600KB-first"),
    pytest.param(lambda n: [n // 2], id="multi-MB-halves"),
    pytest.param(lambda n: list(range(n // 50, n, n // 50)), id="many-members"),
    pytest.param(lambda n: [0, 0, 300_000, 300_000, n], id="empty-members"),
])
def test_a_multi_member_gzip_loads_exactly_like_one_member(tmp_path, big_doc, cuts):
    raw = members(big_doc, cuts(len(big_doc)))
    assert inflated(raw) == big_doc
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(raw)
    model = load_trace(str(path))
    assert len(model) == len(load_trace_bytes(big_doc, "x"))
    assert step_names(model) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]


def test_random_member_splits_inflate_to_the_same_bytes(big_doc):
    rng = random.Random(22)
    doc = big_doc[:900_000]
    for _ in range(25):
        cuts = sorted(rng.randrange(len(doc) + 1) for _ in range(rng.randrange(1, 6)))
        assert inflated(members(doc, cuts)) == doc, cuts


def test_members_are_bounded_by_the_same_limit_as_one_member():
    """The 45 KB file of the issue: a first member past 256 KiB, then another: it used to
    inflate for ever; now its output is its members' and the limit holds."""
    first = os.urandom(150_000).hex().encode()  # 300 KB that gzip cannot shrink much
    raw = gzip.compress(first) + gzip.compress(b"y" * 1000)
    assert inflated(raw, limit=10 << 20) == first + b"y" * 1000
    many = b"".join([gzip.compress(b" " * 1_000_000)] * 20)  # 20 MB from ~20 KB
    with pytest.raises(TraceTooLarge):
        inflated(many, limit=5 << 20)


# ---- case 4: one open per trace, nothing spliced ---------------------------------------------
def two_versions(tmp_path: Path) -> tuple[Path, Path]:
    """Two traces of the very same layout (steps 200000+ and 100040+), big enough for the
    parallel load with small blocks."""
    a = trace_bytes(steps=40, first=200_000, pad=30_000, indent=1)
    b = trace_bytes(steps=40, first=100_040, pad=30_000, indent=1)
    assert len(a) == len(b)
    path, other = tmp_path / "w.1.pt.trace.json", tmp_path / "other.json"
    path.write_bytes(a)
    other.write_bytes(b)
    return path, other


def test_a_file_renamed_over_during_the_parallel_load_is_not_spliced(tmp_path, monkeypatch):
    path, other = two_versions(tmp_path)
    monkeypatch.setattr(parallel.stream, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(parallel, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(parallel, "MIN_RANGE_BYTES", 1 << 18)
    monkeypatch.setenv("TB_DIAGNOSTICS_LOAD_WORKERS", "3")
    assert parallel.workers_for(path.stat().st_size) == 3
    build_range = parallel.build_range
    ran: list[bool] = []

    def then_rename(*args, **kw):
        # The parent's own range is read, the other processes are still starting: an
        # atomic rename now is what a profiler's writer (or a sync tool) does.
        out = build_range(*args, **kw)
        os.replace(other, path)
        ran.append(True)
        return out

    monkeypatch.setattr(parallel, "build_range", then_rename)
    model = load_trace(str(path))
    assert ran, "the load did not go through the parallel path"
    steps = step_names(model)
    assert len(steps) == 40
    assert all(s.startswith("ProfilerStep#2000") for s in steps), steps[:3]


def test_a_file_replaced_since_the_scan_is_reported_and_not_cached(tmp_path):
    log = tmp_path / "log"
    (log / "r").mkdir(parents=True)
    path = log / "r" / "w.1.pt.trace.json"
    path.write_bytes(trace_bytes(steps=2))
    (f,) = scan_logdir(str(log)).files
    tmp = log / "r" / "new"
    tmp.write_bytes(trace_bytes(steps=5))
    os.replace(tmp, path)
    cache = TraceCache(str(tmp_path / "cache"))
    with pytest.raises(TraceLoadError, match="changed since the log dir was listed"):
        open_model(f, cache)
    assert cache.get_model(f) is None
    (fresh,) = scan_logdir(str(log)).files
    assert len(step_names(open_model(fresh, cache))) == 5


def test_the_report_of_a_file_replaced_since_the_scan_is_of_the_file_now_and_not_kept(
        tmp_path):
    from tb_diagnostics.engine import span_summary, thresholds_variant

    log = tmp_path / "log"
    (log / "r").mkdir(parents=True)
    path = log / "r" / "w.1.pt.trace.json"
    path.write_bytes(trace_bytes(steps=2))
    (f,) = scan_logdir(str(log)).files
    tmp = log / "r" / "new"
    tmp.write_bytes(trace_bytes(steps=5))
    os.replace(tmp, path)
    cache = TraceCache(str(tmp_path / "cache"))
    doc = span_summary(f, cache=cache)
    assert len(doc["steps"]) == 5 and not doc["errors"]
    assert cache.get_results(f, thresholds_variant(None)) is None
    assert cache.get_model(f) is None


def test_a_file_written_while_it_is_read_is_reported(tmp_path, monkeypatch):
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(trace_bytes(steps=3, pad=20_000))
    add = load.ModelBuilder.add

    def append_once(self, batch):
        if not getattr(append_once, "done", False):
            append_once.done = True
            with open(path, "ab") as fh:
                fh.write(b" " * 10)
        return add(self, batch)

    monkeypatch.setattr(load.ModelBuilder, "add", append_once)
    with pytest.raises(TraceLoadError, match="changed while it was being read"):
        load_trace(str(path))


# ---- cases 5 and 12: as what they are --------------------------------------------------------
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


@needs_fifo
def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "w.1.pt.trace.json"
    os.mkfifo(fifo)
    # In a child process: an open that waits for a writer would otherwise hang the suite.
    code = ("import sys; from tb_diagnostics.trace import load_trace\n"
            "try:\n    load_trace(sys.argv[1], 'r/w.1.pt.trace.json')\n"
            "except Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "r/w.1.pt.trace.json: is a FIFO, not a regular file"


@needs_fifo
def test_the_cli_reports_a_fifo_and_every_good_run(tmp_path):
    log = tmp_path / "log"
    for run in ("bad", "good"):
        (log / run).mkdir(parents=True)
    (log / "good" / "w.1.pt.trace.json").write_bytes(trace_bytes())
    os.mkfifo(log / "bad" / "w.1.pt.trace.json")
    out = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", "report", str(log),
                          "--format", "json", "--no-cache"], capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    spans = {r["run"]: r["workers"][0]["spans"][0] for r in doc["runs"]}
    assert spans["bad"]["errors"] == ["bad/w.1.pt.trace.json: is a FIFO, not a regular file"]
    assert len(spans["good"]["steps"]) == 3 and not spans["good"]["errors"]


def test_a_trace_named_directly_may_be_a_symlink(tmp_path):
    """Only a log dir's contents are not followed: a file the user names is read where
    its link leads."""
    from tb_diagnostics.api import analyze

    target = tmp_path / "elsewhere" / "w.1.pt.trace.json"
    target.parent.mkdir()
    target.write_bytes(trace_bytes(steps=4))
    link = tmp_path / "link.pt.trace.json"
    link.symlink_to(target)
    (span,) = [s for r in analyze(link, cache=False, workers=1).document["runs"]
               for w in r["workers"] for s in w["spans"]]
    assert not span["errors"] and len(span["steps"]) == 4


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")
def test_a_socket_is_named_not_an_errno(tmp_path):
    path = tmp_path / "w.1.pt.trace.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        (f,) = scan_logdir(str(tmp_path)).files  # listed: it does not vanish silently
        with pytest.raises(TraceLoadError) as err:
            open_model(f)
    assert err.value.problem == "is a socket, not a regular file"


def test_a_symlink_swapped_in_after_the_scan_is_not_followed(tmp_path):
    outside = tmp_path / "outside.pt.trace.json"
    outside.write_bytes(trace_bytes(steps=7))
    log = tmp_path / "log"
    (log / "r").mkdir(parents=True)
    path = log / "r" / "w.1.pt.trace.json"
    path.write_bytes(trace_bytes(steps=2))
    (f,) = scan_logdir(str(log)).files
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(TraceLoadError) as err:
        open_model(f)
    assert err.value.problem == "is a symbolic link (not followed)"


def test_a_stalled_read_gives_up_after_the_timeout(tmp_path, monkeypatch):
    """A read that never returns (a stalled NFS or FUSE mount, simulated by a pread that
    blocks) costs the timeout, then the file's error; the loader is free again."""
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(trace_bytes())
    monkeypatch.setenv("TB_DIAGNOSTICS_READ_TIMEOUT_S", "0.5")
    release = threading.Event()
    real_pread = os.pread

    def stalled(fd, n, offset):
        release.wait(60)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", stalled)
    outcome: list[BaseException] = []

    def attempt():
        try:
            load_trace(str(path), "r/w.1.pt.trace.json")
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(20)  # a guard against a hang, not a speed check
    release.set()
    assert not worker.is_alive(), "the load waited on the stalled read"
    (exc,) = outcome
    assert str(exc) == ("r/w.1.pt.trace.json: no data for 0.5 s (a stalled network file "
                        "system?)")


def test_bounded_calls_abandon_a_read_that_blocks():
    r, w = os.pipe()
    try:
        calls = BoundedCalls(0.2)
        with pytest.raises(ReadStalled):
            calls.call(os.read, r, 10)  # nobody writes: the read blocks
        with pytest.raises(ReadStalled):  # the helper is still stuck: no second wait
            calls.call(os.read, r, 10)
        os.write(w, b"x")  # the stuck read returns and the helper ends
        calls.close()
        assert BoundedCalls(5).call(os.getpid) == os.getpid()
    finally:
        os.close(w)
        os.close(r)


# ---- case 11: the scan lists by name, stats only traces --------------------------------------
def test_the_scan_stats_only_files_named_like_traces(tmp_path, monkeypatch):
    log = tmp_path / "log"
    (log / "r").mkdir(parents=True)
    for i in range(300):
        (log / "r" / f"events.{i}.tfevents").write_bytes(b"")
    (log / "r" / "w.1.pt.trace.json").write_bytes(trace_bytes())
    (log / "r" / "w.2.pt.trace.json.gz").write_bytes(gzip.compress(trace_bytes()))
    stats: list[str] = []
    real_scandir = os.scandir

    class Counted:
        def __init__(self, entry):
            self._entry = entry
            self.name, self.path = entry.name, entry.path

        def stat(self, **kw):
            stats.append(self.name)
            return self._entry.stat(**kw)

        def is_file(self, **kw):
            stats.append(self.name)  # may stat where the listing has no type
            return self._entry.is_file(**kw)

        def is_dir(self, **kw):
            return self._entry.is_dir(**kw)

        def is_symlink(self):
            return self._entry.is_symlink()

    def counting_scandir(path):
        return [Counted(e) for e in real_scandir(path)]

    monkeypatch.setattr(storage.os, "scandir", counting_scandir)
    ld = scan_logdir(str(log))
    assert [f.relpath for f in ld.files] == ["r/w.1.pt.trace.json", "r/w.2.pt.trace.json.gz"]
    assert sorted(stats) == ["w.1.pt.trace.json", "w.2.pt.trace.json.gz"]


# ---- case 13: '::' in a local path -----------------------------------------------------------
def test_a_local_run_named_with_double_colons_is_local(tmp_path):
    run = tmp_path / "log" / "exp::lr=0.1"
    run.mkdir(parents=True)
    (run / "w.1.pt.trace.json").write_bytes(trace_bytes())
    for root in (tmp_path / "log", run):
        doc = build_document(scan_logdir(str(root)))
        (span,) = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
        assert not span["errors"] and len(span["steps"]) == 3
    assert storage.is_local(str(run)) and not storage.is_local("zip://::nowhere.zip")


# ---- case 15a: a UTF-8 byte-order mark -------------------------------------------------------
def test_a_byte_order_mark_is_accepted_plain_and_gzipped(tmp_path):
    data = trace_bytes()
    bom = b"\xef\xbb\xbf" + data
    want = len(load_trace_bytes(data, "x"))
    for name, raw in [("a.json", bom), ("b.json.gz", gzip.compress(bom))]:
        (tmp_path / name).write_bytes(raw)
        assert len(load_trace(str(tmp_path / name))) == want
        assert len(load_trace_bytes(raw, name)) == want
    assert inflated(b"\xef\xbb\xbf") == b"" and inflated(b"\xef\xbb") == b"\xef\xbb"


# ---- case 15b: other compressions ------------------------------------------------------------
@pytest.mark.parametrize("compress", [
    pytest.param(bz2.compress, id="bzip2"),
    pytest.param(lzma.compress, id="xz"),
    pytest.param(lambda d: bz2.compress(d[:1000]) + bz2.compress(d[1000:]), id="bzip2-2"),
    pytest.param(lambda d: lzma.compress(d[:7]) + lzma.compress(d[7:]), id="xz-2"),
])
def test_bzip2_and_xz_traces_load_like_plain_ones(tmp_path, compress):
    data = trace_bytes(pad=5000)
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(compress(data))
    assert inflated(path.read_bytes()) == data
    assert len(load_trace(str(path))) == len(load_trace_bytes(data, "x"))


def test_compressed_bombs_stop_at_the_limit():
    for compress in (bz2.compress, lzma.compress):
        with pytest.raises(TraceTooLarge):
            inflated(compress(b" " * (20 << 20)), limit=1 << 20)


def test_truncated_bzip2_says_so(tmp_path):
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(bz2.compress(trace_bytes())[:-20])
    with pytest.raises(TraceLoadError, match="truncated bzip2 stream"):
        load_trace(str(path))


def test_zstd_without_its_module_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard fails
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 40)
    with pytest.raises(TraceLoadError) as err:
        load_trace(str(path))
    assert err.value.problem.startswith("zstd-compressed: decompress it with `zstd -d`")


def test_zstd_loads_where_zstandard_is_installed(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    data = trace_bytes()
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(zstandard.ZstdCompressor().compress(data))
    assert len(load_trace(str(path))) == len(load_trace_bytes(data, "x"))


def test_a_zip_archive_is_named(tmp_path):
    path = tmp_path / "w.1.pt.trace.json"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.1.pt.trace.json", trace_bytes())
    with pytest.raises(TraceLoadError) as err:
        load_trace(str(path))
    assert err.value.problem.startswith("a zip archive: unzip it")


# ---- case 15c: symbolic links are said, not silently dropped ---------------------------------
def test_skipped_symlinks_are_noted_in_the_report_and_the_tab(tmp_path):
    from tb_diagnostics.server.provider import DataProvider

    outside = tmp_path / "outside"
    (outside / "run2").mkdir(parents=True)
    (outside / "x.pt.trace.json").write_bytes(trace_bytes())
    log = tmp_path / "log"
    (log / "run").mkdir(parents=True)
    (log / "run" / "w.1.pt.trace.json").write_bytes(trace_bytes())
    (log / "run" / "x.1.pt.trace.json").symlink_to(outside / "x.pt.trace.json")
    (log / "linked").symlink_to(outside / "run2")
    (log / "run" / "notes.txt").symlink_to(outside / "x.pt.trace.json")  # not a trace name
    note = ("2 symbolic links not followed (a log dir is read without leaving it): linked, "
            "run/x.1.pt.trace.json")
    ld = scan_logdir(str(log))
    assert [f.relpath for f in ld.files] == ["run/w.1.pt.trace.json"]
    assert ld.notes == [note]
    doc = build_document(ld)
    assert doc["notes"] == [note]
    assert f"note: {note}" in render_text(doc).splitlines()
    provider = DataProvider(str(log))
    try:
        assert provider.runs()["notes"] == [note]
    finally:
        provider.shutdown()
