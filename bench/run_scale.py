"""The scaling benchmark: both kinds of big trace at several sizes and the 10⁶-step span, with
issue 28's targets checked, from one command that prints the README's scale tables (Markdown).

    python bench/run_scale.py [--kinds deep large] [--sizes 50 500 2000] [--repeat 3]
                              [--steps 1000000] [--timeout 600] [--base PLUGIN_DIR]
                              [--phases] [--keep] [--orjson-max-mb MB] [--out bench/out]

With no option it measures everything issue 28 asks for; run it on an idle machine, with
about 18 GB free (``orjson.loads`` of a 2 GB file took 17.5 GB here, 2026-12-01). The kinds:

- ``deep``: ``bench/gen_deep.py``, a real with_stack profile of a small CNN training loop,
  its steps replicated (Python frames up to 67 deep);
- ``large``: ``../shared/bench/workload.py large``, a loop of 2,000 tiny ops per step, each
  with its Python stack and its memory events (torch needed; about 80 s for 2 GB).

Traces are made on demand under ``bench/data/`` (gitignored, never committed, never in
CI: ``deep_<N>mb/``, ``large_<N>mb/``) and reused; those of 2,000 MB and more are deleted
afterwards unless ``--keep``. Per kind, size and repeat, each in a fresh process:

- ``report``: ``tb-diagnostics report --format json --no-cache`` as a whole process (imports
  included): wall time, CPU time, and the peak RSS of its process tree (a big file is decoded
  by several processes, ``tb_diagnostics.trace.parallel``): the largest sum of the RSS of it
  and its descendants, sampled every 50 ms, and at least its own high-water mark;
- ``orjson``: a whole process that reads the same file and runs ``orjson.loads`` on it;
- ``phases`` (``--phases``): in one process, imports excluded, the model, the ancestry views,
  then the span summary (``bench/measure.py phases``).

``--steps N…`` (default 10⁶; ``--steps`` alone: none) times the many-step GPU span of
``bench/gen_steps.py`` (10 µs steps, one ``aten::add`` launching a 3 µs kernel each) the same
way. Every run is killed after ``--timeout`` seconds with its whole process group and shows
as a timeout; a variant that timed out is not repeated at that size.

``--base DIR`` measures everything a second time with ``PYTHONPATH=DIR`` (an older checkout's
``plugin/``, e.g. from ``git archive``), interleaved with the current code, so before and
after share the machine's state; targets are checked on the current code. The best of
``--repeat`` runs is shown. Output: Markdown on stdout (``bench/scale_report.py``), the same in
``OUT/scale.md`` and every figure in ``OUT/scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from gen_steps import generate as generate_steps  # noqa: E402
from scale_report import NOT_TIMED, ok, render  # noqa: E402
from tree_rss import tree_rss  # noqa: E402

DATA = HERE / "data"
WORKLOAD = REPO.parent / "shared" / "bench" / "workload.py"
_CLI = "import sys; from tb_diagnostics.cli import main; sys.exit(main())"
_ORJSON = "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())"
#: Report output larger than this is not parsed for its step count (the 10⁶-step span's is
#: hundreds of MB; its step count is known).
_PARSE_MAX = 64 * 2**20


def child(argv: list[str], env: dict[str, str], timeout: float, stdout: Path | None = None,
          peak_wrapper: bool = True) -> dict:
    """Run ``python ARGV…`` (through ``bench/_peak.py`` for its own high-water mark, which
    ``wait4`` would inflate with this harness's), in its own process group, killed with that
    group after ``timeout`` seconds; its stdout to ``stdout`` (else discarded). Sampled every
    50 ms for the RSS of its tree until ``wait4`` reaps it (its CPU time, children's too)."""
    with tempfile.TemporaryDirectory(prefix="run_scale_") as tmp:
        peak_file, err_file = Path(tmp) / "peak", Path(tmp) / "stderr"
        cmd = [sys.executable, *([str(HERE / "_peak.py")] if peak_wrapper else []), *argv]
        env = {**env, "TB_DIAGNOSTICS_PEAK_FILE": str(peak_file)}
        t0 = time.perf_counter()
        with open(stdout or os.devnull, "wb") as out, open(err_file, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env,
                                    start_new_session=True)
        peak, timed_out = 0, False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, tree_rss(proc.pid))
            if time.perf_counter() - t0 > timeout:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)  # the load's range workers too
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if timed_out:
            return {"error": "timeout", "seconds": seconds}
        if code != 0:
            lines = err_file.read_text(errors="replace").strip().splitlines()
            why = f"killed by signal {-code}" if code < 0 else f"exit {code}"
            return {"error": lines[-1][:200] if lines and code > 0 else why,
                    "seconds": seconds}
        own = float(peak_file.read_text()) * 2**20 / 1e6 if peak_file.exists() else 0.0
    return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": own,
            "tree_rss_mb": max(peak / 1e6, own)}


def _env(plugin_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if plugin_dir:
        env["PYTHONPATH"] = plugin_dir + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def make_trace(kind: str, mb: int) -> Path:
    """The trace of ``kind`` at about ``mb`` MB under ``bench/data/`` (made when missing, in
    a fresh process, into a temporary name renamed when whole: an interrupted generation
    leaves nothing that looks like a trace); its log dir holds that one file."""
    if kind == "deep":
        out = DATA / f"deep_{mb}mb"
        subprocess.run([sys.executable, str(HERE / "gen_deep.py"), "--mb", str(mb),
                        "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
        return out / "worker0.deep.pt.trace.json"
    if kind != "large":
        raise ValueError(f"unknown kind {kind!r}")
    out = DATA / f"large_{mb}mb"  # the run workload.py names for --out bench/data
    made = sorted(out.glob("*.pt.trace.json")) if out.is_dir() else []
    if made:
        return made[0]
    if not WORKLOAD.exists():
        raise SystemExit(f"{WORKLOAD} not found: the large kind needs ../shared/bench")
    tmp = DATA / f".making_large_{mb}mb"
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"  making large {mb} MB with {WORKLOAD.name} (about 40 s per GB)…",
          file=sys.stderr)
    subprocess.run([sys.executable, str(WORKLOAD), "large", "--out", str(tmp),
                    "--target-mb", str(mb)], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(out, ignore_errors=True)
    (tmp / f"large_{mb}mb").rename(out)
    shutil.rmtree(tmp, ignore_errors=True)
    (made,) = out.glob("*.pt.trace.json")
    return made


def _steps_in(report_json: Path) -> int | None:
    """Steps of every span of a ``report --format json`` output, when small enough to read."""
    if not report_json.exists() or report_json.stat().st_size > _PARSE_MAX:
        return None
    try:
        doc = json.loads(report_json.read_bytes())
        return sum(len(s["steps"]) for r in doc["runs"] for w in r["workers"]
                   for s in w["spans"])
    except (ValueError, KeyError, TypeError):
        return None


def _report(logdir: Path, plugin_dir: str | None, timeout: float,
            out: Path | None = None) -> dict:
    return child(["-c", _CLI, "report", "--format", "json", "--no-cache", str(logdir)],
                 _env(plugin_dir), timeout, stdout=out)


def _phases(path: Path, plugin_dir: str | None, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="run_scale_") as tmp:
        out = Path(tmp) / "out"
        r = child([str(HERE / "measure.py"), "phases", str(path)], _env(plugin_dir), timeout,
                  stdout=out, peak_wrapper=False)
        if not ok(r):
            return r
        ph = json.loads(out.read_text().strip().splitlines()[-1])
    ph["rss_mb"] = ph.pop("peak_rss_mb") * 2**20 / 1e6  # measure.py's MiB to MB
    return ph


def _best(runs: list[dict]) -> dict:
    good = [r for r in runs if ok(r)]
    return min(good, key=lambda r: r["seconds"]) if good else runs[-1]


def bench_sizes(kinds: list[str], sizes: list[int], repeat: int, variants: dict,
                timeout: float, phases: bool, keep: bool,
                orjson_max_mb: float | None = None) -> list[dict]:
    rows = []
    for kind in kinds:
        for mb in sizes:
            path = make_trace(kind, mb)
            row: dict = {"kind": kind, "nominal_mb": mb, "mb": path.stat().st_size / 1e6,
                         "steps": None}
            runs: dict[str, list[dict]] = {v: [] for v in variants}
            ph_runs: dict[str, list[dict]] = {v: [] for v in variants}
            orj: list[dict] = []
            with tempfile.TemporaryDirectory(prefix="run_scale_") as tmp:
                for i in range(repeat):
                    for v, plugin_dir in variants.items():  # interleaved: before, after…
                        if runs[v] and runs[v][-1].get("error") == "timeout":
                            continue
                        print(f"  {kind} {mb} MB, {v}, run {i + 1}…", file=sys.stderr)
                        out = Path(tmp) / f"{v}.json"
                        runs[v].append(_report(path.parent, plugin_dir, timeout, out))
                        if v == "after" and row["steps"] is None and ok(runs[v][-1]):
                            row["steps"] = _steps_in(out)
                        if phases:
                            ph_runs[v].append(_phases(path, plugin_dir, timeout))
                    if orjson_max_mb is not None and mb > orjson_max_mb:
                        continue
                    if not orj or orj[-1].get("error") != "timeout":
                        orj.append(child(["-c", _ORJSON, str(path)], _env(None), timeout))
            row["orjson"] = _best(orj) if orj else {"error": NOT_TIMED}
            for v in variants:
                row[v] = {"report": _best(runs[v])}
                if phases:
                    row[v]["phases"] = _best(ph_runs[v])
            rows.append(row)
            if mb >= 2000 and not keep:
                shutil.rmtree(path.parent)
    return rows


def bench_steps(counts: list[int], repeat: int, variants: dict, timeout: float) -> list[dict]:
    """The many-step span at each step count, best of ``repeat`` (a timeout not repeated)."""
    rows = []
    for n in counts:
        path = generate_steps(n)
        row: dict = {"steps": n, "mb": path.stat().st_size / 1e6}
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for i in range(repeat):
            for v, plugin_dir in variants.items():
                if runs[v] and runs[v][-1].get("error") == "timeout":
                    continue
                print(f"  {n} steps, {v}, run {i + 1}…", file=sys.stderr)
                runs[v].append(_report(path.parent.parent, plugin_dir, timeout))
        for v in variants:
            row[v] = _best(runs[v])
        rows.append(row)
    return rows


def _orjson_version() -> str:
    r = subprocess.run([sys.executable, "-c", "import orjson; print(orjson.__version__)"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "not installed (pip install orjson)"


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kinds", nargs="+", choices=("deep", "large"), default=["deep", "large"])
    p.add_argument("--sizes", type=int, nargs="*", default=[50, 500, 2000], metavar="MB",
                   help="trace sizes per kind (--sizes alone: none, only the span)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--steps", type=int, nargs="*", default=[1_000_000], metavar="N",
                   help="many-step GPU spans (bench/gen_steps.py) of N steps "
                        "(--steps alone: none)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="kill any one run after S seconds (shown as a timeout)")
    p.add_argument("--base", default=None, metavar="PLUGIN_DIR",
                   help="also measure this plugin directory (before), interleaved")
    p.add_argument("--phases", action="store_true",
                   help="also time each file in one process by phase (bench/measure.py)")
    p.add_argument("--keep", action="store_true", help="keep the traces of 2000 MB and more")
    p.add_argument("--orjson-max-mb", type=float, default=None, metavar="MB",
                   help="time orjson.loads only for traces of at most MB (nominal) MB: the "
                        "targets compare at 500 MB; at 2,000 MB each try takes minutes and "
                        "about 17.5 GB")
    p.add_argument("--out", type=Path, default=HERE / "out")
    args = p.parse_args(argv)
    variants = {**({"before": args.base} if args.base else {}), "after": None}
    result = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "python": platform.python_version(), "orjson": _orjson_version(),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "command": " ".join(["python", *sys.argv]) if argv is None
              else " ".join(["python bench/run_scale.py", *argv]),
              "repeat": args.repeat, "kinds": args.kinds, "variants": list(variants),
              "load_before": _load()}
    result["rows"] = bench_sizes(args.kinds, sorted(set(args.sizes)), args.repeat, variants,
                                 args.timeout, args.phases, args.keep, args.orjson_max_mb)
    result["step_rows"] = bench_steps(sorted(set(args.steps)), args.repeat, variants,
                                      args.timeout)
    result["load_after"] = _load()
    text = render(result)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(result, indent=2))
    (args.out / "scale.md").write_text(text + "\n")
    print(f"\nwritten {args.out / 'scale.md'} and scale.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
