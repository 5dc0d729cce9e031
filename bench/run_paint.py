"""The tab's first paint after the span is ready, in headless Chromium.

    python bench/run_paint.py [--sizes 50 200] [--repeat 3] [--out bench/out]

For each benchmark trace (made by ``run_bench.py``), starts TensorBoard (its own
plugins and ours, no other dynamic plugin) on a log dir that holds only that trace
(hard-linked, not copied, where the file system allows),
asks the plugin for the span until it is analysed (the "ready" of run_bench.py, here
through the HTTP route), then opens the Diagnostics tab in Debian's Chromium via
Playwright and reads the tab's own performance marks:

- ``summary``: from the tab's frame starting to load until the headline, step chart,
  step table and findings are on screen;
- ``step``: until the first step's dispatch tree and timeline are on screen too
  (fetched on demand, after the summary);
- ``page``: from navigation until the step is on screen, TensorBoard's own shell included.

Also prints how large the span route's answer is: the summary, not per-step detail.
Needs ``chromium`` (``apt-get install chromium``) and ``playwright`` (pip).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FRAME = 'iframe[src*="plugin_entry.html?name=diagnostics"]'
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


#: TensorBoard with its own plugins and ours only: another dynamic plugin on this machine
#: (torch-tb-profiler, installed for run_bench.py) would parse the same trace in the
#: background, in processes that outlive a killed server.
_TENSORBOARD = (
    "from absl import app\n"
    "from tensorboard import default, main_lib, program\n"
    "from tb_diagnostics.tb_plugin import DiagnosticsPlugin\n"
    "main_lib.global_init()\n"
    "tb = program.TensorBoard(plugins=default.get_static_plugins() + [DiagnosticsPlugin])\n"
    "app.run(tb.main, flags_parser=tb.configure)\n"
)


def _start_tensorboard(logdir: Path, cache: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", _TENSORBOARD, "--logdir", str(logdir),
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log.open("w"),
                            stderr=subprocess.STDOUT,
                            env={**os.environ, "TB_DIAGNOSTICS_CACHE": str(cache)})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if _get(f"{url}/data/plugins_listing")[0] == 200:
                return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"TensorBoard did not start; see {log}")
        time.sleep(0.2)


def measure_file(trace: Path, repeat: int, browser) -> dict:
    run = trace.parent.name
    worker, span = trace.name.split(".")[:2]
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        _link_or_copy(trace, tmp_path / "log" / run / trace.name)
        proc, url = _start_tensorboard(tmp_path / "log", tmp_path / "cache",
                                       tmp_path / "tensorboard.log")
        try:
            route = f"{url}/data/plugin/diagnostics/span?run={run}&worker={worker}&span={span}"
            t0 = time.perf_counter()
            while True:
                status, body = _get(route)
                if status != 202:
                    break
                time.sleep(0.05)
            ready_s = time.perf_counter() - t0
            if status != 200:
                raise SystemExit(f"{route}: HTTP {status}: {body[:200]!r}")
            runs = []
            for _ in range(repeat):
                runs.append(_paint(browser, f"{url}/#diagnostics&p.diagnostics.run={run}"))
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    best = {k: min(r[k] for r in runs) for k in runs[0]}
    return {"file": str(trace.relative_to(REPO)), "mb_json": trace.stat().st_size / 1e6,
            "server_ready_s": ready_s, "span_route_kb": len(body) / 1e3, **best}


def _paint(browser, url: str) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        t0 = time.perf_counter()
        page.goto(url)
        frame = page.wait_for_selector(FRAME, timeout=60_000).content_frame()
        frame.wait_for_function(
            "performance.getEntriesByName('tbd-step-painted').length > 0", timeout=120_000)
        page_s = time.perf_counter() - t0
        # Mark times are ms since the frame's own navigation started.
        marks = frame.evaluate(
            "Object.fromEntries(['tbd-summary-painted', 'tbd-step-painted'].map("
            "(n) => [n, performance.getEntriesByName(n)[0].startTime]))")
        return {"summary_s": marks["tbd-summary-painted"] / 1000,
                "step_s": marks["tbd-step-painted"] / 1000, "page_s": page_s}
    finally:
        context.close()


def chromium_path() -> str | None:
    """Debian's chromium, when it and playwright are both installed."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return None
    return shutil.which("chromium")


def measure_paint(traces: list[Path], repeat: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROME_ARGS)
        try:
            for t in traces:
                print(f"painting {t.relative_to(REPO)}…", file=sys.stderr)
                rows.append(measure_file(t, repeat, browser))
        finally:
            browser.close()
    return rows


def paint_table(rows: list[dict]) -> str:
    head = ("file", "JSON MB", "server ready s", "span route kB", "summary painted s",
            "step painted s", "whole page s")
    lines = [head] + [(Path(r["file"]).parent.name, f"{r['mb_json']:.0f}",
                       f"{r['server_ready_s']:.2f}", f"{r['span_route_kb']:.1f}",
                       f"{r['summary_s']:.2f}", f"{r['step_s']:.2f}", f"{r['page_s']:.2f}")
                      for r in rows]
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(x, widths, strict=True))
                     for x in lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[50, 200], metavar="MB")
    p.add_argument("--repeat", type=int, default=3, help="best of N page loads")
    p.add_argument("--out", type=Path, default=HERE / "out")
    args = p.parse_args(argv)
    if chromium_path() is None:
        raise SystemExit("needs Debian's chromium (apt-get install chromium) and playwright")
    sys.path.insert(0, str(HERE))
    from run_bench import ensure_traces

    rows = measure_paint([t for t in ensure_traces(args.sizes) if t.suffix == ".json"],
                         args.repeat)
    print(paint_table(rows))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "paint.json").write_text(json.dumps(
        {"when": time.strftime("%Y-%m-%d %H:%M:%S"),
         "machine": f"{os.uname().machine}, {os.cpu_count()} cores", "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
