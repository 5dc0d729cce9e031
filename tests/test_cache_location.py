"""The suite never writes into the user's cache (``~/.cache/tb-diagnostics``)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import USER_CACHE, TraceBuilder, session_cache_root
from tb_diagnostics.cache import TraceCache, default_cache_dir
from tb_diagnostics.cli import main
from tb_diagnostics.logdir import scan_logdir


def _unique_logdir(tmp_path, tag: str):
    # A trace no other run has: its cache key exists nowhere before this test.
    t = TraceBuilder(device_properties=[])
    t.step(1, 0, 100)
    t.op(f"aten::add_{tag}_{os.getpid()}_{id(t)}", 10, 60)
    t.step(2, 100, 100)
    t.op("aten::add", 110, 60)
    t.write(tmp_path / "logs" / "run" / "worker0.1.pt.trace.json")
    return tmp_path / "logs"


def test_the_default_cache_is_the_sessions_temporary_one():
    root = session_cache_root()
    assert default_cache_dir().is_relative_to(root)
    assert not default_cache_dir().resolve().is_relative_to(USER_CACHE.resolve())


def test_the_cli_and_the_console_script_write_only_to_the_sessions_cache(tmp_path, capsys):
    logdir = _unique_logdir(tmp_path, "cli")
    assert main(["report", str(logdir)]) == 0
    capsys.readouterr()
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", "report", str(logdir)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files = scan_logdir(str(logdir)).files
    assert files
    for f in files:
        assert TraceCache().entry_files(f), "the report cached nothing: the test proves nothing"
        assert not TraceCache(USER_CACHE).entry_files(f), f"{f.relpath} cached in {USER_CACHE}"
