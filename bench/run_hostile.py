"""The hostile-input corpus of the hardening issues, case by case: what each does to the CLI
and the tab's server, how long it takes and how much memory it needs.

    python bench/run_hostile.py [--only TEXT] [--files 2000] [--scan-files 200000]
                                [--big-mb 200] [--timeout 120]

Every case builds its log dir in a temporary directory, then runs in a fresh interpreter
(the CLI, or a short probe over the tab's data provider) under a wall-clock limit; the
table gives the case, whether it held, its wall time, the peak RSS of the process and of
the processes it waited for (``wait4``), and what the tool said. A case that hangs is
killed at ``--timeout`` and shows as such. Nothing outside the temporary directory is
read or written, except the sample run ``log/matmul_add-size2048-cpu`` (read only).

Case 7 compares a cold report of ``--files`` small traces with and without the cache
(the issue's target, at 20,000 files: at most 1.2×); case 11 lists ``--scan-files``
non-trace files beside one trace; case 4 builds two ``--big-mb`` MB traces so that the
parallel (two-core) load runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SAMPLE = REPO / "log" / "matmul_add-size2048-cpu"


# ---- traces ----------------------------------------------------------------------------------
def gpu_trace(steps: int = 4, first: int = 1, ops: int = 3, id_base: int = 0,
              ts_base: float = 1000.0) -> dict:
    """A small GPU-shaped trace: steps of ops, each launching one kernel (linked by
    correlation and External id), on a device that has a name."""
    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0,
                       "args": {"name": "GPU 0"}}]
    t, corr = ts_base, id_base + 1
    for n in range(first, first + steps):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                   "pid": 1, "tid": 1, "ts": t, "dur": 1000})
        for k in range(ops):
            o = t + 10 + k * 300
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                       "ts": o, "dur": 200, "args": {"External id": corr}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": o + 20, "dur": 20,
                       "args": {"correlation": corr, "External id": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0,
                       "tid": 7, "ts": o + 50, "dur": 150,
                       "args": {"correlation": corr, "External id": corr, "stream": 7,
                                "device": 0}})
            corr += 1
        t += 1000
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Tesla V100-SXM2-16GB"}],
            "traceEvents": ev}


def write_trace(path: Path, doc: dict, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def big_trace(path: Path, mb: int, first_step: int) -> Path:
    """A plain trace of about ``mb`` MB (steps of tiny ops), written without holding it."""
    with open(path, "w") as fh:
        fh.write('{"schemaVersion": 1, "traceEvents": [')
        t, n, sep = 1000.0, first_step, ""
        while fh.tell() < mb << 20:
            parts = [f'{sep}{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{n}",'
                     f'"pid":1,"tid":1,"ts":{t},"dur":1000}}']
            for k in range(200):
                parts.append(f',{{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,'
                             f'"ts":{t + 1 + k * 4},"dur":3,"args":{{"External id":{k}}}}}')
            fh.write("".join(parts))
            sep, t, n = ",", t + 1000, n + 1
        fh.write("]}")
    return path


# ---- running a case ----------------------------------------------------------------------------
def run_child(argv: list[str], timeout: float, env: dict | None = None,
              during: Callable[[subprocess.Popen], None] | None = None,
              ) -> tuple[int | None, float, float, str]:
    """(exit code or None when killed at the timeout, seconds, peak RSS MiB of it and the
    processes it waited for (through ``_peak.py``), its standard output, or its standard
    error when it printed nothing)."""
    out = tempfile.TemporaryFile()  # noqa: SIM115 - read back after the child is reaped
    err = tempfile.TemporaryFile()  # noqa: SIM115
    peak_file = tempfile.NamedTemporaryFile(delete=False)  # noqa: SIM115
    peak_file.close()
    if argv[0] == sys.executable:  # its own peak, not the harness's (see _peak.py)
        argv = [sys.executable, str(HERE / "_peak.py"), *argv[1:]]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            env={**os.environ, **(env or {}),
                                 "TB_DIAGNOSTICS_PEAK_FILE": peak_file.name},
                            start_new_session=True)
    if during is not None:
        during(proc)
    deadline = t0 + timeout
    status = rusage = None
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            _, status, rusage = os.wait4(proc.pid, 0)
            status = None
            break
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    proc.returncode = 0  # reaped here: keep Popen from waiting again
    out.seek(0)
    err.seek(0)
    text = out.read().decode("utf-8", "replace")
    if not text.strip():  # what it said went to stderr (a one-line error, a traceback)
        text = err.read().decode("utf-8", "replace")
    code = None if status is None else os.waitstatus_to_exitcode(status)
    try:
        with open(peak_file.name) as fh:
            peak = float(fh.read())
    except (OSError, ValueError):  # killed at the timeout: what the kernel says
        peak = rusage.ru_maxrss / 1024
    os.unlink(peak_file.name)
    return code, seconds, peak, text


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tb_diagnostics.cli", *args]


def probe(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code), *args]


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "(no output)"


def spans_of(text: str) -> list[dict]:
    """The spans of a ``report --format json`` output."""
    doc = json.loads(text)
    return [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]


def tree_state(root: Path) -> dict[str, tuple]:
    """Every path below ``root`` with its size and mtime (symlinks not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


# ---- the provider probe (the tab's server side, no HTTP) --------------------------------------
PROVIDER = """
import json, os, sys, time
from tb_diagnostics.server import DataProvider
from tb_diagnostics.cache import TraceCache

def ready(provider, call, *args, timeout=60.0):
    t0 = time.monotonic()
    while True:
        code, body = call(*args)
        if code != 202 or time.monotonic() - t0 > timeout:
            return code, body, time.monotonic() - t0
        time.sleep(0.02)
"""


# ---- the cases ---------------------------------------------------------------------------------
Case = Callable[[Path, argparse.Namespace], tuple[bool | None, str, list, dict]]


def case_cache_foreign(d: Path, a: argparse.Namespace):
    shared = d / "shared-dir"
    (shared / "Documents").mkdir(parents=True)
    with open(shared / "Documents" / "big.img", "wb") as fh:
        fh.truncate(1536 << 20)  # 1.5 GB, sparse
    (shared / "Documents" / "notes.txt").write_text("mine")
    (shared / ".tmp-someone-else").mkdir()
    (shared / ".tmp-someone-else" / "work").write_text("theirs")
    (shared / "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa").mkdir()  # looks like a cache entry
    (shared / "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" / "x").write_text("not a cache entry")
    old = time.time() - 7200
    for p in shared.rglob("*"):
        os.utime(p, (old, old))
    os.utime(shared / ".tmp-someone-else", (old, old))
    logdir = d / "log"
    shutil.copytree(REPO / "log", logdir)
    before = tree_state(shared)
    argv = probe(PROVIDER + """
from tb_diagnostics.engine import summarise_files
from tb_diagnostics.logdir import scan_logdir
cache = TraceCache(sys.argv[1], max_bytes=1)  # every write evicts
out = summarise_files(scan_logdir(sys.argv[2]).files, cache=cache, workers=1)
print(len(out), "spans summarised")
""", str(shared), str(logdir))

    def check(text: str) -> tuple[bool, str]:
        after = tree_state(shared)
        changed = [k for k, v in before.items() if after.get(k) != v]
        return not changed, (f"{len(before) - len(changed)}/{len(before)} foreign entries "
                             f"unchanged; {last_line(text)}")
    return argv, {}, check


def case_cache_on_logdir(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    shutil.copytree(SAMPLE, logdir / "run")
    before = tree_state(logdir)

    def check(text: str) -> tuple[bool, str]:
        return tree_state(logdir) == before, f"log dir unchanged: {tree_state(logdir) == before}" \
                                              f"; said: {last_line(text)}"
    return cli("report", str(logdir)), {"TB_DIAGNOSTICS_CACHE": str(logdir)}, check


def case_multimember_gzip(d: Path, a: argparse.Namespace):
    doc = gpu_trace(steps=600)
    data = json.dumps(doc).encode()
    cut = 600 << 10
    logdir = d / "log"
    (logdir / "one").mkdir(parents=True)
    (logdir / "many").mkdir(parents=True)
    (logdir / "one" / "w.1.pt.trace.json.gz").write_bytes(gzip.compress(data))
    (logdir / "many" / "w.1.pt.trace.json.gz").write_bytes(
        gzip.compress(data[:cut]) + gzip.compress(data[cut:]))

    def check(text: str) -> tuple[bool, str]:
        one, many = [*sorted(spans_of(text), key=lambda s: s["file"]), None, None][:2]
        if not (one and many):
            return False, last_line(text)
        same = [s["wall_us"] for s in one["steps"]] == [s["wall_us"] for s in many["steps"]]
        return (same and not many["errors"] and len(many["steps"]) == 600,
                f"{len(many['steps'])} steps, same as one member: {same}; "
                f"errors: {many['errors'] or 'none'}")
    return cli("report", str(logdir), "--format", "json", "--no-cache"), {}, check


def case_latin1_names(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    logdir.mkdir()
    run = os.fsencode(logdir) + b"/caf\xe9"
    os.mkdir(run)
    with open(run + b"/w\xf6rker0.1.pt.trace.json", "wb") as fh:
        fh.write(json.dumps(gpu_trace()).encode())
    argv = probe(PROVIDER + """
import argparse, subprocess
from werkzeug.test import Client
from tensorboard.plugins import base_plugin
from tb_diagnostics.tb_plugin import DiagnosticsPlugin
from werkzeug.wrappers import Request
logdir = sys.argv[1]
plugin = DiagnosticsPlugin(base_plugin.TBContext(logdir=logdir,
                           flags=argparse.Namespace(logdir_spec="")))
apps = plugin.get_plugin_apps()
def app(environ, start):
    return apps[environ["PATH_INFO"]](environ, start)
c = Client(app)
r = c.get("/runs")
print("/runs", r.status_code)
rc = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", "report", logdir, "--format",
                     "json", "--no-cache"], capture_output=True)
ok = rc.returncode == 0
steps = len(json.loads(rc.stdout)["runs"][0]["workers"][0]["spans"][0]["steps"]) if ok else 0
print(f"/runs HTTP {r.status_code}; report --format json rc {rc.returncode}, {steps} steps")
""", str(logdir))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return "HTTP 200" in line and "rc 0" in line and "4 steps" in line, line
    return argv, {}, check


def case_splice(d: Path, a: argparse.Namespace):
    logdir = d / "log" / "run"
    logdir.mkdir(parents=True)
    target = big_trace(logdir / "w.1.pt.trace.json", a.big_mb, 100000)
    other = big_trace(d / "other.json", a.big_mb, 200000)
    argv = probe("""
import os, sys, threading, time
from tb_diagnostics.trace import load_trace
from tb_diagnostics.errors import TraceLoadError
target, other = sys.argv[1], sys.argv[2]
def swap():
    time.sleep(0.5)  # the load has planned its ranges and started reading
    os.replace(other, target)
threading.Thread(target=swap).start()
try:
    m = load_trace(target)
    names = {m.strings[i] for i in set(m.name.tolist()) if m.strings[i].startswith("Prof")}
    kinds = {int(n.split("#")[1]) // 100000 for n in names}
    print(f"{len(names)} steps from {len(kinds)} file(s)")
except TraceLoadError as exc:
    print(f"refused: {exc}")
""", str(target), str(other))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return "from 1 file" in line or "refused" in line, line
    return argv, {"TB_DIAGNOSTICS_LOAD_WORKERS": "2"}, check


def case_fifo_cli(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    for k in range(12):
        write_trace(logdir / f"good{k:02d}" / "w.1.pt.trace.json", gpu_trace(steps=400))
    fifo = write_trace(logdir / "zz-fifo" / "w.1.pt.trace.json", gpu_trace())

    def during(proc: subprocess.Popen) -> None:
        # After the CLI has listed the log dir (imports and the scan take well under 1.2 s
        # here) and before it reaches the last run (one file at a time, in order).
        time.sleep(1.2)
        fifo.unlink()
        os.mkfifo(fifo)

    def check(text: str) -> tuple[bool, str]:
        try:
            spans = spans_of(text)
        except ValueError:
            return False, last_line(text)
        good = [s for s in spans if s["file"].startswith("good") and s["steps"]]
        bad = [e for s in spans for e in s["errors"] if s["file"].startswith("zz-fifo/")]
        return len(good) == 12 and bool(bad), f"{len(good)}/12 good runs reported; " \
                                             f"FIFO: {bad[0] if bad else 'no error'}"
    return (cli("report", str(logdir), "--format", "json", "--no-cache", "--workers", "1"),
            {}, check, during)


def case_fifo_server(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    write_trace(logdir / "good" / "w.1.pt.trace.json", gpu_trace())
    for k in range(3):  # more FIFOs than the loaders
        write_trace(logdir / "fifo" / f"w{k}.1.pt.trace.json", gpu_trace())
    argv = probe(PROVIDER + """
p = DataProvider(sys.argv[1], cache=None)
p.runs()  # listed as regular files, then replaced by FIFOs
for k in range(3):
    path = os.path.join(sys.argv[1], "fifo", f"w{k}.1.pt.trace.json")
    os.unlink(path)
    os.mkfifo(path)
for k in range(3):
    p.span("fifo", f"w{k}", "1")
code, body, took = ready(p, p.span, "good", "w", "1", timeout=30)
print(f"good span {body['status']} after {took:.2f} s while 3 FIFOs were asked for")
os._exit(0)
""", str(logdir))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return "good span ready" in line, line
    return argv, {}, check


def case_sigterm(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    write_trace(logdir / "good" / "w.1.pt.trace.json", gpu_trace())
    write_trace(logdir / "fifo" / "w.1.pt.trace.json", gpu_trace())
    argv = probe("""
import os, re, signal, subprocess, sys, time, urllib.request
tb = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", sys.argv[1],
                       "--port", "0", "--host", "127.0.0.1"], stderr=subprocess.PIPE,
                      stdout=subprocess.DEVNULL, text=True)
port = None
for line in tb.stderr:
    m = re.search(r"http://127\\.0\\.0\\.1:(\\d+)", line)
    if m:
        port = m.group(1)
        break
base = f"http://127.0.0.1:{port}/data/plugin/diagnostics"
urllib.request.urlopen(base + "/runs", timeout=10).read()  # listed as a regular file
path = os.path.join(sys.argv[1], "fifo", "w.1.pt.trace.json")
os.unlink(path)
os.mkfifo(path)
urllib.request.urlopen(base + "/span?run=fifo&worker=w&span=1", timeout=10).read()
time.sleep(1.0)
t0 = time.monotonic()
tb.send_signal(signal.SIGTERM)
try:
    tb.wait(timeout=20)
    print(f"TensorBoard exited {time.monotonic() - t0:.2f} s after SIGTERM")
except subprocess.TimeoutExpired:
    tb.kill()
    print("TensorBoard still running 20 s after SIGTERM")
""", str(logdir))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        try:
            return float(line.split(" exited ")[1].split()[0]) <= 1.0, line
        except (IndexError, ValueError):
            return False, line
    return argv, {}, check


def case_many_spans(d: Path, a: argparse.Namespace):
    run = d / "log" / "run"
    doc = json.dumps(gpu_trace(steps=1, ops=1)).encode()
    run.mkdir(parents=True)
    for k in range(600):
        (run / f"w.{k + 1}.pt.trace.json").write_bytes(doc)
    argv = probe(PROVIDER + """
p = DataProvider(sys.argv[1], cache=None)
code, body, took = ready(p, p.run, "run", timeout=120)
print(f"/run of 600 spans: HTTP {code} after {took:.1f} s; loader: {p.loader.stats()}")
os._exit(0)
""", str(d / "log"))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return "HTTP 200" in line, line
    return argv, {}, check


def case_cache_many(d: Path, a: argparse.Namespace):
    from run_cache_many import write_logdir  # the cache benchmark's own small log dir

    logdir = d / "log"
    write_logdir(logdir, a.files, max(1, a.files // 100))
    argv = probe("""
import subprocess, sys, tempfile, time
logdir = sys.argv[1]
def timed(*extra, env=None):
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", "report", logdir, "--format",
                        "json", "-o", "/dev/null", *extra], env=env, capture_output=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return time.perf_counter() - t0
import os
no_cache, cold = [], []
for _ in range(2):  # alternated, best of each: a busy machine slows one run, not a side
    no_cache.append(timed("--no-cache"))
    with tempfile.TemporaryDirectory() as c:
        cold.append(timed(env={**os.environ, "TB_DIAGNOSTICS_CACHE": c}))
no_cache, cold = min(no_cache), min(cold)
print(f"{int(sys.argv[2])} files: cold with the cache {cold:.1f} s, "
      f"--no-cache {no_cache:.1f} s: {cold / no_cache:.2f}x")
""", str(logdir), str(a.files))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        try:
            return float(line.rsplit(":", 1)[1].strip().rstrip("x")) <= 1.2, line
        except ValueError:
            return False, line
    return argv, {}, check


def case_killed_worker(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    for k in range(6):
        write_trace(logdir / f"run{k}" / "w.1.pt.trace.json", gpu_trace(steps=400, ops=4))

    def during(proc: subprocess.Popen) -> None:
        # Kill one of the CLI's pool workers, once it has one (as the OOM killer would).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            kids = [k for k in _children(proc.pid) if b"resource_tracker" not in _cmdline(k)]
            if kids:
                time.sleep(0.5)
                os.kill(kids[0], signal.SIGKILL)
                return
            time.sleep(0.05)

    def check(text: str) -> tuple[bool, str]:
        try:
            spans = spans_of(text)
        except ValueError:
            return False, last_line(text)
        errors = [e for s in spans for e in s["errors"]]
        return len(spans) == 6 and len(errors) <= 1, \
            f"{len(spans)}/6 spans reported, {len(errors)} with an error" + \
            (f": {errors[0]}" if errors else "")
    return (cli("report", str(logdir), "--format", "json", "--no-cache", "--workers", "2"),
            {}, check, during)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def case_full_disk(d: Path, a: argparse.Namespace):
    cache = d / "small-disk"
    cache.mkdir()
    logdir = d / "log"
    shutil.copytree(REPO / "log", logdir)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs",
                                            str(cache)], capture_output=True).returncode:
        return None  # needs root, to mount a small file system
    argv = probe("""
import os, subprocess, sys
cache, logdir = sys.argv[1], sys.argv[2]
env = {**os.environ, "TB_DIAGNOSTICS_CACHE": cache}
for _ in range(2):
    r = subprocess.run([sys.executable, "-m", "tb_diagnostics.cli", "report", logdir, "-o",
                        "/dev/null"], env=env, capture_output=True, text=True)
left = [os.path.join(p, n) for p, ds, fs in os.walk(cache) for n in fs + ds
        if n.startswith(".") and "tmp" in n]
st = os.statvfs(cache)
used = 1 - st.f_bavail / st.f_blocks
warn = [ln for ln in r.stderr.splitlines() if "cache" in ln.lower()]
print(f"rc {r.returncode}; {len(left)} temporary files left; disk {used:.0%} full; "
      f"said: {warn[0] if warn else 'nothing'}")
""", str(cache), str(logdir))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return "rc 0; 0 temporary" in line, line
    return argv, {}, check


def case_stale(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    path = logdir / "run" / "w.1.pt.trace.json"
    write_trace(path, gpu_trace())
    (logdir / "gone").mkdir()
    (logdir / "gone" / "w.1.pt.trace.json").write_text("{")
    argv = probe(PROVIDER + """
import shutil
logdir = sys.argv[1]
path = os.path.join(logdir, "run", "w.1.pt.trace.json")
data = open(path, "rb").read()
open(path, "wb").write(data[: len(data) // 2])  # the profiler is still writing it
p = DataProvider(logdir, cache=None)
p.runs()
code, first, _ = ready(p, p.span, "run", "w", "1")
ready(p, p.span, "gone", "w", "1")
open(path, "wb").write(data)  # finished
code, second, _ = ready(p, p.span, "run", "w", "1")
shutil.rmtree(os.path.join(logdir, "gone"))
errors = [e["file"] for e in p.runs()["errors"]]
print(f"first ask: {first['status']}; right after it was written: {second['status']}; "
      f"errors of a deleted run in /runs: {errors or 'none'}")
os._exit(0)
""", str(logdir))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return "written: ready" in line and "/runs: none" in line, line
    return argv, {}, check


def case_scan_many(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    write_trace(logdir / "run" / "w.1.pt.trace.json", gpu_trace())
    other = logdir / "checkpoints"
    other.mkdir()
    for k in range(a.scan_files):
        (other / f"shard-{k:06d}.bin").touch()
    argv = probe(PROVIDER + """
p = DataProvider(sys.argv[1], cache=None, fresh_s=0.0)
times = []
for _ in range(3):
    t0 = time.perf_counter()
    runs = p.runs()
    times.append(time.perf_counter() - t0)
print(f"/runs with {sys.argv[2]} other files: {min(times):.2f}-{max(times):.2f} s, "
      f"{len(runs['runs'])} run")
os._exit(0)
""", str(logdir), str(a.scan_files))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return ": " in line and "1 run" in line, line
    return argv, {}, check


def case_symlink_swap(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    write_trace(logdir / "run" / "w.1.pt.trace.json", gpu_trace(steps=2))
    outside = write_trace(d / "outside" / "secret.pt.trace.json", gpu_trace(steps=7))
    argv = probe(PROVIDER + """
logdir, outside = sys.argv[1], sys.argv[2]
p = DataProvider(logdir, cache=None)
p.runs()
path = os.path.join(logdir, "run", "w.1.pt.trace.json")
os.unlink(path)
os.symlink(outside, path)
code, body, _ = ready(p, p.span, "run", "w", "1")
steps = len(body["summary"]["steps"]) if body["status"] == "ready" else 0
print(f"{body['status']}: " + (f"{steps} steps served" if steps else body.get("error", "")))
os._exit(0)
""", str(logdir), str(outside))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return line.startswith("error"), line
    return argv, {}, check


def case_colons(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    write_trace(logdir / "exp::lr=0.1" / "w.1.pt.trace.json", gpu_trace())

    def check(text: str) -> tuple[bool, str]:
        try:
            (s,) = spans_of(text)
        except ValueError:
            return False, last_line(text)
        return len(s["steps"]) == 4, f"{len(s['steps'])} steps; errors: {s['errors'] or 'none'}"
    return cli("report", str(logdir), "--format", "json", "--no-cache"), {}, check


def _numbers_case(make: Callable[[dict], dict], want: Callable[[dict], tuple[bool, str]]):
    def case(d: Path, a: argparse.Namespace):
        logdir = d / "log"
        write_trace(logdir / "run" / "w.1.pt.trace.json", make(gpu_trace(steps=6)))

        def check(text: str) -> tuple[bool, str]:
            try:
                (s,) = spans_of(text)
            except ValueError:
                return False, last_line(text)
            return want(s)
        return cli("report", str(logdir), "--format", "json", "--no-cache"), {}, check
    return case


def case_big_ids(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    doc = gpu_trace(steps=6)
    write_trace(logdir / "original" / "w.1.pt.trace.json", doc)
    for e in doc["traceEvents"]:
        for k in ("correlation", "External id"):
            if k in e.get("args", {}):
                e["args"][k] += 1 << 64
    write_trace(logdir / "shifted" / "w.1.pt.trace.json", doc)

    def check(text: str) -> tuple[bool, str]:
        original, shifted = sorted(spans_of(text), key=lambda s: s["file"])
        # Evidence shows each event's ids: the renumbered ones differ, nothing else may.
        same = (original["steps"] == shifted["steps"]
                and _without_ids(original["findings"]) == _without_ids(shifted["findings"]))
        notes = [n for n in shifted["notes"] if n not in original["notes"]]
        return same and bool(notes), (f"same steps and findings as with small ids: {same}; "
                                      f"note: {notes[0] if notes else 'none'}")
    return cli("report", str(logdir), "--format", "json", "--no-cache"), {}, check


def _without_ids(findings: list[dict]) -> list[dict]:
    return [{**f, "evidence": [{k: v for k, v in e.items()
                                if k not in ("correlation", "external_id")}
                               for e in f.get("evidence") or []]} for f in findings]


def _same_step_name(doc: dict) -> dict:
    for e in doc["traceEvents"]:
        if e["name"].startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#7"
    return doc


def _six_steps(s: dict) -> tuple[bool, str]:
    notes = [n for n in s["notes"] if "ProfilerStep" in n]
    return len(s["steps"]) == 6 and bool(notes), \
        f"{len(s['steps'])} steps; note: {notes[0] if notes else 'none'}"


def _nested_step(doc: dict) -> dict:
    first = next(e for e in doc["traceEvents"] if e["name"] == "ProfilerStep#1")
    doc["traceEvents"].append({**first, "name": "ProfilerStep#99", "ts": first["ts"] + 100,
                               "dur": 1.0})
    return doc


def _outer_kept(s: dict) -> tuple[bool, str]:
    walls = [round(st["wall_us"]) for st in s["steps"]]
    notes = [n for n in s["notes"] if "nest" in n.lower() or "inside" in n.lower()]
    return walls[0] == 1000 and bool(notes), \
        f"step walls {walls[:3]}…; note: {notes[0] if notes else 'none'}"


def _string_ts(doc: dict) -> dict:
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] = str(e["ts"])
    return doc


def _refused(s: dict) -> tuple[bool, str]:
    return bool(s["errors"]) and not s["steps"], \
        f"error: {s['errors'][0]}" if s["errors"] else f"no error; verdict: {s['verdict']}"


def _absurd_dur(doc: dict) -> dict:
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[0]["dur"] = 1e300
    return doc


def _dur_note(s: dict) -> tuple[bool, str]:
    notes = [n for n in s["notes"] if "dur" in n.lower()]
    return bool(notes), f"note: {notes[0] if notes else 'none'}"


def case_bom(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    data = b"\xef\xbb\xbf" + json.dumps(gpu_trace()).encode()
    (logdir / "plain").mkdir(parents=True)
    (logdir / "plain" / "w.1.pt.trace.json").write_bytes(data)
    (logdir / "gz").mkdir()
    (logdir / "gz" / "w.1.pt.trace.json.gz").write_bytes(gzip.compress(data))

    def check(text: str) -> tuple[bool, str]:
        spans = spans_of(text)
        ok = all(len(s["steps"]) == 4 and not s["errors"] for s in spans)
        return ok, "; ".join(f"{s['file']}: {len(s['steps'])} steps "
                             f"{s['errors'] or ''}" for s in spans)
    return cli("report", str(logdir), "--format", "json", "--no-cache"), {}, check


def case_compressions(d: Path, a: argparse.Namespace):
    import bz2
    import lzma
    import zipfile

    logdir = d / "log"
    data = json.dumps(gpu_trace()).encode()
    files = {"bz2": bz2.compress(data), "xz": lzma.compress(data)}
    try:
        import zstandard
        files["zstd"] = zstandard.ZstdCompressor().compress(data)
    except ImportError:
        # A zstd frame by hand is not needed to test the message: the magic suffices.
        files["zstd"] = b"\x28\xb5\x2f\xfd" + b"\0" * 32
    for name, raw in files.items():
        (logdir / name).mkdir(parents=True)
        (logdir / name / "w.1.pt.trace.json").write_bytes(raw)
    (logdir / "zip").mkdir()
    with zipfile.ZipFile(logdir / "zip" / "w.1.pt.trace.json", "w") as z:
        z.writestr("w.1.pt.trace.json", data)

    def check(text: str) -> tuple[bool, str]:
        spans = spans_of(text)
        said = {s["file"].split("/")[0]: (f"{len(s['steps'])} steps" if s["steps"] else
                                          (s["errors"] or ["?"])[0].split(": ", 1)[-1])
                for s in spans}
        named = all(s["steps"] or any(k in (s["errors"] or [""])[0].lower()
                                      for k in ("zstd", "bz2", "xz", "zip"))
                    for s in spans)
        return named, "; ".join(f"{k}: {v}" for k, v in sorted(said.items()))
    return cli("report", str(logdir), "--format", "json", "--no-cache"), {}, check


def case_symlink_note(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    write_trace(logdir / "run" / "w.1.pt.trace.json", gpu_trace())
    real = write_trace(d / "elsewhere" / "w.2.pt.trace.json", gpu_trace())
    os.symlink(real, logdir / "run" / "w.2.pt.trace.json")

    def check(text: str) -> tuple[bool, str]:
        hits = [ln for ln in text.splitlines() if "symbolic link" in ln or "symlink" in ln]
        return bool(hits), hits[0].strip() if hits else "no mention of the link"
    return cli("report", str(logdir), "--no-cache"), {}, check


def case_methods(d: Path, a: argparse.Namespace):
    logdir = d / "log"
    write_trace(logdir / "run" / "w.1.pt.trace.json", gpu_trace())
    argv = probe("""
import argparse, sys
from werkzeug.test import Client
from tensorboard.plugins import base_plugin
from tb_diagnostics.tb_plugin import DiagnosticsPlugin
plugin = DiagnosticsPlugin(base_plugin.TBContext(logdir=sys.argv[1],
                           flags=argparse.Namespace(logdir_spec="")))
apps = plugin.get_plugin_apps()
codes = {}
for route, app in apps.items():
    path = route.replace("*", "x.js")
    c = Client(lambda env, start, app=app: app(env, start))
    for method in ("POST", "DELETE", "PUT"):
        codes.setdefault(c.open(path, method=method).status_code, []).append(method + " " + path)
print("; ".join(f"{k}: {len(v)} requests" for k, v in sorted(codes.items())))
""", str(logdir))

    def check(text: str) -> tuple[bool, str]:
        line = last_line(text)
        return line.startswith("405:") and ";" not in line, line
    return argv, {}, check


CASES: list[tuple[str, str, Case]] = [
    ("1", "cache root on a directory of other data", case_cache_foreign),
    ("1", "cache root on the log dir", case_cache_on_logdir),
    ("2", "multi-member gzip, first member 600 KiB", case_multimember_gzip),
    ("3", "Latin-1 run and file names", case_latin1_names),
    ("4", "file replaced during a two-core load", case_splice),
    ("5", "a FIFO listed as a trace (CLI)", case_fifo_cli),
    ("5", "FIFOs listed as traces (server)", case_fifo_server),
    ("5", "SIGTERM while a FIFO is asked for", case_sigterm),
    ("6", "a run of 600 spans", case_many_spans),
    ("7", "cold report of many small files, with/without cache", case_cache_many),
    ("8", "a pool worker killed (SIGKILL)", case_killed_worker),
    ("9", "cache on a full file system", case_full_disk),
    ("10", "stale answers", case_stale),
    ("11", "scan beside many non-trace files", case_scan_many),
    ("12", "symlink swapped in after the scan", case_symlink_swap),
    ("13", "'::' in a local run name", case_colons),
    ("14", "ids beyond 64 bits", case_big_ids),
    ("14", "six steps named ProfilerStep#7", _numbers_case(_same_step_name, _six_steps)),
    ("14", "a step nested in a step", _numbers_case(_nested_step, _outer_kept)),
    ("14", "ts given as strings", _numbers_case(_string_ts, _refused)),
    ("14", "a duration of 1e300", _numbers_case(_absurd_dur, _dur_note)),
    ("15", "UTF-8 byte-order mark", case_bom),
    ("15", "zstd, bz2, xz and zip files", case_compressions),
    ("15", "symlinked trace", case_symlink_note),
    ("15", "POST, PUT, DELETE on the routes", case_methods),
]


def _unmount_below(root: str) -> None:
    """Unmount what a case mounted in its temporary directory (case 9), even on a timeout."""
    with open("/proc/mounts") as fh:
        points = [ln.split()[1] for ln in fh if ln.split()[1].startswith(root)]
    for point in points:
        subprocess.run(["umount", point], capture_output=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="run only the cases whose number or name contains this")
    p.add_argument("--files", type=int, default=2000, help="small files of case 7")
    p.add_argument("--scan-files", type=int, default=200_000, help="non-trace files, case 11")
    p.add_argument("--big-mb", type=int, default=200, help="size of case 4's traces")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before a case is killed")
    a = p.parse_args(argv)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "plugin"),
                                                      os.environ.get("PYTHONPATH")]))}
    print("| # | case | held | seconds | peak RSS MiB | what happened |")
    print("|---|---|---|--:|--:|---|")
    failed = 0
    for number, name, case in CASES:
        if a.only and a.only != number and a.only not in name:
            continue
        with tempfile.TemporaryDirectory(prefix="tb-diagnostics-hostile-") as tmp:
            made = case(Path(tmp), a)
            if made is None:
                print(f"| {number} | {name} | skipped | | | needs root (mounts a small tmpfs) |")
                continue
            argv_, extra_env, check, *during = made
            with tempfile.TemporaryDirectory() as cache:
                child_env = {"TB_DIAGNOSTICS_CACHE": cache, **env, **extra_env}
                code, seconds, rss, text = run_child(argv_, a.timeout, child_env,
                                                     during[0] if during else None)
            if code is None:
                held, said = False, f"killed after {a.timeout:.0f} s: " + last_line(text)
            else:
                try:
                    held, said = check(text)
                except Exception as exc:  # the output was not what the check reads
                    held, said = False, f"rc {code}: {type(exc).__name__}: {last_line(text)}"
            _unmount_below(tmp)
            failed += not held
            said = said.replace("|", "\\|").replace("\n", " ")[:300]
            print(f"| {number} | {name} | {'yes' if held else 'NO'} | {seconds:.2f} | "
                  f"{rss:.0f} | {said} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
