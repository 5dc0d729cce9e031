"""Scale-out benchmark: one log dir of many small trace files, analysed with 1 and 2
workers, in the local process pool and on a Dask LocalCluster.

    python bench/run_scaleout.py [--files 16] [--source DIR]

Copies of a sample trace (each under its own worker name, so nothing is deduplicated)
go into a temporary log dir; no cache is used, so every run parses and analyses every
file (the source defaults to the shared 2-rank NCCL A100 trace, else a sample run). Both
local configurations use an explicit process pool, so 1 and 2 workers pay the same
start-up. Prints one line per configuration with the wall time and the speed-up over 1
worker. Dask is skipped when ``dask[distributed]`` is not installed.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "traces" / "hta_a100_nccl_train_rank0_of2"
SOURCE = SHARED if SHARED.is_dir() else REPO / "log" / "train_cnn-bs32-warmup1-cpu"


def make_logdir(root: Path, source: Path, n: int) -> None:
    files = sorted(source.glob("*.pt.trace.json*"))
    if not files:
        raise SystemExit(f"no trace files in {source}")
    for i in range(n):
        src = files[i % len(files)]
        suffix = src.name[src.name.index(".pt.trace.json"):]
        dst = root / "many" / f"worker{i:04d}.{1000 + i}{suffix}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def timed(fn) -> tuple[float, dict]:
    t0 = time.perf_counter()
    doc = fn()
    return time.perf_counter() - t0, doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--source", default=str(SOURCE))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_logdir(root, Path(args.source), args.files)
        ld = scan_logdir(str(root))
        size = sum(f.size for r in ld.runs for f in r.files) / 1e6
        print(f"log dir: {args.files} files, {size:.1f} MB (copies of {Path(args.source).name})")
        base = None
        for n in (1, 2):
            with ProcessPoolExecutor(max_workers=n, mp_context=get_context("spawn")) as pool:
                dt, doc = timed(lambda p=pool: build_document(ld, executor=p))
            base = base or dt
            print(f"local pool  {n} worker{'s' if n > 1 else ' '}: {dt:6.2f} s  "
                  f"speed-up {base / dt:4.2f}x")
        try:
            import distributed
        except ImportError:
            print("dask: not installed (pip install 'tb-diagnostics[dask]')")
            return
        base = None
        for n in (1, 2):
            with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                          dashboard_address=None) as cluster, \
                    distributed.Client(cluster) as client:
                dt, ddoc = timed(lambda c=client: build_document(ld, executor=c.get_executor()))
            base = base or dt
            same = "identical" if ddoc == doc else "DIFFERENT"
            print(f"dask        {n} worker{'s' if n > 1 else ' '}: {dt:6.2f} s  "
                  f"speed-up {base / dt:4.2f}x  ({same} to the local pool)")


if __name__ == "__main__":
    main()
