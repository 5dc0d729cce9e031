"""The load of existing trace files, before and after a change: in-process and whole-process
figures next to ``orjson.loads`` of the same file, interleaved, best of ``--repeat``.

    python bench/run_load.py FILE… [--base PLUGIN_DIR] [--current PLUGIN_DIR] [--repeat 3]
                             [--orjson-python PYTHON] [--out bench/out]

Per file, repeat and code (the current ``plugin/``, and ``--base``'s where given), each in a
fresh process:

- ``load 1 core``: ``load_trace`` in one process with ``TB_DIAGNOSTICS_LOAD_WORKERS=1``,
  imports excluded (the reader, the decode and the model build, nothing else);
- ``load``: the same with the default workers (the parallel load of a big file);
- ``report``: ``tb-diagnostics report --format json --no-cache`` as a whole process
  (imports included): wall time, CPU time of it and its children, the largest sum of
  their RSS (sampled every 50 ms);
- ``orjson``: a whole process that reads the file and runs ``orjson.loads`` on it, with
  ``--orjson-python`` (an interpreter that has orjson; default this one).

The machine's load average is printed with every row: on a shared machine the best of
several interleaved runs is the figure that means something.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from tree_rss import tree_rss  # noqa: E402


def _child(cmd: list[str], env: dict[str, str]) -> dict:
    """Run ``cmd``: wall time, CPU time (its own and its descendants', from this process's
    children accounting), and the largest sum of the RSS of it and its descendants,
    sampled every 50 ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": seconds, "cpu_s": cpu, "stdout": out.decode(errors="replace"),
            "tree_peak_rss_mb": peak[0] / 2**20}


def _env(plugin_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if plugin_dir:
        env["PYTHONPATH"] = plugin_dir + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env

_ORJSON = "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())"
_LOAD = """
import sys, time
from tb_diagnostics.trace.load import load_trace
t0 = time.perf_counter(); c0 = time.process_time()
model = load_trace(sys.argv[1])
print(time.perf_counter() - t0, time.process_time() - c0, len(model.kind))
"""


def _load(path: Path, env: dict[str, str], workers: str | None) -> dict:
    env = dict(env)
    if workers is not None:
        env["TB_DIAGNOSTICS_LOAD_WORKERS"] = workers
    out = _child([sys.executable, "-c", _LOAD, str(path)], env)
    if "error" in out:
        return out
    seconds, cpu, rows = out.pop("stdout").split()
    return {**out, "seconds": float(seconds), "cpu_s": float(cpu), "rows": int(rows)}


def _report(path: Path, env: dict[str, str]) -> dict:
    cli = [sys.executable, "-c", "import sys; from tb_diagnostics.cli import main; "
           "sys.exit(main())", "report", "--format", "json", "--no-cache", str(path.parent)]
    out = _child(cli, env)
    out.pop("stdout", None)
    return out


def _best(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    best = min(ok, key=lambda r: r["seconds"])
    return {**best, "tree_peak_rss_mb": min(r["tree_peak_rss_mb"] for r in ok),
            "all_s": [round(r["seconds"], 2) for r in ok]}


def bench(files: list[Path], base: str | None, repeat: int, orjson_python: str,
          current: str) -> list[dict]:
    variants = {"current": current}
    if base:
        variants["base"] = base
    rows = []
    for path in files:
        runs: dict[str, dict[str, list[dict]]] = {
            v: {"load1": [], "load": [], "report": []} for v in variants}
        orj, loads = [], []
        for _ in range(repeat):
            loads.append(os.getloadavg()[0])
            orj.append(_child([orjson_python, "-c", _ORJSON, str(path)], _env(None)))
            for v, plugin in variants.items():  # interleaved: before and after share the state
                env = _env(plugin)
                runs[v]["load1"].append(_load(path, env, "1"))
                runs[v]["load"].append(_load(path, env, None))
                runs[v]["report"].append(_report(path, env))
        row = {"file": str(path), "mb": path.stat().st_size / 1e6, "orjson": _best(orj),
               "loadavg": loads}
        for v in variants:
            row[v] = {k: _best(r) for k, r in runs[v].items()}
        rows.append(row)
        print(table([row], list(variants)), flush=True)
    return rows


def table(rows: list[dict], variants: list[str]) -> str:
    head = ("file", "MB", "code", "load 1 core s", "load s", "load RSS MB", "report s",
            "report CPU s", "report RSS MB (all procs)", "RSS/file", "orjson s",
            "report/orjson", "load avg")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        oj = r["orjson"].get("seconds", float("nan"))
        for v in variants:
            x = r[v]
            rep = x["report"]
            if "error" in rep:
                lines.append(f"| {Path(r['file']).parent.name} | {r['mb']:.0f} | {v} | "
                             f"error: {rep['error']} |")
                continue
            lines.append(
                f"| {Path(r['file']).parent.name} | {r['mb']:.0f} | {v} | "
                f"{x['load1'].get('seconds', float('nan')):.2f} | "
                f"{x['load'].get('seconds', float('nan')):.2f} | "
                f"{x['load'].get('tree_peak_rss_mb', float('nan')):.0f} | "
                f"{rep['seconds']:.2f} {rep['all_s']} | {rep['cpu_s']:.2f} | "
                f"{rep['tree_peak_rss_mb']:.0f} | {rep['tree_peak_rss_mb'] / r['mb']:.2f} | "
                f"{oj:.2f} | {rep['seconds'] / oj:.2f} | "
                f"{' '.join(f'{a:.1f}' for a in r['loadavg'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--base", help="also measure this plugin directory (before), interleaved")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--orjson-python", default=sys.executable)
    ap.add_argument("--current", default=str(REPO / "plugin"),
                    help="the plugin directory measured as the current code (default: this "
                         "checkout's)")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = bench(args.files, args.base, args.repeat, args.orjson_python, args.current)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"load_{time.strftime('%Y%m%d_%H%M%S')}.json"
    out.write_text(json.dumps({"rows": rows, "took_s": time.time() - t0}, indent=1))
    variants = ["current", "base"] if args.base else ["current"]
    print(table(rows, variants))
    print(f"(written to {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
