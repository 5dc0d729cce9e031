"""The tab's data layer: the cached scan, lazy shared loading, the bounded cache."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from conftest import TraceBuilder
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import LogDir, SpanFile, scan_logdir
from tb_diagnostics.server import DataProvider
from tb_diagnostics.server.loader import Loaded, Progress, SpanLoader, key_of, model_nbytes
from tb_diagnostics.server.present import load_and_summarise
from tb_diagnostics.server.scan import ScanCache


def span_file(name: str = "a", size: int = 1, mtime: float = 1.0) -> SpanFile:
    return SpanFile(run="r", worker="w", span=name, url=f"memory://{name}", relpath=f"r/{name}",
                    size=size, mtime=mtime)


def write_run(root: Path, run: str = "r", steps: int = 2) -> Path:
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    for n in range(steps):
        t.step(n, n * 100, 100)
        t.launch(n * 100 + 5, 5, "k", n * 100 + 20, 50)
    return t.write(root / run / "w.1.pt.trace.json")


# ---- ScanCache ------------------------------------------------------------------------------
class SlowScan:
    """A scan that takes ``delay`` seconds and counts its calls."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0

    def __call__(self, logdir: str) -> LogDir:
        self.calls += 1
        time.sleep(self.delay)
        return LogDir(logdir=logdir, runs=[])


def test_only_the_first_look_waits_and_then_briefly():
    scan = SlowScan(0.3)
    cache = ScanCache("x", max_age_s=0.0, first_wait_s=5.0, scan=scan)
    t0 = time.monotonic()
    assert cache.peek() is not None  # first look: waits for the first scan
    assert 0.25 < time.monotonic() - t0 < 3
    t0 = time.monotonic()
    for _ in range(20):
        assert cache.peek() is not None  # stale: refreshes in the background, never blocks
    assert time.monotonic() - t0 < 0.1
    time.sleep(0.4)
    assert scan.calls == 2  # one refresh at a time, however many looks


def test_first_look_gives_up_after_first_wait():
    cache = ScanCache("x", first_wait_s=0.05, scan=SlowScan(0.5))
    assert cache.peek() is None  # TensorBoard gets "inactive" now, the tab later
    time.sleep(0.6)
    assert cache.peek() is not None


def test_get_waits_for_a_fresh_scan():
    scan = SlowScan(0.0)
    cache = ScanCache("x", scan=scan)
    cache.get()
    cache.get(max_age_s=60)
    assert scan.calls == 1
    cache.get(max_age_s=0.0)
    assert scan.calls == 2


def test_scan_errors_are_kept_as_text(tmp_path):
    cache = ScanCache(str(tmp_path / "absent"))
    result = cache.get()
    assert result.logdir is None and "does not exist" in result.error


def test_a_broken_backend_is_an_error_not_a_crash():
    def boom(logdir):
        raise RuntimeError("backend exploded")

    result = ScanCache("x", scan=boom).get()
    assert "RuntimeError: backend exploded" in result.error


# ---- SpanLoader -----------------------------------------------------------------------------
class FakeAnalysis:
    def __init__(self, nbytes: int = 100) -> None:
        self.model = type("M", (), {"fake_nbytes": nbytes})()


def fake_work(calls: list, gate: threading.Event | None = None, fail: Exception | None = None):
    def work(f: SpanFile, progress: Progress):
        calls.append(f.span)
        progress.set("reading", 0.5)
        if gate is not None:
            gate.wait(5)
        if fail is not None:
            raise fail
        return FakeAnalysis(), {"span": f.span}

    return work


@pytest.fixture(autouse=True)
def _cheap_nbytes(monkeypatch):
    real = model_nbytes
    monkeypatch.setattr("tb_diagnostics.server.loader.model_nbytes",
                        lambda m: getattr(m, "fake_nbytes", None) or real(m))


def test_one_load_per_file_under_concurrent_requests():
    calls: list = []
    gate = threading.Event()
    loader = SpanLoader(fake_work(calls, gate), workers=4)
    f = span_file()
    got = []
    threads = [threading.Thread(target=lambda: got.append(loader.get(f))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(g, Progress) for g in got)
    assert len({id(g) for g in got}) == 1  # everyone sees the same load
    assert loader.progress()[0]["stage"] == "reading"
    gate.set()
    entry = loader.wait(f, timeout=5)
    assert calls == ["a"]
    assert entry.summary == {"span": "a"} and loader.get(f) is entry
    assert loader.progress() == []
    assert loader.peek(f) == "ready"


def test_lru_by_count_keeps_summaries():
    calls: list = []
    loader = SpanLoader(fake_work(calls), max_models=2)
    files = [span_file(n) for n in "abc"]
    for f in files:
        loader.wait(f)
    a = loader.get(files[0])
    assert isinstance(a, Loaded) and a.summary == {"span": "a"}  # the summary outlives…
    assert a.analysis is None  # …the evicted analysis
    assert loader.stats()["resident"] == 2
    assert isinstance(loader.get(files[0], need_analysis=True), Progress)  # reloads for detail
    loader.wait(files[0])
    assert calls == ["a", "b", "c", "a"]


def test_lru_by_bytes_keeps_at_least_the_newest(monkeypatch):
    loader = SpanLoader(fake_work([]), max_models=10, max_bytes=150)
    for n in "ab":
        loader.wait(span_file(n))
    assert loader.stats() == {"summaries": 2, "resident": 1, "resident_bytes": 100,
                              "loading": 0}
    assert loader.get(span_file("b"), need_analysis=True).analysis is not None


def test_a_recently_used_model_is_kept():
    loader = SpanLoader(fake_work([]), max_models=2)
    a, b, c = (span_file(n) for n in "abc")
    loader.wait(a)
    loader.wait(b)
    loader.get(a, need_analysis=True)  # touch a: b is now the oldest
    loader.wait(c)
    assert loader.get(a).analysis is not None
    assert loader.get(b).analysis is None


def test_summaries_are_bounded_too():
    loader = SpanLoader(fake_work([]), max_models=1, max_summaries=3)
    for n in "abcde":
        loader.wait(span_file(n))
    assert loader.stats()["summaries"] == 3
    assert loader.peek(span_file("a")) == "unloaded"


def test_a_rewritten_file_is_a_new_key():
    calls: list = []
    loader = SpanLoader(fake_work(calls))
    loader.wait(span_file(size=1, mtime=1.0))
    loader.wait(span_file(size=2, mtime=2.0))
    assert calls == ["a", "a"]
    assert key_of(span_file(size=1)) != key_of(span_file(size=2))


def test_bad_file_and_internal_errors_become_entries():
    loader = SpanLoader(fake_work([], fail=TraceLoadError("r/a", "truncated JSON")))
    e = loader.wait(span_file())
    assert e.error == "r/a: truncated JSON" and e.summary is None
    assert [x.file.span for x in loader.errors()] == ["a"]
    assert loader.progress() == []
    loader = SpanLoader(fake_work([], fail=ZeroDivisionError("oops")))
    e = loader.wait(span_file())
    assert e.error == "r/a: internal error (ZeroDivisionError: oops)"


def test_model_nbytes_counts_columns_and_strings(tmp_path):
    from tb_diagnostics.trace import load_trace

    model = load_trace(str(write_run(tmp_path)))
    n = model_nbytes(model)
    assert n >= 2 * sum(len(s) for s in model.strings)
    assert n >= 2 * model.start.nbytes * 3


# ---- present + provider, on real files ------------------------------------------------------
def test_load_and_summarise_goes_through_the_engine_cache(tmp_path):
    from tb_diagnostics.cache import TraceCache

    write_run(tmp_path / "log")
    f = scan_logdir(str(tmp_path / "log")).files[0]
    cache = TraceCache(tmp_path / "cache", min_model_rows=0)  # keeps even this small a model
    p = Progress(file=f)
    analysis, summary = load_and_summarise(f, p, cache=cache)
    assert p.stage == "analysing" and p.fraction == pytest.approx(0.6)
    assert cache.get_model(f) is not None  # a TensorBoard restart skips the parse
    assert [s["step"] for s in summary["steps"]] == [0, 1]
    assert len(analysis.windows) == 2
    _, again = load_and_summarise(f, Progress(file=f), cache=cache)
    assert again == summary


def test_provider_without_logdir():
    p = DataProvider(None, "TensorBoard was started with --logdir_spec")
    assert p.is_active() is False
    assert p.runs()["status"] == "no_logdir"


def test_provider_step_details_are_cached(tmp_path):
    write_run(tmp_path)
    p = DataProvider(str(tmp_path))
    f = p.find("r", "w", "1")
    p.loader.wait(f)
    code, one = p.step("r", "w", "1", "1")
    code2, two = p.step("r", "w", "1", "1")
    assert code == code2 == 200
    assert one == two
    assert p.loader.get(f).details  # the second answer came from the span's detail cache


def test_a_file_that_loads_after_failing_mid_write_drops_its_old_error():
    """The file failed while being written ("truncated"); once it is whole and loads, /runs
    must not list the old version's error any more."""
    calls: list = []

    def work(f: SpanFile, progress: Progress):
        calls.append(f.size)
        if f.size == 1:
            raise TraceLoadError(f.relpath, "truncated JSON")
        return FakeAnalysis(), {"span": f.span}

    loader = SpanLoader(work)
    writing = span_file(size=1, mtime=1.0)
    assert loader.wait(writing, timeout=5).error
    assert [e.file.size for e in loader.errors()] == [1]
    whole = span_file(size=2, mtime=2.0)
    assert loader.wait(whole, timeout=5).error is None
    assert loader.errors() == []
    assert calls == [1, 2]


def test_big_files_do_not_hold_the_loaders_small_runs_need():
    from tb_diagnostics.server.loader import BIG_FILE_BYTES

    gate = threading.Event()
    calls: list = []

    def work(f: SpanFile, progress: Progress):
        calls.append(f.span)
        if f.size >= BIG_FILE_BYTES:
            gate.wait(10)  # a huge or hostile file, still loading
        return FakeAnalysis(), {"span": f.span}

    loader = SpanLoader(work, workers=2)
    try:
        for name in ("big1", "big2", "big3"):
            loader.get(span_file(name, size=BIG_FILE_BYTES))
        t0 = time.monotonic()
        small = loader.wait(span_file("small", size=1000), timeout=5)
        assert small.summary == {"span": "small"} and time.monotonic() - t0 < 2
        assert "big2" not in calls  # the big ones queue one at a time on their own pool
    finally:
        gate.set()
        loader.shutdown()


def test_a_small_file_that_inflates_past_the_budget_moves_to_the_big_pool(tmp_path,
                                                                          monkeypatch):
    """Two gzip bombs requested first (small on disk, huge inside) free their loaders as
    soon as they outgrow the small pool's budget, and a good run is ready at once."""
    import gzip

    from tb_diagnostics.server import loader as loader_mod
    from tb_diagnostics.server.present import load_and_summarise

    monkeypatch.setattr(loader_mod, "SMALL_LOAD_INFLATE_BYTES", 4 << 20)
    log = tmp_path / "log"
    ev = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
    for name in ("bomb1", "bomb2"):
        (log / name).mkdir(parents=True)
        with gzip.open(log / name / "w.1.pt.trace.json.gz", "wb", compresslevel=1) as fh:
            fh.write(b'{"traceEvents": [' + ev % 1 + b",")
            for _ in range(64):  # 64 MiB of spaces: seconds of inflating
                fh.write(b" " * (1 << 20))
            fh.write(ev % 10 + b"]}")
    write_run(log, run="good")
    files = {f.run: f for f in scan_logdir(str(log)).files}
    moved: list[str] = []
    loader = SpanLoader(load_and_summarise, workers=2)
    real_big_pool_submit = loader._big_pool.submit

    def spy(fn, key, f, *rest):
        moved.append(f.run)
        return real_big_pool_submit(fn, key, f, *rest)

    loader._big_pool.submit = spy
    try:
        loader.get(files["bomb1"])
        loader.get(files["bomb2"])
        t0 = time.monotonic()
        good = loader.wait(files["good"], timeout=30)
        waited = time.monotonic() - t0
        assert good.error is None and [s["step"] for s in good.summary["steps"]] == [0, 1]
        assert waited < 10  # not the bombs' seconds of inflating, twice over
        bomb = loader.wait(files["bomb1"], timeout=60)
        assert bomb.error is None and len(bomb.analysis.model) == 2  # loaded all the same
        assert sorted(moved) == ["bomb1", "bomb2"]
    finally:
        loader.shutdown()


def test_memory_is_handed_back_after_a_failed_load(monkeypatch):
    from tb_diagnostics.server import loader as loader_mod

    released: list[str] = []
    monkeypatch.setattr(loader_mod, "release_memory", lambda: released.append("yes"))

    def work(f: SpanFile, progress: Progress):
        if f.span == "bad":
            raise TraceLoadError(f.relpath, "not a trace")
        return FakeAnalysis(), {"span": f.span}

    loader = SpanLoader(work)
    try:
        assert loader.wait(span_file("good"), timeout=5).error is None
        assert released == []  # a small good load keeps the allocator warm
        assert "not a trace" in loader.wait(span_file("bad"), timeout=5).error
        assert released == ["yes"]
    finally:
        loader.shutdown()
    if loader_mod._LIBC is not None:  # glibc: the real call is there and answers
        assert loader_mod._LIBC.malloc_trim(0) in (0, 1)
