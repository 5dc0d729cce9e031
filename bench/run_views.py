"""First response time of every table view after a span is loaded, through the ``/view`` route.

    .venv/bin/python bench/run_views.py                       # the 200 MB and 500 MB bench traces
    .venv/bin/python bench/run_views.py --sizes 200 --kernels 200000 --memory 1000000
    .venv/bin/python bench/run_views.py TRACE.json [...]      # any traces (each in its run dir)

Per trace, the span is loaded once the way TensorBoard loads it (a ``DataProvider`` on the
trace's log dir: parse, analysis, the tab's summary with every rule; no disk cache) and that
load time is printed on its own. Then each case is answered by ``DataProvider.view`` (the
``/view`` route's code: parameters parsed, span located, document built) twice:

- *first*: with the span's memos as the load left them, so each case pays for everything it
  needs that the summary did not compute (a case never profits from an earlier case: the
  memos are put back to the loaded state before each one);
- *again*: the same request once more (what a page turn or a re-sort costs).

Beside the first response's wall time, the process's CPU time for it (user + system: the
page faults of fresh arrays count): on a busy machine the wall time is mostly waiting for
a core, the CPU time is what the view costs.

The cases: ops by name, by shapes, of one step and under the busiest module; kernels by
name, by launching op and of one step; memory by outermost and by innermost op and of one
step; modules; any other view of ``report/views`` with its defaults; and the whole-span
timeline (``DataProvider.span_timeline``, 1200 px wide) over the span and over one step.

The traces of each size: the tiny-ops bench trace (``bench/run_bench.py`` generates it:
``workloads/05_tiny_ops.py`` with ``record_shapes``), and where generated, the tiny ops
with Python stacks and memory events of ``../shared/bench/workload.py large``
(``bench/data/large_<N>mb``) and the deep with_stack CNN of ``bench/gen_deep.py``
(``bench/data/deep_<N>mb``, nn.Module frames). All are CPU-only: ``--kernels N`` adds a
made-up GPU trace of N kernels and ``--memory N`` one of N ``[memory]`` events
(``run_views_synth``). The machine's load average is printed before and after each
trace: on a shared 2-core machine the figures move with it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_views_synth import made_up_kernels, made_up_memory  # noqa: E402

from tb_diagnostics.analysis.span import SpanAnalysis  # noqa: E402
from tb_diagnostics.report.views import all_views  # noqa: E402
from tb_diagnostics.server.loader import Progress  # noqa: E402
from tb_diagnostics.server.provider import DataProvider  # noqa: E402

Case = tuple[str, dict[str, str]]
#: The views measured with cases of their own; any other view runs with its defaults.
KNOWN = ("ops", "kernels", "memory", "modules")
#: The whole-span timeline's route (``DataProvider.span_timeline``), measured like a view.
TIMELINE = "span_timeline"


def load_text() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


class Snapshot:
    """The memos of a loaded span (analysis and model), to put back before each case."""

    def __init__(self, a: SpanAnalysis) -> None:
        self.a = a
        self.attrs = dict(a.__dict__)
        self.model = dict(a.model.__dict__)
        # A memo that is itself a dict (a view's per-selection cache) is copied: the
        # cases add to it in place.
        self.computed = {k: (dict(v) if type(v) is dict else v) for k, v in a._computed.items()}
        self.trees = dict(a._call_trees)

    def restore(self) -> None:
        a = self.a
        for obj, saved in ((a, self.attrs), (a.model, self.model)):
            for key in set(obj.__dict__) - set(saved):
                del obj.__dict__[key]
            obj.__dict__.update(saved)
        a._computed.clear()  # the same dict objects as at the snapshot: refilled
        a._computed.update({k: (dict(v) if type(v) is dict else v)
                            for k, v in self.computed.items()})
        a._call_trees.clear()
        a._call_trees.update(self.trees)


def cases(a: SpanAnalysis) -> list[Case]:
    from tb_diagnostics.analysis.views.modules import module_figures

    mid = a.windows[len(a.windows) // 2].step if a.windows else None
    step = {} if mid is None else {"step": str(mid)}
    out: list[Case] = [("ops", {}), ("ops", {"group": "shapes"})]
    if step:
        out.append(("ops", step))
    f = module_figures(a)  # the busiest module (the module filter's worst case)
    if f.calls.size:
        out.append(("ops", {"module": str(int(f.host_us.argmax()))}))
    out += [("kernels", {}), ("kernels", {"group": "op"})]
    if step:
        out.append(("kernels", step))
    out += [("memory", {}), ("memory", {"group": "inner"})]
    if step:
        out.append(("memory", step))
    out.append(("modules", {}))
    out += [(name, {}) for name in sorted(all_views()) if name not in KNOWN]
    if has_span_timeline():  # the whole span, then one step's range, 1200 px wide
        out.append((TIMELINE, {}))
        if a.windows:
            w = a.windows[len(a.windows) // 2]
            out.append((TIMELINE, {"step": str(w.step), "t0": str(w.host_start),
                                   "t1": str(w.host_end)}))
    return out


def has_span_timeline() -> bool:
    return hasattr(DataProvider, "span_timeline")


def request(provider: DataProvider, where: tuple[str, str, str], name: str,
            args: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """One case through the provider's route code: ``/view`` or ``/span_timeline``."""
    if name == TIMELINE:
        code, doc = provider.span_timeline(*where, args.get("t0"), args.get("t1"), "1200")
        return code, {**doc, "view": TIMELINE}
    return provider.view(name, *where, dict(args))


def _size(doc: dict[str, Any]) -> str:
    if doc.get("view") == "memory":
        return f"{sum(d['events'] for d in doc['devices']):,} memory events"
    if doc.get("view") == "kernels":
        return f"{doc['totals']['calls']:,} kernels, {doc['total_rows']:,} rows"
    if doc.get("view") == TIMELINE:
        return f"{len(doc['events']['row']):,} items"
    if doc.get("view") == "ops":
        return f"{doc['totals']['calls']:,} calls, {doc['total_rows']:,} rows"
    return f"{doc.get('total_rows', 0):,} rows"


def measure(path: Path) -> list[dict[str, Any]]:
    """Load ``path`` (a trace in its run directory) and time every case; the rows printed."""
    logdir, run = path.parent.parent, path.parent.name
    provider = DataProvider(str(logdir), fresh_s=0.0)
    try:
        listed = provider.runs()
        span = next(s for r in listed["runs"] if r["run"] == run for w in r["workers"]
                    for s in w["spans"] if s["file"] == f"{run}/{path.name}")
        worker = next(w["worker"] for r in listed["runs"] if r["run"] == run
                      for w in r["workers"] if span in w["spans"])
        where = (run, worker, span["span"])
        print(f"{path} ({path.stat().st_size / 1e6:.0f} MB): {load_text()}", flush=True)
        # The load as the route starts it, waited for without asking any view (a view
        # request would warm the memos the first responses are to pay for).
        f = provider._locate(*where).file
        t0 = time.perf_counter()
        while isinstance(got := provider.loader.get(f, need_analysis=True), Progress):
            time.sleep(0.02)
        load_s = time.perf_counter() - t0
        if got.error or got.analysis is None:
            raise SystemExit(f"{path}: {got.error or 'evicted'}")
        a = got.analysis
        print(f"  loaded (parse, analysis, summary) in {load_s:.1f} s: {len(a.model):,} rows, "
              f"{len(a.op_rows):,} ops, {len(a.model.memory):,} memory events, "
              f"{len(a.windows)} steps", flush=True)
        snap = Snapshot(a)
        out = []
        for name, args in cases(a):
            snap.restore()
            times, cpu, doc = [], [], {}
            for _ in range(2):
                t, c = time.perf_counter(), time.process_time()
                code, doc = request(provider, where, name, args)
                times.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
                if code != 200:
                    raise SystemExit(f"{name} {args}: {code} {doc}")
            shown = {k: v for k, v in args.items() if k not in ("t0", "t1")}  # step says it
            label = ",".join(f"{k}={v}" for k, v in shown.items()) or "default"
            out.append({"trace": path.name, "view": name, "params": label,
                        "first_s": times[0], "first_cpu_s": cpu[0], "again_s": times[1]})
            print(f"  {name + '(' + label + ')':<26} first {times[0]:6.3f} s (CPU "
                  f"{cpu[0]:5.3f})   again {times[1]:6.3f} s   {_size(doc)}", flush=True)
        print(f"  after: {load_text()}", flush=True)
        return out
    finally:
        provider.shutdown()


#: The other kinds of bench trace of a size, where generated (they take torch): the tiny
#: ops with Python stacks and memory events, and the deep with_stack CNN with modules.
OTHER_KINDS = (("large_{mb}mb", "python ../shared/bench/workload.py large --out bench/data "
                "--target-mb {mb}"),
               ("deep_{mb}mb", "python bench/gen_deep.py --mb {mb}"))


def bench_traces(sizes: list[int]) -> list[Path]:
    """The tiny-ops bench trace of each size (generated when missing, as run_bench does)
    and, where they have been generated, the other kinds of that size."""
    from run_bench import DATA, ensure_traces

    out = [p for p in ensure_traces(sizes) if p.suffix == ".json"]
    for mb in sizes:
        for run, how in OTHER_KINDS:
            found = sorted((DATA / run.format(mb=mb)).glob("*.pt.trace.json"))
            if found:
                out.append(found[0])
            else:
                print(f"no {run.format(mb=mb)} trace (to make one: {how.format(mb=mb)})",
                      file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", type=Path, help="traces (default: the bench traces)")
    p.add_argument("--sizes", type=int, nargs="*", default=None, metavar="MB",
                   help="bench traces of these sizes (default 200 500; none with paths); "
                        "after the paths, which it would take for sizes")
    p.add_argument("--kernels", type=int, default=0, help="also a made-up trace of N kernels")
    p.add_argument("--memory", type=int, default=0,
                   help="also a made-up trace of N [memory] events")
    args = p.parse_args(argv)
    sizes = args.sizes if args.sizes is not None else ([] if args.paths else [200, 500])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = [*args.paths, *bench_traces(sizes)]
        if args.kernels:
            paths.append(made_up_kernels(Path(tmp) / "kernels", args.kernels))
        if args.memory:
            paths.append(made_up_memory(Path(tmp) / "memory", args.memory))
        for path in paths:
            rows += measure(path.resolve())
    worst = max(rows, key=lambda r: r["first_s"], default=None)
    if worst:
        print(f"slowest first response: {worst['view']}({worst['params']}) on "
              f"{worst['trace']}: {worst['first_s']:.3f} s (CPU {worst['first_cpu_s']:.3f} s)")
    dearest = max(rows, key=lambda r: r["first_cpu_s"], default=None)
    if dearest:
        print(f"most CPU in a first response: {dearest['view']}({dearest['params']}) on "
              f"{dearest['trace']}: {dearest['first_cpu_s']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
