"""``--debug`` prints the tracebacks of files that failed in spawned workers (issue 29 item
11): a worker of the pool has no log handler of its own, so its debug records, tracebacks
formatted, travel back with the file's document and the CLI's handler prints them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from rules.conftest import TraceBuilder

PLUGIN = Path(__file__).resolve().parents[1] / "plugin"

# Loaded by every interpreter that starts with this directory on its path, the pool's
# spawned workers too: the analysis of a file named bad* raises, as a bug would.
SITECUSTOMIZE = textwrap.dedent('''
    import tb_diagnostics.report.document as document

    _span_document = document.span_document

    def span_document(f, analysis, error=None, **kw):
        if analysis is not None and f.relpath.startswith("run/bad"):
            raise ValueError("a bug only this file meets")
        return _span_document(f, analysis, error, **kw)

    document.span_document = span_document
''')


def _report(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    log = tmp_path / "log" / "run"
    for name in ("bad.1.pt.trace.json", "good.1.pt.trace.json"):
        b = TraceBuilder(log)
        b.steady_steps(3)
        b.write(name=name)
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hook), str(PLUGIN)]))
    return subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", *flags, "report",
                           "--no-cache", "--workers", "2", "--format", "json",
                           str(tmp_path / "log")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def test_debug_prints_a_spawned_workers_traceback(tmp_path):
    proc = _report(tmp_path, "--debug")
    assert proc.returncode == 0, proc.stderr
    # The file's one-line error is in the report, as without --debug...
    assert "could not be analysed (ValueError: a bug only this file meets)" in proc.stdout
    # ...and the traceback behind it on stderr, from the worker that met it.
    err = proc.stderr
    assert "tb_diagnostics.engine: analysing run/bad.1.pt.trace.json failed" in err, err
    assert "Traceback (most recent call last):" in err
    assert "ValueError: a bug only this file meets" in err
    assert 'in span_summary' in err  # the frames are the worker's


def test_without_debug_nothing_is_printed(tmp_path):
    proc = _report(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "could not be analysed (ValueError: a bug only this file meets)" in proc.stdout
    assert "Traceback" not in proc.stderr
