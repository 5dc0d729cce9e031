"""The scaling benchmark: deep with_stack traces at several sizes, time per MB at each, so a
superlinear step shows; whole-process and in-process figures, and orjson on the same file,
in one run.

    python bench/run_scale.py [--sizes 50 500] [--repeat 3] [--base PLUGIN_DIR] [--keep]
                              [--out bench/out] [--steps 10000 100000] [--million-steps]

The traces come from ``bench/gen_deep.py`` (a real with_stack profile of a small CNN
training loop, its steps replicated), made on demand under ``bench/data/`` (gitignored);
never in CI. 2000 MB is opt-in (``--sizes 50 500 2000``) and that file is deleted
afterwards unless ``--keep``. Per file and repeat, each in a fresh process:

- ``report``: ``tb-diagnostics report --no-cache`` as a whole process (imports included),
  wall time, its peak RSS, and the largest sum of the RSS of it and its children (a big
  file is decoded by several processes: ``tb_diagnostics.trace.parallel``), sampled
  every 50 ms;
- ``orjson``: a whole process that reads the file and runs ``orjson.loads`` on it;
- ``phases``: in one process, imports excluded: the model (read, decode, build), the
  ancestry views (``innermost_op``, ``outermost_op``), then the span summary.

``--steps N…`` (and ``--million-steps``, which adds 10⁶) also times the many-step GPU
span of ``bench/gen_steps.py`` (10 µs steps, one ``aten::add`` launching a 3 µs kernel
each; issue 28's 10⁶-step target: ≤ 20 s, ≤ 1.5 GB): ``report --format json --no-cache``
as a whole process, wall time and peak RSS, ``--steps-timeout`` seconds at most
(default 600; a run that takes longer shows as a timeout).

``--base DIR`` runs every measurement a second time with ``PYTHONPATH=DIR`` (an older
checkout's ``plugin/``, e.g. from ``git archive``), interleaved with the current code, so
before and after share the machine's state. The best of ``--repeat`` runs is shown.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from gen_deep import DATA, generate  # noqa: E402
from gen_steps import generate as generate_steps  # noqa: E402

_ORJSON = "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())"


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (the parallel load's ranges)."""
    parent, rss = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        p = int(stat.parent.name)
        parent[p], rss[p] = int(fields[1]), int(fields[21])  # ppid, resident pages
    kids: dict[int, list[int]] = {}
    for p, pp in parent.items():
        kids.setdefault(pp, []).append(p)
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += kids.get(p, [])
    return total * os.sysconf("SC_PAGE_SIZE")


def _sample_tree(pid: int, peak: list[int], done: threading.Event) -> None:
    while not done.wait(0.05):
        peak[0] = max(peak[0], _tree_rss(pid))


def _child(cmd: list[str], env: dict[str, str], timeout: float | None = None) -> dict:
    """Run ``cmd``: its peak RSS from the kernel's accounting of that child only, and the
    largest sum over it and its descendants, sampled every 50 ms; killed after
    ``timeout`` seconds (then ``{"error": "timeout"}``)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak, done = [0], threading.Event()
    sampler = threading.Thread(target=_sample_tree, args=(proc.pid, peak, done), daemon=True)
    sampler.start()
    killer = threading.Timer(timeout, proc.kill) if timeout else None
    if killer:
        killer.start()
    out = proc.stdout.read()
    err = proc.stderr.read()
    if killer:
        killer.cancel()
    done.set()
    sampler.join()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if timeout and proc.returncode != 0 and seconds >= timeout:
        return {"error": "timeout", "seconds": seconds}
    if proc.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024,
            "tree_peak_rss_mb": max(peak[0] / 2**20, usage.ru_maxrss / 1024),
            "stdout": out.decode(errors="replace")}


def _env(plugin_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if plugin_dir:
        env["PYTHONPATH"] = plugin_dir + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def measure_once(path: Path, plugin_dir: str | None) -> dict:
    env = _env(plugin_dir)
    cli = [sys.executable, "-c", "import sys; from tb_diagnostics.cli import main; "
           "sys.exit(main())", "report", "--no-cache", str(path.parent)]
    out = {"report": _child(cli, env)}
    out["report"].pop("stdout", None)
    phases = _child([sys.executable, str(HERE / "measure.py"), "phases", str(path)], env)
    if "error" not in phases:
        phases = {**json.loads(phases["stdout"].strip().splitlines()[-1]),
                  "peak_rss_mb": phases["peak_rss_mb"]}
    out["phases"] = phases
    return out


def _best(runs: list[dict], key: str) -> dict:
    ok = [r[key] for r in runs if "error" not in r[key]]
    return min(ok, key=lambda r: r["seconds"]) if ok else runs[0][key]


def bench(sizes: list[int], repeat: int, base: str | None, keep: bool) -> list[dict]:
    rows = []
    for mb in sizes:
        path = generate(mb, DATA / f"deep_{mb}mb")
        size_mb = path.stat().st_size / 1e6
        variants = {"after": None, **({"before": base} if base else {})}
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        orj: list[dict] = []
        for _ in range(repeat):
            for v, plugin_dir in variants.items():  # interleaved: before, after, before…
                print(f"  {mb} MB, {v}…", file=sys.stderr)
                runs[v].append(measure_once(path, plugin_dir))
            orj.append({"orjson": _child([sys.executable, "-c", _ORJSON, str(path)],
                                         _env(None))})
        row = {"mb": size_mb, "orjson": _best(orj, "orjson")}
        for v in variants:
            row[v] = {"report": _best(runs[v], "report"), "phases": _best(runs[v], "phases")}
        rows.append(row)
        if mb >= 2000 and not keep:
            path.unlink()
    return rows


def bench_steps(counts: list[int], repeat: int, base: str | None,
                timeout: float) -> list[dict]:
    """The many-step span at each step count: ``report --format json --no-cache``, whole
    process, best of ``repeat`` (a timeout is not repeated)."""
    rows = []
    for n in counts:
        path = generate_steps(n)
        row: dict = {"steps": n, "mb": path.stat().st_size / 1e6}
        variants = {"after": None, **({"before": base} if base else {})}
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for _ in range(repeat):
            for v, plugin_dir in variants.items():
                if runs[v] and "error" in runs[v][-1]:
                    continue
                print(f"  {n} steps, {v}…", file=sys.stderr)
                cli = [sys.executable, "-c", "import sys; from tb_diagnostics.cli import "
                       "main; sys.exit(main())", "report", "--format", "json", "--no-cache",
                       str(path.parent.parent)]
                r = _child(cli, _env(plugin_dir), timeout)
                r.pop("stdout", None)
                runs[v].append(r)
        for v in variants:
            ok = [r for r in runs[v] if "error" not in r]
            row[v] = min(ok, key=lambda r: r["seconds"]) if ok else runs[v][-1]
        rows.append(row)
    return rows


def steps_table(rows: list[dict], variants: list[str]) -> str:
    # CPU s: the process's user + system time, what a busy machine inflates least.
    head = ("steps", "MB", "code", "report s", "CPU s", "µs/step", "RSS MB", "all procs RSS")
    lines = [head]
    for r in rows:
        for v in variants:
            x = r[v]
            ok = "error" not in x
            lines.append((str(r["steps"]), f"{r['mb']:.0f}", v,
                          _s(x) if ok else f"{x['error']} ({x.get('seconds', 0):.0f} s)",
                          _s(x, "cpu_s") if ok else "—",
                          f"{1e6 * x['seconds'] / r['steps']:.0f}" if ok else "—",
                          _s(x, "peak_rss_mb") if ok else "—",
                          _s(x, "tree_peak_rss_mb") if ok else "—"))
    widths = [max(len(str(x[i])) for x in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(x, widths, strict=True))
                     for x in lines)


def _s(r: dict, key: str = "seconds") -> str:
    return "error" if "error" in r else f"{r[key]:.2f}"


def table(rows: list[dict], variants: list[str]) -> str:
    head = ("MB", "code", "report s", "s/MB·1000", "RSS MB", "all procs RSS", "RSS/file",
            "model s",
            "views s", "summary s", "in-proc s", "in-proc RSS", "orjson s", "orjson RSS",
            "report/orjson")
    lines = [head]
    for r in rows:
        oj = r["orjson"]
        for v in variants:
            rep, ph = r[v]["report"], r[v]["phases"]
            ok, pok = "error" not in rep, "error" not in ph
            lines.append((
                f"{r['mb']:.0f}", v, _s(rep),
                f"{1000 * rep['seconds'] / r['mb']:.2f}" if ok else "—",
                _s(rep, "peak_rss_mb"), _s(rep, "tree_peak_rss_mb"),
                f"{rep['tree_peak_rss_mb'] / r['mb']:.2f}" if ok else "—",
                f"{ph['model']:.2f}" if pok else "error",
                f"{ph['views']:.2f}" if pok else "—", f"{ph['summary']:.2f}" if pok else "—",
                _s(ph), _s(ph, "peak_rss_mb"), _s(oj), _s(oj, "peak_rss_mb"),
                f"{rep['seconds'] / oj['seconds']:.2f}" if ok and "error" not in oj else "—"))
    widths = [max(len(str(x[i])) for x in lines) for i in range(len(head))]
    text = "\n".join("  ".join(str(c).rjust(w) for c, w in zip(x, widths, strict=True))
                     for x in lines)
    growth = []
    for v in variants:
        for a, b in itertools.pairwise(rows):
            ra, rb = a[v]["report"], b[v]["report"]
            if "error" in ra or "error" in rb:
                continue
            ratio = (rb["seconds"] / ra["seconds"]) / (b["mb"] / a["mb"])
            growth.append(f"{v}: {a['mb']:.0f} → {b['mb']:.0f} MB, time grows "
                          f"{ratio:.2f}× faster than size")
    return text + ("\n\n" + "\n".join(growth) if growth else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="*", default=[50, 500], metavar="MB",
                   help="deep traces of these sizes (none: --sizes alone, with --steps)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--base", default=None, metavar="PLUGIN_DIR",
                   help="also measure this plugin directory (before), interleaved")
    p.add_argument("--keep", action="store_true", help="keep the 2000 MB trace")
    p.add_argument("--out", type=Path, default=HERE / "out")
    p.add_argument("--steps", type=int, nargs="*", default=[], metavar="N",
                   help="also time the many-step GPU span (bench/gen_steps.py) of N steps")
    p.add_argument("--million-steps", action="store_true",
                   help="also time the 10^6-step span (issue 28's target)")
    p.add_argument("--steps-timeout", type=float, default=600.0, metavar="S")
    args = p.parse_args(argv)
    rows = bench(sorted(args.sizes), args.repeat, args.base, args.keep)
    variants = ["before", "after"] if args.base else ["after"]
    if rows:
        print(table(rows, variants))
    counts = sorted(set(args.steps) | ({1_000_000} if args.million_steps else set()))
    step_rows = bench_steps(counts, args.repeat, args.base, args.steps_timeout)
    if step_rows:
        print("\n" + steps_table(step_rows, variants))
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "python": platform.python_version(),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "rows": rows,
              "step_rows": step_rows}
    (args.out / "scale.json").write_text(json.dumps(result, indent=2))
    print(f"\nwritten {args.out / 'scale.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
