"""Response time of the span timeline route (/timeline) after the span is loaded.

    .venv/bin/python bench/run_span_timeline.py bench/data/tiny_ops_200mb [LOGDIR ...]

Per log dir (its first span), in process through the DataProvider the routes call: the
span's load (not counted), the rows' layout (once per span, built in the background by
the server when the tab asks for the first step), then the route's answer, JSON encoding
included (what the handler sends), for the whole span, again, and zoomed to a half, a
tenth, a hundredth and a thousandth of it; with the items sent, the events they stand
for and the JSON's size.
"""

from __future__ import annotations

import argparse
import time

from tb_diagnostics.analysis.span_rows import span_rows
from tb_diagnostics.output import encode_json
from tb_diagnostics.server import DataProvider

WIDTH = 1400  # pixels: a laptop screen's timeline card


def _span_of(provider: DataProvider) -> tuple[str, str, str]:
    runs = provider.runs()
    while runs["status"] == "scanning":
        time.sleep(0.1)
        runs = provider.runs()
    r = runs["runs"][0]
    w = r["workers"][0]
    return r["run"], w["worker"], w["spans"][0]["span"]


def timed(provider: DataProvider, names: tuple[str, str, str], t0: float | None,
          t1: float | None) -> tuple[float, dict, int]:
    start = time.perf_counter()
    code, doc = provider.span_timeline(*names, None if t0 is None else str(t0),
                                       None if t1 is None else str(t1), str(WIDTH))
    body = encode_json(doc)
    took = time.perf_counter() - start
    assert code == 200 and doc["status"] == "ready", doc
    return took, doc, len(body)


def bench(logdir: str) -> None:
    provider = DataProvider(logdir)
    names = _span_of(provider)
    start = time.perf_counter()
    while True:  # the span loads (and is analysed) in the background, as in the tab
        got = provider.loader.get(provider.find(*names), need_analysis=True)
        if getattr(got, "analysis", None) is not None:
            break
        time.sleep(0.2)
    print(f"{logdir}: loaded in {time.perf_counter() - start:.1f} s "
          f"({len(got.analysis.model):,} events)")
    # The rows' layout, once per span: the server builds it in the background when the
    # tab asks for the span's first step (span_rows.warm), before any /timeline.
    start = time.perf_counter()
    span_rows(got.analysis)
    print(f"  {'layout (once)':>18}: {(time.perf_counter() - start) * 1000:7.1f} ms")
    first = None
    for label, frac in (("whole span", 1.0), ("whole span, again", 1.0),
                        ("1/2", 0.5), ("1/10", 0.1), ("1/100", 0.01), ("1/1000", 0.001)):
        if first is None:
            took, doc, size = timed(provider, names, None, None)
            first = doc["extent"]
        else:
            lo, hi = first["start_us"], first["end_us"]
            mid = lo + (hi - lo) * 0.4
            a, b = (None, None) if frac == 1.0 else (mid, mid + (hi - lo) * frac)
            took, doc, size = timed(provider, names, a, b)
        print(f"  {label:>18}: {took * 1000:7.1f} ms  {doc['shown']:>5} items "
              f"({doc['single']:>5} single) for {doc['total']:>9,} events, "
              f"bin {doc['bin_us']:.3g} µs, {size / 1024:.0f} kB JSON")
    provider.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR")
    for logdir in p.parse_args().logdirs:
        bench(logdir)


if __name__ == "__main__":
    main()
