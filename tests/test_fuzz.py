"""A short, bounded atheris session over the parser (`python fuzz/fuzz_trace.py` runs long)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"


def test_short_fuzzing_session_finds_no_crash(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(FUZZ / "corpus", corpus)  # the fuzzer adds inputs: never to the repo
    proc = subprocess.run(
        [sys.executable, str(FUZZ / "fuzz_trace.py"), "-atheris_runs=2000", "-max_len=4096",
         "-seed=1",
         # Crash, OOM and timeout inputs go to the test's directory, never the working one.
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=300)
    found = sorted(p.name for p in tmp_path.iterdir() if p.name != "corpus")
    assert proc.returncode == 0, (found, proc.stderr[-3000:])
    assert "Done 2000 in" in proc.stderr
