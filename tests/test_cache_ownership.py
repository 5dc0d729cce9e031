"""The cache owns only what it wrote: foreign data under its root and the log dir are never
touched (issue 22, case 1), its bookkeeping does not rescan per write (case 7), and a
failed or full-disk write leaves nothing behind (case 9)."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from test_cache import write_run

from tb_diagnostics import cache as cache_module
from tb_diagnostics import engine
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.cli import main
from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir

OLD = 1_000_000_000  # 2001: older than any stale-temp cutoff, and than every cache entry


def snapshot(root: Path, names: list[str] | None = None) -> dict[str, str]:
    """Type, size, mtime and (for small files) content of everything below ``root`` (or of
    the given top-level names): directories and symlinks included, nothing followed."""
    out: dict[str, str] = {}
    tops = [root / n for n in names] if names is not None else [root]
    for top in tops:
        stack = [top]
        while stack:
            p = stack.pop()
            st = p.lstat()
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = f"link:{os.readlink(p)}"
            elif p.is_dir():
                out[rel] = f"dir:{st.st_mtime_ns}"
                stack.extend(p.iterdir())
            else:
                content = (hashlib.sha256(p.read_bytes()).hexdigest()
                           if st.st_size < 1 << 20 else "big")
                out[rel] = f"file:{st.st_size}:{st.st_mtime_ns}:{content}"
    return out


def foreign_root(root: Path) -> list[str]:
    """A shared directory full of other people's data, all of it old; returns its names."""
    docs = root / "Documents"
    docs.mkdir(parents=True)
    (docs / "thesis.odt").write_bytes(b"chapter one" * 100)
    with open(docs / "disk.img", "wb") as fh:  # sparse: 5 GiB by its size, no blocks
        fh.truncate(5 << 30)
    (root / "photos").mkdir()
    (root / "photos" / "a.jpg").write_bytes(b"\xff\xd8" * 50)
    (root / ".hidden").mkdir()
    (root / ".hidden" / "state").write_text("x")
    (root / ".tmp-someone-elses").mkdir()
    (root / ".tmp-someone-elses" / "work").write_text("in progress")
    (root / ".tmp-file").write_text("a file of theirs")
    # Named like an entry of the old layout (32 hex digits): still not this version's to drop.
    legacy = root / ("0123456789abcdef" * 2)
    legacy.mkdir()
    (legacy / "model.json").write_text("{}")
    (root / "notes.txt").write_text("do not delete")
    (root / "link").symlink_to("Documents")
    names = sorted(p.name for p in root.iterdir())
    for p in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
        os.utime(p, (OLD, OLD), follow_symlinks=False)
    return names


def test_a_report_never_touches_foreign_data_under_the_cache_root(tmp_path, monkeypatch,
                                                                  capsys):
    root = tmp_path / "shared"
    names = foreign_root(root)
    before = snapshot(root, names)
    logs = tmp_path / "logs"
    write_run(logs, n_files=3)
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(root))
    assert main(["report", str(logs), "--format", "json"]) == 0  # a pool of workers
    capsys.readouterr()
    assert snapshot(root, names) == before
    (store,) = set(os.listdir(root)) - set(names)  # one directory of its own, nothing else
    assert (root / store).is_dir()
    assert len(TraceCache(root).entries()) == 3, "nothing cached: the test proves nothing"


def test_eviction_stays_inside_its_own_directory(tmp_path):
    root = tmp_path / "shared"
    names = foreign_root(root)
    before = snapshot(root, names)
    ld = write_run(tmp_path / "logs", n_files=6)
    sizer = TraceCache(tmp_path / "sizer")
    engine.span_summary(ld.files[0], cache=sizer)
    small = TraceCache(root, max_bytes=int(sizer.size() * 2.5))
    for _ in range(2):
        build_document(ld, cache=small, workers=1)
    assert 1 <= len(small.entries()) < 6  # it did evict
    assert small.size() <= small.max_bytes
    assert snapshot(root, names) == before


def test_foreign_names_inside_its_own_directory_survive_eviction(tmp_path):
    ld = write_run(tmp_path / "logs", n_files=5)
    sizer = TraceCache(tmp_path / "sizer")
    engine.span_summary(ld.files[0], cache=sizer)
    small = TraceCache(tmp_path / "cache", max_bytes=int(sizer.size() * 1.5))
    engine.span_summary(ld.files[0], cache=small)
    store = small.store
    (store / "keep").mkdir()
    (store / "keep" / "x").write_text("mine")
    (store / ".tmp-old").write_text("mine too")
    (store / "README").write_text("mine as well")
    for p in (store / "keep", store / ".tmp-old", store / "README"):
        os.utime(p, (OLD, OLD))
    names = ["keep", ".tmp-old", "README"]
    before = snapshot(store, names)
    for f in ld.files:
        engine.span_summary(f, cache=small)
    assert len(small.entries()) < 5
    assert snapshot(store, names) == before


def test_a_directory_without_the_marker_is_never_written_or_evicted(tmp_path, caplog):
    from tb_diagnostics.cache import STORE_NAME

    root = tmp_path / "cache"
    fake = root / STORE_NAME
    fake.mkdir(parents=True)
    victim = fake / ("ab" * 16)  # an old entry's name, but no marker says the directory is ours
    victim.mkdir()
    (victim / "model.json").write_text("{}")
    (fake / f"{'cd' * 16}.model").write_text("named like an entry's file")
    for p in (victim, fake / f"{'cd' * 16}.model"):
        os.utime(p, (OLD, OLD))
    ld = write_run(tmp_path / "logs", n_files=2)
    tiny = TraceCache(root, max_bytes=1)
    # Someone's files where this cache would look for the first trace's entry: not
    # what it wrote, so a miss, and still not deleted as damage.
    tiny.model_path(ld.files[0]).write_bytes(b"their data")
    tiny.results_path(ld.files[0], engine.thresholds_variant(None)).write_bytes(b"theirs too")
    before = snapshot(root)
    with caplog.at_level(logging.WARNING, logger="tb_diagnostics"):
        for f in ld.files:
            engine.span_summary(f, cache=tiny)
            engine.open_model(f, tiny)
    assert snapshot(root) == before
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_the_marker_is_a_cache_directory_tag(tmp_path):
    cache = TraceCache(tmp_path / "cache")
    (f,) = write_run(tmp_path / "logs").files
    engine.span_summary(f, cache=cache)
    tag = (cache.store / "CACHEDIR.TAG").read_bytes()
    # https://bford.info/cachedir/: backup tools skip a directory holding this file
    assert tag.startswith(b"Signature: 8a477f597d28d172789f06886806bc55")
    assert b"tb-diagnostics" in tag


# ---- never inside the log dir -----------------------------------------------------------
def _in_logdir(logs: Path, tmp_path: Path, where: str) -> Path:
    if where == "the log dir":
        return logs
    if where == "a directory below it":
        return logs / "cache" / "deep"
    if where == "a path through ..":
        return logs / "run" / ".." / "cache"
    link = tmp_path / "looks-elsewhere"
    link.symlink_to(logs)
    return link


WHERE = ["the log dir", "a directory below it", "a path through ..", "a symlink to it"]


@pytest.mark.parametrize("where", WHERE)
def test_a_cache_root_inside_the_logdir_is_refused_in_one_line(tmp_path, monkeypatch, capsys,
                                                               where):
    logs = tmp_path / "logs"
    write_run(logs, n_files=3)
    root = _in_logdir(logs, tmp_path, where)
    before = snapshot(logs)
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(root))
    assert main(["report", str(logs), "--format", "json", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inside the log dir" in err, err
    assert snapshot(logs) == before
    # --no-cache needs no cache location at all
    assert main(["report", str(logs), "--no-cache", "--workers", "1"]) == 0
    capsys.readouterr()


def test_the_api_refuses_a_cache_inside_the_logdir(tmp_path):
    import tb_diagnostics
    from tb_diagnostics.cache import CacheLocationError

    logs = tmp_path / "logs"
    write_run(logs)
    before = snapshot(logs)
    with pytest.raises(CacheLocationError, match="inside the log dir"):
        tb_diagnostics.analyze(logs, cache=logs / "c", workers=1)
    with pytest.raises(CacheLocationError, match="inside the log dir"):
        tb_diagnostics.analyze(logs / "run" / "worker0.100.pt.trace.json",
                               cache=logs / "run", workers=1)
    assert snapshot(logs) == before


def test_the_tab_warns_once_and_runs_without_a_cache_inside_the_logdir(tmp_path, monkeypatch,
                                                                       caplog):
    import argparse

    from tensorboard.plugins import base_plugin
    from test_tb_plugin import get_ready
    from werkzeug.test import Client

    from tb_diagnostics.tb_plugin import DiagnosticsPlugin

    logs = tmp_path / "logs"
    write_run(logs, n_files=1)
    before = snapshot(logs)
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(logs))
    ctx = base_plugin.TBContext(logdir=str(logs), flags=argparse.Namespace(logdir_spec=""))
    with caplog.at_level(logging.WARNING, logger="tb_diagnostics"):
        plugin = DiagnosticsPlugin(ctx)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "inside the log dir" in warnings[0].getMessage()
    span = Client(plugin.get_plugin_apps()["/span"])
    r = get_ready(span, "/span?run=run&worker=worker0&span=100")
    assert r.status_code == 200, r.get_data(as_text=True)
    assert snapshot(logs) == before


# ---- bounded bookkeeping (case 7) -----------------------------------------------------
def test_writes_do_not_rescan_the_cache_each_time(tmp_path, monkeypatch):
    cache = TraceCache(tmp_path / "cache")
    (f,) = write_run(tmp_path / "logs").files
    listings = []
    real_scandir, real_listdir = os.scandir, os.listdir
    watched = (cache.root.resolve(), cache.store.resolve())

    def counted(real):
        def listing(path="."):
            if Path(os.fspath(path)).resolve() in watched:
                listings.append(path)
            return real(path)
        return listing

    monkeypatch.setattr(os, "scandir", counted(real_scandir))
    monkeypatch.setattr(os, "listdir", counted(real_listdir))
    n = 400
    for i in range(n):
        # distinct keys: a new entry per write, the case that grew quadratically
        g = replace(f, mtime=float(i))
        cache.put_results(g, "v", {"steps": [i]})
    assert len(cache.entries()) == n
    assert len(listings) <= 12, f"{len(listings)} listings of the cache for {n} writes"


def test_the_bound_holds_across_processes_sharing_the_books(tmp_path):
    # Each process keeps its own running estimate; two of them writing at once must still
    # keep the cache near its bound (one headroom each at most).
    write_run(tmp_path / "logs", n_files=1)
    code = (
        "import sys\n"
        "from dataclasses import replace\n"
        "from tb_diagnostics.cache import TraceCache\n"
        "from tb_diagnostics.logdir import scan_logdir\n"
        "(f,) = scan_logdir(sys.argv[1]).files\n"
        "c = TraceCache(sys.argv[2], max_bytes=int(sys.argv[3]))\n"
        "for i in range(300):\n"
        "    g = replace(f, mtime=float(i), url=f.url + sys.argv[4])\n"
        "    c.put_results(g, 'v', {'steps': list(range(50))})\n"
    )
    bound = 60_000
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "logs"),
                               str(tmp_path / "cache"), str(bound), tag]) for tag in "ab"]
    for p in procs:
        assert p.wait(timeout=120) == 0
    total = TraceCache(tmp_path / "cache").size()
    assert 0 < total <= bound * 1.25, total


# ---- failed writes clean up (case 9) --------------------------------------------------
def _leftovers(cache: TraceCache) -> list[str]:
    """Anything in the cache that is neither a complete entry's file nor the marker."""
    out = []
    for p in cache.root.rglob("*"):
        name = p.name
        if "tmp" in name or (p.is_dir() and not any(p.iterdir())):
            out.append(str(p.relative_to(cache.root)))
    return out


def test_a_full_disk_turns_writes_off_with_one_warning_and_leaves_nothing(tmp_path,
                                                                          monkeypatch, caplog):
    cache = TraceCache(tmp_path / "cache")
    ld = write_run(tmp_path / "logs", n_files=3)
    calls = []
    real_rename, real_replace = os.rename, os.replace

    def disk_full(real):
        # rename(2) itself may need a block for the new name: ENOSPC, as any write.
        def rename(src, dst):
            if Path(os.fspath(dst)).is_relative_to(cache.root):
                calls.append(dst)
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(src, dst)
        return rename

    monkeypatch.setattr(os, "rename", disk_full(real_rename))
    monkeypatch.setattr(os, "replace", disk_full(real_replace))
    with caplog.at_level(logging.WARNING, logger="tb_diagnostics"):
        docs = [engine.span_summary(f, cache=cache) for f in ld.files]
    assert all(d["steps"] and not d["errors"] for d in docs)  # the results are right
    assert _leftovers(cache) == []
    assert cache.entries() == []
    assert len(calls) == 1, "writes went on after the disk was full"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "No space left" in warnings[0].getMessage()


def test_a_failed_results_write_removes_its_temporary_file(tmp_path, monkeypatch):
    cache = TraceCache(tmp_path / "cache", min_model_rows=0)
    ld = write_run(tmp_path / "logs", n_files=2)
    engine.open_model(ld.files[0], cache)  # an entry exists: results go beside its model

    def failing_rename(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", failing_rename)
    monkeypatch.setattr(os, "rename", failing_rename)
    for f in ld.files:  # the first beside its model, the second with no entry yet
        with pytest.raises(OSError):
            cache.put_results(f, "v", {"steps": []})
    assert _leftovers(cache) == []
    assert cache.key(ld.files[1]) is not None and cache.entry_files(ld.files[1]) == []


def test_a_write_past_the_file_size_limit_leaves_nothing(tmp_path):
    # A real failing write, not a mock: RLIMIT_FSIZE makes write() fail with EFBIG.
    write_run(tmp_path / "logs", n_files=2)
    code = (
        "import resource, signal, sys\n"
        "from tb_diagnostics import engine\n"
        "from tb_diagnostics.cache import TraceCache\n"
        "from tb_diagnostics.logdir import scan_logdir\n"
        "files = scan_logdir(sys.argv[1]).files\n"
        "cache = TraceCache(sys.argv[2], min_model_rows=0)\n"
        "engine.open_model(files[0], cache)\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200, resource.getrlimit("
        "resource.RLIMIT_FSIZE)[1]))\n"
        "for f in files:\n"
        "    doc = engine.span_summary(f, cache=cache)\n"
        "    assert doc['steps'] and not doc['errors'], doc\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "logs"),
                           str(tmp_path / "cache")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert _leftovers(TraceCache(tmp_path / "cache")) == []


# ---- keys for any name ----------------------------------------------------------------
def test_a_name_that_is_not_utf8_has_a_cache_entry(tmp_path):
    logs = tmp_path / "logs"
    write_run(logs)
    raw = os.fsencode(logs / "run") + b"/caf\xe9.1.pt.trace.json"
    os.rename(os.fsencode(logs / "run" / "worker0.100.pt.trace.json"), raw)
    (f,) = scan_logdir(str(logs)).files
    cache = TraceCache(tmp_path / "cache")
    doc = engine.span_summary(f, cache=cache)
    assert doc["steps"]
    assert cache.get_results(f, engine.thresholds_variant(None)) == doc
    other = replace(f, url=f.url.replace("\udce9", "\udce8"))
    assert cache.key(other) != cache.key(f)


def test_stale_temporaries_of_its_own_are_swept_and_young_ones_kept(tmp_path):
    ld = write_run(tmp_path / "logs", n_files=1)
    cache = TraceCache(tmp_path / "cache")
    engine.span_summary(ld.files[0], cache=cache)
    store = cache.store
    old_dir = Path(tempfile.mkdtemp(dir=store, prefix=cache_module.TMP_PREFIX,
                                                 suffix=".tmp"))
    young_dir = Path(tempfile.mkdtemp(dir=store, prefix=cache_module.TMP_PREFIX,
                                                   suffix=".tmp"))
    assert len(cache.entries()) == 1
    old_file = store / f"{cache_module.TMP_PREFIX}x.tmp"
    old_file.write_bytes(b"{")
    for p in (old_dir, old_file):
        os.utime(p, (time.time() - cache_module.STALE_TMP_S - 10,) * 2)
    cache.rescan()
    assert not old_dir.exists() and not old_file.exists()
    assert young_dir.exists()  # a live writer's
