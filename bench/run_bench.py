"""The load benchmark: our cold and warm "ready" time and peak memory against the floors
(``orjson.loads``, ``json.loads``) and torch-tb-profiler, on the same files, in one run.

    python bench/run_bench.py [--sizes 50 200 500] [--repeat 1] [--no-peer] [--no-paint]
                              [--out bench/out]

Large CPU traces are generated reproducibly with ``workloads/05_tiny_ops.py`` (seeded, with
``record_shapes``) the first time, at about 50, 200 and 500 MB uncompressed, plus gzipped
copies, under ``bench/data/`` (gitignored). Every figure is measured in a fresh process, so
peak RSS belongs to that measurement alone. Prints a table and writes ``results.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
#: Events of one profiled tiny_ops step with these flags, measured once: scale steps from it.
GEN_FLAGS = ["--chunks", "200", "--numel", "64", "--record-shapes", "--no-gzip", "--seed", "0",
             "--device", "cpu", "--sched-wait", "0", "--sched-warmup", "1"]


def _trace_in(run_dir: Path) -> Path | None:
    found = sorted(run_dir.glob("*.pt.trace.json"))
    return found[0] if found else None


def _generate(run: str, active: int) -> Path:
    run_dir = DATA / run
    cmd = [sys.executable, str(REPO / "workloads" / "05_tiny_ops.py"), "--logdir", str(DATA),
           "--run", run, "--sched-active", str(active), "--steps", str(active + 1), *GEN_FLAGS]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    path = _trace_in(run_dir)
    if path is None:
        raise SystemExit(f"generation of {run} wrote no trace: {' '.join(cmd)}")
    return path


def ensure_traces(sizes_mb: list[int]) -> list[Path]:
    """The plain and gzipped trace of each size, generated when missing."""
    DATA.mkdir(parents=True, exist_ok=True)
    probe = _trace_in(DATA / "probe") or _generate("probe", 2)
    per_step = probe.stat().st_size / 2
    out = []
    for mb in sizes_mb:
        run = f"tiny_ops_{mb}mb"
        path = _trace_in(DATA / run)
        if path is None:
            active = max(1, round(mb * 1e6 / per_step))
            print(f"generating {run} ({active} active steps)…", file=sys.stderr)
            path = _generate(run, active)
        gz_dir = DATA / f"{run}_gz"
        gz = gz_dir / (path.name + ".gz")
        if not gz.exists():
            gz_dir.mkdir(exist_ok=True)
            with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        out += [path, gz]
    return out


def json_bytes(path: Path) -> int:
    """Uncompressed size, counted in blocks (this process stays small: see measure.py)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            n += len(block)
    return n


def measure(what: str, path: Path, cache_dir: str | None = None) -> dict:
    cmd = [sys.executable, str(HERE / "measure.py"), what, str(path)]
    if cache_dir:
        cmd.append(cache_dir)
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def have_peer() -> bool:
    try:
        import torch_tb_profiler  # noqa: F401
    except ImportError:
        return False
    return True


def best(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    return min(ok, key=lambda r: r["seconds"]) if ok else runs[0]


def bench_file(path: Path, repeat: int, peer: bool) -> dict:
    row: dict = {"file": str(path.relative_to(REPO)), "mb_on_disk": path.stat().st_size / 1e6}
    row["mb_json"] = json_bytes(path) / 1e6
    cold, warm = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache:
            cold.append(measure("ours", path, cache))
            warm.append(measure("ours", path, cache))
    row["ours_cold"], row["ours_warm"] = best(cold), best(warm)
    row["orjson"] = best([measure("orjson", path) for _ in range(repeat)])
    row["json"] = best([measure("json", path) for _ in range(repeat)])
    if peer:
        row["tbprofiler"] = measure("tbprofiler", path)
    return row


def _fmt(r: dict, key: str = "seconds") -> str:
    return "error" if "error" in r else f"{r[key]:.2f}"


def table(rows: list[dict]) -> str:
    head = ("file", "JSON MB", "ours cold s", "ours warm s", "orjson s", "json s",
            "tb-profiler s", "ours/orjson", "tbp/ours", "ours RSS MB", "RSS/JSON",
            "tbp RSS MB")
    lines = [head]
    for r in rows:
        oc, oj, tbp = r["ours_cold"], r["orjson"], r.get("tbprofiler")
        ratio = (f"{oc['seconds'] / oj['seconds']:.2f}"
                 if "error" not in oc and "error" not in oj else "—")
        speed = (f"{tbp['seconds'] / oc['seconds']:.1f}x"
                 if tbp and "error" not in tbp and "error" not in oc else "—")
        lines.append((Path(r["file"]).parent.name, f"{r['mb_json']:.0f}", _fmt(oc),
                      _fmt(r["ours_warm"]), _fmt(oj), _fmt(r["json"]),
                      _fmt(tbp) if tbp else "—", ratio, speed, _fmt(oc, "peak_rss_mb"),
                      f"{oc['peak_rss_mb'] / r['mb_json']:.2f}" if "error" not in oc else "—",
                      _fmt(tbp, "peak_rss_mb") if tbp else "—"))
    widths = [max(len(str(x[i])) for x in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(x, widths, strict=True))
                     for x in lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 500], metavar="MB")
    p.add_argument("--repeat", type=int, default=1, help="take the best of N runs of each")
    p.add_argument("--no-peer", action="store_true", help="skip torch-tb-profiler")
    p.add_argument("--no-paint", action="store_true",
                   help="skip the tab's paint times in Chromium (run_paint.py)")
    p.add_argument("--paint-sizes", type=int, nargs="+", default=[50, 200], metavar="MB")
    p.add_argument("--out", type=Path, default=HERE / "out")
    args = p.parse_args(argv)
    files = ensure_traces(args.sizes)
    peer = have_peer() and not args.no_peer
    rows = []
    for f in files:
        print(f"measuring {f.relative_to(REPO)}…", file=sys.stderr)
        rows.append(bench_file(f, args.repeat, peer))
    base = measure("baseline", files[0])
    print(table(rows))
    if "error" not in base:
        print(f"\nours RSS includes {base['peak_rss_mb']:.1f} MB of interpreter, numpy and "
              "engine, resident before the first byte is read")
    paint = []
    if not args.no_paint:
        from run_paint import chromium_path, measure_paint, paint_table

        if chromium_path() is None:
            print("\nno chromium/playwright here: the tab's paint times are skipped",
                  file=sys.stderr)
        else:
            paint = measure_paint([f for f in ensure_traces(args.paint_sizes)
                                   if f.suffix == ".json"], repeat=3)
            print("\nthe tab, in headless Chromium (times from the tab's frame starting to load; "
                  "whole page: from navigation, TensorBoard's shell included)")
            print(paint_table(paint))
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "python": platform.python_version(),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "baseline_rss_mb": base.get("peak_rss_mb"), "rows": rows, "paint": paint}
    (args.out / "results.json").write_text(json.dumps(result, indent=2))
    print(f"\nwritten {args.out / 'results.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
