"""Hostile files against the loader: how long each takes and how much memory it needs.

    python bench/run_bombs.py [--mb 1024]

Writes gzipped files that inflate to ``--mb`` MiB (white space between two events, white
space alone, zeros, one event with a giant name) into a temporary directory, loads each in
a fresh process and prints its wall time, peak RSS (VmHWM) and what the loader said.
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
MIB = 1 << 20

PROBE = r"""
import sys
from tb_diagnostics.trace import load_trace
from tb_diagnostics.errors import TraceLoadError
try:
    m = load_trace(sys.argv[1])
    said = f"loaded: {len(m)} events"
except TraceLoadError as exc:
    said = f"refused: {exc.problem if hasattr(exc, 'problem') else exc}"
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(f"{hwm / 1024:.0f}|{said}")
"""


def _write(path: Path, head: bytes, filler: bytes, mb: int, tail: bytes) -> None:
    chunk = filler * MIB
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(head)
        for _ in range(mb):
            fh.write(chunk)
        fh.write(tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=1024, help="MiB each file inflates to")
    p.add_argument("--only", help="run only the cases whose name contains this")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cases = {
            "white space between two events": (b'{"traceEvents": [' + EVENT % 1 + b",", b" ",
                                               EVENT % 10 + b"]}"),
            "white space alone": (b"", b" ", b""),
            "zeros": (b"", b"\0", b""),
            "one event with a name of that size": (
                b'{"traceEvents": [' + EVENT % 1 + b',{"ph":"X","cat":"cpu_op","pid":1,'
                b'"tid":1,"ts":3,"dur":1,"name":"', b"a", b'"},' + EVENT % 10 + b"]}"),
        }
        if args.only:
            cases = {k: v for k, v in cases.items() if args.only in k}
        print(f"| file ({args.mb} MiB inflated) | gz MB | seconds | peak RSS MB | result |")
        print("|---|--:|--:|--:|---|")
        for name, (head, filler, tail) in cases.items():
            path = d / f"{name.replace(' ', '_')}.pt.trace.json.gz"
            _write(path, head, filler, args.mb, tail)
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", PROBE, str(path)], check=True,
                                 capture_output=True, text=True).stdout.strip()
            seconds = time.perf_counter() - t0
            rss, said = out.split("|", 1)
            print(f"| {name} | {path.stat().st_size / 1e6:.1f} | {seconds:.2f} | {rss} | "
                  f"{said} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
