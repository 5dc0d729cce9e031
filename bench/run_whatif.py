"""Predicted against measured savings: the replay's projection on a run, and the same
program with the fix applied, profiled for real.

    python bench/run_whatif.py [--shared DIR] [--pairs DIR] [--log DIR]

Pairs (each: the run before the fix, the run after, the change that models the fix):
the shared ResNet-50 on a V100 with ``num_workers=0`` and ``num_workers=4``, per
profiling cycle (span); the shared pair ``../shared/pairs/h100_toyblocks_eager_vs_compile``
(eager → ``torch.compile`` default mode, 5 iterations without ``ProfilerStep#``: the
engine infers them, from the compiled regions after and the repeating calls before),
projected with ``compile`` and with ``compile-graphs``; and the sample runs of ``log/``
that differ by one workload flag.
"Measured" is the mean warm step before minus the mean warm step after: the statistic the
prediction is (``saves_us``, what the warm steps save in all over their number, of the
change's projection in the run before: ``spans[].whatif``); the last column gives the
medians' difference too, what a typical step gained;
both also as a change of the step before. Prints a table with the error of each
prediction; a pair whose change does not apply to its run says so instead, and a
projection whose fix the run after did not make (``compile-graphs`` beside a default-mode
run) gives no error.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.compare import cold_steps

REPO = Path(__file__).resolve().parents[1]

#: The shared before/after pairs (``--pairs``), each a log dir of two runs.
COMPILE_PAIR = "h100_toyblocks_eager_vs_compile"

#: (label, before run, after run, change id, which log dir: "shared", "log" or
#: "pair:<folder>" under ``--pairs``[, whether the run after made this very fix])
PAIRS = [
    ("ResNet-50 V100, num_workers 0 → 4", "kineto_resnet50_v100_dataloader_workers0",
     "kineto_resnet50_v100_dataloader_workers4", "input", "shared"),
    ("CPU train_cnn, slow input 4 ms, 0 → 8 workers", "train_cnn-bs32-slowinput4ms-cpu",
     "train_cnn-bs32-workers8-slowinput4ms-warmup2-cpu", "input", "log"),
    ("CPU sync in loop → no sync", "sync_in_loop-sync-cpu", "sync_in_loop-nosync-cpu", "syncs",
     "log"),
    ("CPU tiny ops eager → fused", "tiny_ops-unfused-cpu", "tiny_ops-fused-cpu", "fusion", "log"),
    ("CPU matmul 64, no warm-up → 3 warm-up steps", "matmul_add-size64-cpu",
     "matmul_add-size64-warmup3-cpu", "warmup", "log"),
    ("H100 toy blocks, eager → torch.compile", "before", "after", "compile",
     f"pair:{COMPILE_PAIR}"),
    # The run after is default mode: the reduce-overhead projection sits beside it, no error.
    ("H100 toy blocks, eager → torch.compile", "before", "after", "compile-graphs",
     f"pair:{COMPILE_PAIR}", False),
]


def _spans(doc: dict, run: str) -> list[dict]:
    r = next((x for x in doc["runs"] if x["run"] == run), None)
    return [s for w in r["workers"] for s in w["spans"]] if r else []


def _warm_walls(span: dict) -> list[float]:
    """The walls of the span's warm steps (all of them where every one is cold)."""
    cold = cold_steps(span)
    return [s["wall_us"] for s in span["steps"] if s["step"] not in cold] or \
        [s["wall_us"] for s in span["steps"]]


def _warm_mean(span: dict) -> float:
    return statistics.fmean(_warm_walls(span))


def _warm_median(span: dict) -> float:
    return statistics.median(_warm_walls(span))


def rows(logdirs: dict[str, Path]) -> list[dict]:
    docs = {k: build_document(scan_logdir(str(v))) for k, v in logdirs.items() if v.is_dir()}
    out = []
    for label, before, after, change, where, *same in PAIRS:
        compared = same[0] if same else True
        doc = docs.get(where)
        if doc is None:
            continue
        b_spans, a_spans = _spans(doc, before), _spans(doc, after)
        if not b_spans or not a_spans:
            continue
        for cycle, (b, a) in enumerate(zip(b_spans, a_spans, strict=False)):
            measured = _warm_mean(b) - _warm_mean(a)
            # The medians too: a run after the fix with a few slow steps of its own (loader
            # workers competing for the host) moves its mean, not its typical step.
            measured_median = _warm_median(b) - _warm_median(a)
            proj = next((w for w in b.get("whatif", []) if w["id"] == change), None)
            predicted = None if proj is None else proj["saves_us"]
            err = (None if predicted is None or measured == 0 or not compared
                   else (predicted - measured) / abs(measured))
            base = _warm_mean(b)
            out.append({"pair": label + (f" (cycle {cycle + 1})" if len(b_spans) > 1 else ""),
                        "change": change, "before_ms": base / 1000,
                        "after_ms": _warm_mean(a) / 1000, "measured_ms": measured / 1000,
                        "predicted_ms": None if predicted is None else predicted / 1000,
                        "measured_change": -measured / base if base else None,
                        "predicted_change": (None if predicted is None or not base
                                             else -predicted / base),
                        "measured_median_ms": measured_median / 1000,
                        "error_median": (None if predicted is None or measured_median == 0
                                         or not compared
                                         else (predicted - measured_median)
                                         / abs(measured_median)),
                        "compared": compared, "error": err})
    return out


def table(rs: list[dict]) -> str:
    head = ("| pair | change | before ms | after ms | measured saving ms | predicted ms | "
            "measured change | predicted change | error | median steps: saving ms, error |\n"
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    lines = [head]
    for r in rs:
        pred = "not modelled" if r["predicted_ms"] is None else f"{r['predicted_ms']:.3f}"
        err = ("—" if r["error"] is None else f"{100 * r['error']:+.0f}%") + (
            "" if r.get("compared", True) else " (not this fix)")
        lines.append(f"| {r['pair']} | `{r['change']}` | {r['before_ms']:.3f} | "
                     f"{r['after_ms']:.3f} | {r['measured_ms']:.3f} | {pred} | "
                     f"{_pct(r.get('measured_change'))} | {_pct(r.get('predicted_change'))} | "
                     f"{err} | {r['measured_median_ms']:.3f}, {_err(r['error_median'])} |")
    return "\n".join(lines)


def _err(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f}%"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "traces")
    p.add_argument("--pairs", type=Path, default=REPO.parent / "shared" / "pairs")
    p.add_argument("--log", type=Path, default=REPO / "log")
    args = p.parse_args(argv)
    dirs = {"shared": args.shared, "log": args.log}
    dirs.update({w: args.pairs / w.removeprefix("pair:") for *_, w in
                 (entry[:5] for entry in PAIRS) if w.startswith("pair:")})
    print(table(rows(dirs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
