"""How soon the tab's server has a good run ready while hostile files load.

    python bench/run_ready.py [--mb 1024] [--bombs 2]

Writes ``--bombs`` gzip files that each inflate to ``--mb`` MiB of white space between two
events (about 1 MB on disk: the small-file pool takes them), plus a copy of the shipped
sample run ``log/train_cnn-bs32-warmup1-cpu``, into a temporary log dir. In a fresh
process it asks the server's loader for the bombs first, then for the good run, and
prints how long the good run took to be ready (and, for scale, how long it takes alone),
how long the bombs took, and the process' resident memory once all loads are over.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
GOOD = Path(__file__).resolve().parent.parent / "log" / "train_cnn-bs32-warmup1-cpu"

PROBE = r"""
import sys, time
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.server.loader import SpanLoader
from tb_diagnostics.server.present import load_and_summarise

def status(key):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))

files = {f.run: f for f in scan_logdir(sys.argv[1]).files}
bombs = sorted(r for r in files if r.startswith("bomb"))
loader = SpanLoader(load_and_summarise)
t0 = time.perf_counter()
for b in bombs:
    loader.get(files[b])
good = loader.wait(files["good"])
t_good = time.perf_counter() - t0
for b in bombs:
    loader.wait(files[b])
t_bombs = time.perf_counter() - t0
assert good.error is None, good.error
loader.shutdown()
print(f"{t_good:.2f}|{t_bombs:.2f}|{status('VmRSS:') / 1024:.0f}|{status('VmHWM:') / 1024:.0f}")
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=1024, help="MiB each bomb inflates to")
    p.add_argument("--bombs", type=int, default=2)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        alone, log = Path(tmp) / "alone", Path(tmp) / "log"
        shutil.copytree(GOOD, alone / "good")
        shutil.copytree(GOOD, log / "good")
        for k in range(args.bombs):
            d = log / f"bomb{k + 1}"
            d.mkdir(parents=True)
            with gzip.open(d / "w.1.pt.trace.json.gz", "wb", compresslevel=9) as fh:
                fh.write(b'{"traceEvents": [' + EVENT % 1 + b",")
                chunk = b" " * (1 << 20)
                for _ in range(args.mb):
                    fh.write(chunk)
                fh.write(EVENT % 10 + b"]}")

        def probe(logdir: Path) -> list[str]:
            return subprocess.run([sys.executable, "-c", PROBE, str(logdir)], check=True,
                                  capture_output=True, text=True).stdout.strip().split("|")

        t_alone = probe(alone)[0]
        t_good, t_bombs, rss, hwm = probe(log)
        print(f"| good run alone | good run after {args.bombs} bombs of {args.mb} MiB | "
              "bombs done | RSS after | peak RSS |")
        print("|--:|--:|--:|--:|--:|")
        print(f"| {t_alone} s | {t_good} s | {t_bombs} s | {rss} MB | {hwm} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
