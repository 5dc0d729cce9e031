"""Predicted against measured savings: the replay's projection on a run, and the same
program with the fix applied, profiled for real.

    python bench/run_whatif.py [--shared DIR] [--log DIR]

Pairs (each: the run before the fix, the run after, the change that models the fix):
the shared ResNet-50 on a V100 with ``num_workers=0`` and ``num_workers=4``, per
profiling cycle (span), and the sample runs of ``log/`` that differ by one workload flag.
"Measured" is the median warm step before minus the median warm step after; "predicted"
is the ``saves_us`` of the change's projection (``spans[].whatif``) in the run before.
Prints a table with the error of each prediction; a pair whose change does not apply to
its run says so instead.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from tb_diagnostics.engine import build_document
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.compare import cold_steps

REPO = Path(__file__).resolve().parents[1]

#: (label, before run, after run, change id, which log dir: "shared" or "log")
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
]


def _spans(doc: dict, run: str) -> list[dict]:
    r = next((x for x in doc["runs"] if x["run"] == run), None)
    return [s for w in r["workers"] for s in w["spans"]] if r else []


def _warm_median(span: dict) -> float:
    cold = cold_steps(span)
    walls = [s["wall_us"] for s in span["steps"] if s["step"] not in cold] or \
        [s["wall_us"] for s in span["steps"]]
    return statistics.median(walls)


def rows(logdirs: dict[str, Path]) -> list[dict]:
    docs = {k: build_document(scan_logdir(str(v))) for k, v in logdirs.items() if v.is_dir()}
    out = []
    for label, before, after, change, where in PAIRS:
        doc = docs.get(where)
        if doc is None:
            continue
        b_spans, a_spans = _spans(doc, before), _spans(doc, after)
        if not b_spans or not a_spans:
            continue
        for cycle, (b, a) in enumerate(zip(b_spans, a_spans, strict=False)):
            measured = _warm_median(b) - _warm_median(a)
            proj = next((w for w in b.get("whatif", []) if w["id"] == change), None)
            predicted = None if proj is None else proj["saves_us"]
            err = (None if predicted is None or measured == 0
                   else (predicted - measured) / abs(measured))
            out.append({"pair": label + (f" (cycle {cycle + 1})" if len(b_spans) > 1 else ""),
                        "change": change, "before_ms": _warm_median(b) / 1000,
                        "after_ms": _warm_median(a) / 1000, "measured_ms": measured / 1000,
                        "predicted_ms": None if predicted is None else predicted / 1000,
                        "error": err})
    return out


def table(rs: list[dict]) -> str:
    head = ("| pair | change | before ms | after ms | measured saving ms | predicted ms | "
            "error |\n|---|---|--:|--:|--:|--:|--:|")
    lines = [head]
    for r in rs:
        pred = "not modelled" if r["predicted_ms"] is None else f"{r['predicted_ms']:.2f}"
        err = "—" if r["error"] is None else f"{100 * r['error']:+.0f}%"
        lines.append(f"| {r['pair']} | `{r['change']}` | {r['before_ms']:.2f} | "
                     f"{r['after_ms']:.2f} | {r['measured_ms']:.2f} | {pred} | {err} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "traces")
    p.add_argument("--log", type=Path, default=REPO / "log")
    args = p.parse_args(argv)
    print(table(rows({"shared": args.shared, "log": args.log})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
