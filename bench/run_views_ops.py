"""First response time of the Operators and Modules views after a span is loaded.

    .venv/bin/python bench/run_views_ops.py bench/data/tiny_ops_200mb/*.json [...]

Per trace: the load time, then each document's time in order (the first ``ops`` pays
for the per-call figures every later one shares), with the span analysis fresh: nothing
else (the report, the rules) has run, so this is the cold case the tab's first view
request can meet.
"""

from __future__ import annotations

import sys
import time

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.report.views import ViewParams, all_views
from tb_diagnostics.trace import load_trace

CASES = [("ops", ViewParams()), ("ops", ViewParams(group="shapes")),
         ("ops", ViewParams(sort="-calls", q="aten")), ("modules", ViewParams())]


def main(paths: list[str]) -> None:
    for path in paths:
        t0 = time.perf_counter()
        a = SpanAnalysis(load_trace(path))
        print(f"{path}: {len(a.model):,} rows, {len(a.op_rows):,} ops, "
              f"loaded in {time.perf_counter() - t0:.1f} s")
        cases = list(CASES)
        if a.windows:
            cases.append(("ops", ViewParams(step=str(a.windows[len(a.windows) // 2].step))))
        for name, params in cases:
            t = time.perf_counter()
            doc = all_views()[name].document(a, params)
            label = ",".join(f"{k}={v}" for k, v in vars(params).items()
                             if v not in (None, 0, 100) and k != "extra")
            print(f"  {name}({label or 'default'}): {time.perf_counter() - t:.3f} s, "
                  f"{doc['total_rows']} rows")


if __name__ == "__main__":
    main(sys.argv[1:])
