"""Our critical path against Holistic Trace Analysis' (issue 27, item 6).

    .venv/bin/python bench/run_critpath_hta.py [--traces DIR] [--only RUN ...]
                                               [--timeout S] [--json FILE] [--ours-at REV]
    .venv/bin/python bench/run_critpath_hta.py --from-json FILE   # a saved run's tables

HTA (``traceinsight`` 0.6.1) is never a dependency of ours: the script makes its own venv
once, ``bench/.venv-hta`` (git-ignored), and runs HTA there, in a child process per trace
file (this same file with ``--hta-worker``, which imports nothing of ours). HTA wants a
directory of rank files, so each file gets a temporary directory of its own with a link to
it (two files of one run would otherwise collide on one rank). Ours is the package as
committed at ``--ours-at`` (HEAD), exported to a temporary directory: the shared work tree
changes under a run of many minutes.

Per ``ProfilerStep#N`` on the host, HTA is asked for the step's path as its docs say:
``TraceAnalysis(trace_dir=..., include_last_profiler_step=True).critical_path_analysis(rank,
annotation="ProfilerStep", instance_id=i, data_load_events=[our DataLoader pattern])``
(without ``include_last_profiler_step`` HTA drops the last step: a one-step trace has none).
``i`` is the step's position in the list HTA builds itself: every event whose name contains
the annotation, in the trace frame's order, the GPU side's ``gpu_user_annotation`` copies of
the steps included, so the script builds that list the same way and passes the position of
the host event.
HTA's shares are its ``summary()``: each ``bound_by`` class's edge weight over the
path's, in %. They are set against ours (``steps[].critical_path.by_kind`` over
``total_us``), class by class:

====================  ===================================================
ours                  HTA
====================  ===================================================
host                  cpu_bound
input                 data_loading
device                gpu_compute_bound
comm                  gpu_communication_bound
latency               gpu_kernel_launch_overhead + gpu_kernel_kernel_overhead
====================  ===================================================

HTA's sync and dependency edges weigh nothing (its ``bound_by`` gives them ""); its path is
the longest weighted path of the step's graph, so it can cover less than the step: the
table gives its length beside our step's wall. A step HTA cannot do shows HTA's error as it
fails (the exception, or the error it logs when it returns no path).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / "bench" / ".venv-hta"
HTA_PIN = "traceinsight==0.6.1"
#: Our classes, and HTA's ``bound_by`` values that are each one.
CLASSES: dict[str, tuple[str, ...]] = {
    "host": ("cpu_bound",),
    "input": ("data_loading",),
    "device": ("gpu_compute_bound",),
    "comm": ("gpu_communication_bound",),
    "latency": ("gpu_kernel_launch_overhead", "gpu_kernel_kernel_overhead"),
}
#: What we count as the DataLoader (``trace/categories.py``'s INPUT_NAME: the
#: ``enumerate(DataLoader)`` label and ``torch/utils/data/dataloader.py`` frames), given to
#: HTA as its ``data_load_events`` so that both name the same host time ``input``. Plain
#: substrings: HTA ``re.escape``s the patterns when it picks the events for its graph
#: (``TraceSymbolTable.find_matches``) but ``re.search``es them unescaped in ``bound_by``,
#: so only a pattern that means the same both ways works.
DATA_LOAD_EVENTS = ["DataLoader", "dataloader.py"]


# ---------------------------------------------------------------- the HTA side (its venv)

def _hta_worker(trace_dir: str) -> dict[str, Any]:
    """Every host ``ProfilerStep#N`` of the one rank file in ``trace_dir``, through HTA."""
    import pandas as pd
    from hta.trace_analysis import TraceAnalysis

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(level=logging.WARNING)
    logging.getLogger().addHandler(keep)
    for name in list(logging.root.manager.loggerDict):
        logging.getLogger(name).addHandler(keep)

    def logged() -> list[str]:
        out = [f"{r.levelname}: {r.getMessage()}" for r in records]
        records.clear()
        return out

    try:
        # HTA drops the last ProfilerStep (and everything after its start) by default; a
        # one-step trace would have nothing left. Kept, every step is asked.
        ta = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
        rank = ta.t.get_ranks()[0]
        df = ta.t.get_trace(rank)
    except Exception as exc:  # HTA's failure is the result
        return {"load_error": f"{type(exc).__name__}: {exc}", "log": logged()}
    sym_index = ta.t.symbol_table.get_sym_id_map()
    sym_table = ta.t.symbol_table.get_sym_table()
    annotation = "ProfilerStep"
    # HTA's own list (critical_path_analysis): names containing the annotation, frame order.
    ids = [v for k, v in sym_index.items() if annotation in k]
    ann = df[df.name.isin(ids)]
    out: dict[str, Any] = {"rank": int(rank), "log": logged(), "steps": [],
                           "annotations": len(ann)}
    for pos, (_, ev) in enumerate(ann.iterrows()):
        if int(ev["stream"]) != -1 or sym_table[int(ev["cat"])] == "gpu_user_annotation":
            continue  # the GPU side's copy of a step (HTA gives some of them stream -1)
        name = sym_table[int(ev["name"])]
        m = re.search(r"ProfilerStep#(\d+)", name)
        step: dict[str, Any] = {"instance_id": pos, "name": name,
                                "step": int(m.group(1)) if m else None,
                                "window_us": float(ev["dur"])}
        try:
            res = ta.critical_path_analysis(rank, annotation=annotation, instance_id=pos,
                                            data_load_events=DATA_LOAD_EVENTS)
            if res is None:
                step["error"] = "returned None"
            else:
                graph, ok = res
                if not ok:
                    step["error"] = "critical_path() returned False"
                else:
                    edf = graph.get_critical_path_breakdown()
                    total = float(edf.duration.sum())
                    by = edf.groupby("bound_by").duration.sum()
                    step["path_us"] = total
                    # Where HTA's path spends most: its edges' events, summed by name.
                    top = (edf[edf.duration > 0].groupby(["s_name", "bound_by"]).duration
                           .sum().sort_values(ascending=False).head(3))
                    step["top"] = [{"name": str(n), "bound_by": str(b), "us": float(v)}
                                   for (n, b), v in top.items()]
                    step["shares"] = {str(k): float(v) / total * 100 if total else 0.0
                                      for k, v in by.items()}
        except Exception as exc:  # HTA's failure is the result
            step["error"] = _failure(exc)
        step["log"] = [ln for ln in logged() if ln.startswith("ERROR")][:3]
        out["steps"].append(step)
    if not out["steps"]:
        # No host step: what HTA itself says when asked for the first one.
        try:
            res = ta.critical_path_analysis(rank, annotation=annotation, instance_id=0,
                                            data_load_events=DATA_LOAD_EVENTS)
            why = "returned None" if res is None else f"returned a path: {res[1]}"
        except Exception as exc:  # HTA's failure is the result
            why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        errors = [ln for ln in logged() if ln.startswith("ERROR")][:1]
        out["load_error"] = f"no host ProfilerStep; instance_id=0 {why}" + (
            f" ({errors[0]})" if errors else "")
    out["pandas"] = pd.__version__
    return out


def _failure(exc: Exception) -> str:
    """The exception as it reads; a bare ``assert`` names its line instead."""
    import traceback

    msg = str(exc).splitlines()[0][:300] if str(exc) else ""
    if not msg:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        msg = f"({Path(last.filename).name}:{last.lineno}: {last.line})"
    return f"{type(exc).__name__}: {msg}"


# ---------------------------------------------------------------- our side

def ensure_venv() -> Path:
    """HTA's venv, made once: its python."""
    py = VENV / "bin" / "python"
    marker = VENV / f".installed-{HTA_PIN}"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", HTA_PIN], check=True)
        marker.write_text(HTA_PIN + "\n")
    return py


def run_hta(py: Path, trace: Path, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="critpath-hta-") as tmp:
        os.symlink(trace.resolve(), Path(tmp) / trace.name)
        try:
            proc = subprocess.run([str(py), __file__, "--hta-worker", tmp], capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"load_error": f"no answer in {timeout:.0f} s"}
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return {"load_error": tail[0]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def snapshot(rev: str, into: Path) -> str:
    """Our package as committed at ``rev``, exported into ``into`` and put first on the
    path: the shared work tree changes under a long run. Returns the commit."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", rev], check=True,
                            capture_output=True, text=True).stdout.strip()
    tar = subprocess.run(["git", "-C", str(REPO), "archive", commit, "plugin"], check=True,
                         capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    sys.path.insert(0, str(into / "plugin"))
    return commit


def our_steps(trace: Path) -> dict[int, dict[str, Any]]:
    import tb_diagnostics

    doc = tb_diagnostics.analyze(str(trace), cache=False).document
    out: dict[int, dict[str, Any]] = {}
    for run in doc["runs"]:
        for worker in run["workers"]:
            for span in worker["spans"]:
                for st in span["steps"]:
                    cp = st.get("critical_path")
                    if st["step"] is None or not cp:
                        continue
                    total = cp["total_us"] or 1.0
                    out[int(st["step"])] = {
                        "wall_us": st["wall_us"],
                        "host_us": st["host_end_us"] - st["host_start_us"],
                        "shares": {k: cp["by_kind"][k] / total * 100 for k in CLASSES},
                        "ended_by": cp.get("ended_by"), "by_op": cp.get("by_op", [])}
    return out


def hta_classes(shares: dict[str, float]) -> dict[str, float]:
    return {ours: sum(shares.get(h, 0.0) for h in theirs) for ours, theirs in CLASSES.items()}


def fmt(sh: dict[str, float]) -> str:
    return " ".join(f"{k[:3]} {v:.0f}" for k, v in sh.items() if round(v) != 0) or "0"


def compare(traces: Path, only: list[str], timeout: float,
            out: Path | None = None) -> list[dict[str, Any]]:
    """Every trace file, smallest first; with ``out``, the rows so far are written after
    each file (a long run cut short keeps what it did)."""
    py = ensure_venv()
    rows: list[dict[str, Any]] = []
    files = sorted(traces.glob("*/*.pt.trace.json*"), key=lambda f: f.stat().st_size)
    for trace in files:
        run = trace.parent.name
        if only and run not in only:
            continue
        label = run if len(list(trace.parent.glob("*.pt.trace.json*"))) == 1 \
            else f"{run}/{trace.name.split('.pt.trace')[0]}"
        print(f"... {label}", file=sys.stderr, flush=True)
        hta = run_hta(py, trace, timeout)
        try:
            ours = our_steps(trace)
        except Exception as exc:  # a failure of ours is a result too
            ours, ours_error = {}, f"{type(exc).__name__}: {exc}"
        else:
            ours_error = None
        rows.extend(_rows(label, hta, ours, ours_error))
        if out:
            out.write_text(json.dumps(rows, indent=1))
    return rows


def _rows(label: str, hta: dict[str, Any], ours: dict[int, dict[str, Any]],
          ours_error: str | None) -> list[dict[str, Any]]:
    if "load_error" in hta or not hta.get("steps"):
        why = hta.get("load_error") or next(
            (ln for ln in hta.get("log", []) if ln.startswith("ERROR")),
            "no ProfilerStep annotation")
        return [{"trace": label, "step": None, "hta_error": why, "ours_steps": len(ours),
                 "ours_error": ours_error}]
    rows = []
    for st in hta["steps"]:
        mine = ours.get(st["step"]) if st["step"] is not None else None
        row: dict[str, Any] = {"trace": label, "step": st["step"],
                               "instance_id": st["instance_id"],
                               "window_us": st["window_us"], "ours_error": ours_error}
        if mine:
            row.update(ours=mine["shares"], wall_us=mine["wall_us"],
                       ended_by=mine["ended_by"], ours_top=mine["by_op"])
        if "shares" in st:
            hc = hta_classes(st["shares"])
            row.update(hta=hc, hta_raw=st["shares"], path_us=st["path_us"],
                       hta_top=st.get("top", []))
            if mine:
                diff = {k: hc[k] - mine["shares"][k] for k in CLASSES}
                row.update(diff=diff, max_abs_diff=max(abs(v) for v in diff.values()))
        else:
            row["hta_error"] = st["error"] + (f" ({st['log'][0]})" if st["log"] else "")
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| trace | step | HTA (% of its path) | HTA path / wall | ours (% of wall) "
          "| HTA − ours (pp) | max |Δ| |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        step = "—" if r["step"] is None else str(r["step"])
        ours = fmt(r["ours"]) if "ours" in r else (r.get("ours_error") or "—")
        if "hta_error" in r:
            print(f"| {r['trace']} | {step} | {r['hta_error']} | — | {ours} | — | — |")
            continue
        cover = f"{r['path_us'] / r['wall_us']:.2f}" if r.get("wall_us") else "—"
        diff = " ".join(f"{k[:3]} {v:+.0f}" for k, v in r.get("diff", {}).items()
                        if round(v) != 0) or "0"
        mx = f"{r['max_abs_diff']:.0f}" if "max_abs_diff" in r else "—"
        print(f"| {r['trace']} | {step} | {fmt(r['hta'])} | {cover} | {ours} | {diff} "
              f"| {mx} |")


def print_summary(rows: list[dict[str, Any]]) -> None:
    """One line per trace file: how many steps HTA did, the mean shares of those on both
    sides, and the largest difference of a step."""
    print("| trace | steps: HTA path / asked | HTA mean (% of its path) | HTA path / wall "
          "| ours mean (% of wall) | max |Δ| of a step (pp) |")
    print("|---|---|---|---|---|---|")
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["trace"], []).append(r)
    for trace, rs in by.items():
        ok = [r for r in rs if "hta" in r and "ours" in r]
        asked = sum(1 for r in rs if r["step"] is not None)
        if not ok:
            errs = sorted({re.sub(r"\d+", "N", r.get("hta_error", "")) for r in rs})
            print(f"| {trace} | 0 / {asked} | {'; '.join(errs)} | — | — | — |")
            continue

        def mean(side: str, rs: list[dict[str, Any]] = ok) -> dict[str, float]:
            return {k: sum(r[side][k] for r in rs) / len(rs) for k in CLASSES}

        cover = [r["path_us"] / r["wall_us"] for r in ok]
        fails = sorted({r["hta_error"] for r in rs if "hta_error" in r})
        note = f" (others: {'; '.join(fails)})" if fails else ""
        print(f"| {trace} | {len(ok)} / {asked}{note} | {fmt(mean('hta'))} "
              f"| {min(cover):.2f}–{max(cover):.2f} | {fmt(mean('ours'))} "
              f"| {max(r['max_abs_diff'] for r in ok):.0f} |")


def print_where(rows: list[dict[str, Any]], min_diff: float = 20.0) -> None:
    """Where each path spends most, for the steps whose shares differ by ``min_diff`` pp."""
    far = [r for r in rows if r.get("max_abs_diff", 0.0) >= min_diff]
    if not far:
        return
    print(f"\nWhere the paths spend most (steps differing by {min_diff:.0f} pp or more):\n")
    for r in far:
        hta = "; ".join(f"{t['name']} ({t['bound_by']}) {t['us'] / 1e3:.1f} ms"
                        for t in r.get("hta_top", []))
        ours = "; ".join(f"{t['op']} ({t['kind']}) {t['us'] / 1e3:.1f} ms"
                         for t in r.get("ours_top", []))
        print(f"- {r['trace']} step {r['step']}: HTA: {hta or '?'} | ours: {ours or '?'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, default=REPO.parent / "shared" / "traces")
    ap.add_argument("--only", nargs="*", default=[], help="run names to compare")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per trace file")
    ap.add_argument("--json", type=Path, help="write the rows here too, file by file")
    ap.add_argument("--ours-at", default="HEAD", help="our package as committed at this rev")
    ap.add_argument("--from-json", type=Path, help="print the tables of a saved run")
    ap.add_argument("--hta-worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hta_worker:
        # HTA prints as it goes; the answer is the last line.
        print(json.dumps(_hta_worker(args.hta_worker)))
        return 0
    if args.from_json:
        rows = json.loads(args.from_json.read_text())
        print_table(rows)
        print()
        print_summary(rows)
        print_where(rows)
        return 0
    if not args.traces.is_dir():
        print(f"no traces at {args.traces}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="critpath-ours-") as tmp:
        commit = snapshot(args.ours_at, Path(tmp))
        print(f"ours: {commit[:10]}", file=sys.stderr, flush=True)
        rows = compare(args.traces, args.only, args.timeout, args.json)
    print_table(rows)
    print()
    print_summary(rows)
    print_where(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
