"""One measurement in a fresh process, so peak RSS belongs to that measurement alone.

    python bench/measure.py ours|phases|baseline|orjson|json|tbprofiler FILE [CACHE_DIR]

Prints one JSON line: {"seconds": float, "peak_rss_mb": float, ...}.
"""

from __future__ import annotations

import gzip
import json
import resource
import sys
import time
from pathlib import Path


def _bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _import_ours() -> None:
    # Module imports are outside the timed region, as they are for the peer: the rule
    # modules are imported on first use, so import them here.
    import tb_diagnostics.engine  # noqa: F401
    from tb_diagnostics.report.document import span_document  # noqa: F401
    from tb_diagnostics.rules import all_rules
    from tb_diagnostics.rules_run import all_run_rules

    all_rules()
    all_run_rules()


def baseline(path: Path) -> dict:
    """The interpreter with the engine imported, before any file is read: the fixed part
    of every peak RSS figure of ``ours``."""
    _import_ours()
    return {"seconds": 0.0}


def ours(path: Path, cache_dir: str | None) -> dict:
    """The tab's path: scan the run, then the span summary (parse, model, steps, findings)."""
    from tb_diagnostics.cache import TraceCache
    from tb_diagnostics.engine import span_summary
    from tb_diagnostics.logdir import scan_logdir

    _import_ours()
    t0 = time.perf_counter()
    ld = scan_logdir(str(path.parent))
    (f,) = [f for f in ld.files if f.relpath.endswith(path.name)]
    doc = span_summary(f, cache=TraceCache(cache_dir) if cache_dir else None)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "steps": len(doc["steps"]), "findings": len(doc["findings"]),
            "errors": doc["errors"]}


def phases(path: Path) -> dict:
    """``ours`` without the cache, in parts: the model (read, decode, build), the ancestry
    views every table rule reads, then the rest of the span summary."""
    from tb_diagnostics.analysis.span import SpanAnalysis
    from tb_diagnostics.analysis.views import hierarchy
    from tb_diagnostics.engine import open_model, span_summary
    from tb_diagnostics.logdir import scan_logdir

    _import_ours()
    t0 = time.perf_counter()
    (f,) = [f for f in scan_logdir(str(path.parent)).files if f.relpath.endswith(path.name)]
    model = open_model(f)
    t1 = time.perf_counter()
    analysis = SpanAnalysis(model)
    hierarchy.innermost_op(analysis)
    hierarchy.outermost_op(analysis)
    t2 = time.perf_counter()
    doc = span_summary(f, analysis=analysis)
    t3 = time.perf_counter()
    return {"seconds": t3 - t0, "model": t1 - t0, "views": t2 - t1, "summary": t3 - t2,
            "rows": len(model), "steps": len(doc["steps"])}


def orjson_floor(path: Path) -> dict:
    import orjson

    data = _bytes(path)
    t0 = time.perf_counter()
    orjson.loads(data)
    return {"seconds": time.perf_counter() - t0}


def json_floor(path: Path) -> dict:
    data = _bytes(path)
    t0 = time.perf_counter()
    json.loads(data)
    return {"seconds": time.perf_counter() - t0}


def tbprofiler(path: Path) -> dict:
    """torch-tb-profiler 0.4.3's per-file work: parse, then build the run profile (its views)."""
    import tempfile

    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        data = RunProfileData.parse("worker0", None, str(path), tmp)
        RunGenerator("worker0", None, data).generate_run_profile()
    return {"seconds": time.perf_counter() - t0}


def peak_rss_mb() -> float:
    """This process's peak resident memory.

    VmHWM belongs to the address space exec created, whereas ``ru_maxrss`` keeps
    the high-water mark of the forked parent across exec on Linux: a large parent
    would inflate every child's figure.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    what, path = sys.argv[1], Path(sys.argv[2])
    cache_dir = sys.argv[3] if len(sys.argv) > 3 else None
    fn = {"ours": lambda: ours(path, cache_dir), "phases": lambda: phases(path),
          "baseline": lambda: baseline(path),
          "orjson": lambda: orjson_floor(path),
          "json": lambda: json_floor(path), "tbprofiler": lambda: tbprofiler(path)}[what]
    out = fn()
    out["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
