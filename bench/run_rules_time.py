"""How long each rule takes on one span: the figures a timed unit test must not assert.

    python bench/run_rules_time.py [TRACE] [--repeat 3]

Loads the trace (default: the biggest shared one, ``../shared/traces/
hta_v100_profile_memory_rank1_of2``), computes the step windows once (the engine's own
views are not a rule's cost), then runs every rule ``--repeat`` times on the same analysis
and prints each rule's best time, sorted, and the total. The first run of a rule also pays
for the analysis views it is the first to ask for (memoized), which the best of the
repeats leaves out: both are printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugin"))

from tb_diagnostics.analysis import SpanAnalysis  # noqa: E402
from tb_diagnostics.rules import all_rules  # noqa: E402
from tb_diagnostics.trace import load_trace  # noqa: E402

DEFAULT = REPO.parent / "shared" / "traces" / "hta_v100_profile_memory_rank1_of2"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", nargs="?", type=Path, default=DEFAULT,
                   help="a trace file, or a directory whose first trace is used")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    path = args.trace
    if path.is_dir():
        path = next(iter(sorted(path.glob("*.pt.trace.json*"))), None)
    if path is None or not path.is_file():
        print(f"no trace at {args.trace}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    analysis = SpanAnalysis(load_trace(str(path)))
    _ = analysis.windows
    print(f"{path.name}: loaded and windowed in {time.perf_counter() - t0:.2f} s, "
          f"{len(analysis.model):,} rows, {len(analysis.windows)} windows")
    first: dict[str, float] = {}
    best: dict[str, float] = {}
    for k in range(max(1, args.repeat)):
        for rule in all_rules():
            t = time.perf_counter()
            try:
                rule.run(analysis)
            except Exception as exc:  # a benchmark reports it, the tests catch it
                print(f"  {rule.id}: raised {type(exc).__name__}: {exc}")
            dt = time.perf_counter() - t
            if k == 0:
                first[rule.id] = dt
            best[rule.id] = min(best.get(rule.id, dt), dt)
    print(f"{'rule':32} {'first s':>8} {'best s':>8}")
    for rid in sorted(best, key=lambda r: -first[r]):
        print(f"{rid:32} {first[rid]:8.3f} {best[rid]:8.3f}")
    print(f"{'all rules':32} {sum(first.values()):8.3f} {sum(best.values()):8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
