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
        [*_FRESH, sys.executable, str(FUZZ / "fuzz_trace.py"), "-atheris_runs=2000",
         "-max_len=4096",
         "-seed=1",
         # Crash, OOM and timeout inputs go to the test's directory, never the working one.
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=300)
    found = sorted(p for p in tmp_path.iterdir() if p.name != "corpus")
    if proc.returncode != 0 and found and all(p.name.startswith("oom-") for p in found):
        # libFuzzer's out-of-memory is the whole fuzzing process passing 2 GB, blamed on the
        # input it was running: the input is the bug only if it needs that memory by itself.
        for p in found:
            assert _peak_mib_alone(p) < 1024, (p.name, proc.stderr[-3000:])
        return
    assert proc.returncode == 0, ([p.name for p in found], proc.stderr[-3000:])
    assert "Done 2000 in" in proc.stderr


#: Runs its arguments as a grandchild, forked from this small interpreter. A process's peak
#: RSS (``getrusage``'s ``ru_maxrss``, which libFuzzer's -rss_limit_mb reads) starts at
#: the peak of the address space it was exec'd from: spawned straight from pytest, which
#: passes 2 GB late in a full run, the fuzzer "runs out of memory" on its first input (CI,
#: 2026-12-01: "out-of-memory", then 2137 MiB for an input that needs 60 MiB alone).
_FRESH = [sys.executable, "-c", "import os, sys\n"
          "pid = os.fork()\n"
          "if pid == 0:\n"
          "    os.execv(sys.argv[1], sys.argv[1:])\n"
          "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))"]

_ALONE = """
import resource, sys
from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.trace import load_trace_bytes
try:
    SpanAnalysis(load_trace_bytes(open(sys.argv[1], "rb").read(), "fuzz.json")).windows
except TraceLoadError:
    pass
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def _peak_mib_alone(path: Path) -> float:
    """Peak RSS (MiB) of loading and analysing one input in a fresh interpreter (forked
    from a small one, so the figure is its own)."""
    out = subprocess.run([*_FRESH, sys.executable, "-c", _ALONE, str(path)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return float(out.strip().splitlines()[-1])
