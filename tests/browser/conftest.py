"""Browser tests of the Diagnostics tab: TensorBoard on loopback, Debian's Chromium via Playwright.

Skipped (not failed) where Chromium or Playwright is missing. Never
``playwright install``: the system ``chromium`` (``apt-get install chromium``)
is driven through ``executable_path``. Screenshots go to a temporary directory
(``$TMPDIR/tb-diagnostics-test-artifacts``), or to ``$TB_DIAGNOSTICS_TEST_ARTIFACTS`` when
set: tests write nothing into the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_TRACES = (REPO / ".." / "shared" / "traces").resolve()
ARTIFACTS = Path(os.environ.get("TB_DIAGNOSTICS_TEST_ARTIFACTS")
                 or Path(tempfile.gettempdir()) / "tb-diagnostics-test-artifacts")
RESNET = "kineto_resnet50_v100_dataloader_workers0"
CPU_RUN = "matmul_add-size64-cpu"
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]
FRAME = 'iframe[src*="plugin_entry.html?name=diagnostics"]'

CHROMIUM = shutil.which("chromium")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None


def pytest_collection_modifyitems(config, items):
    if CHROMIUM is not None and sync_playwright is not None:
        return
    why = ("Debian's chromium (apt-get install chromium)" if CHROMIUM is None
           else "playwright==1.65.* (pip)")
    skip = pytest.mark.skip(reason=f"browser tests need {why}")
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(skip)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TensorBoard:
    """``tensorboard --logdir DIR`` on 127.0.0.1 and a free port, as a subprocess."""

    def __init__(self, logdir: Path, cache: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "TB_DIAGNOSTICS_CACHE": str(cache)}
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        exe = Path(sys.executable).with_name("tensorboard")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tensorboard.main"]
        self.proc = subprocess.Popen(
            [*cmd, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/data/plugins_listing", timeout=2):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"TensorBoard did not start; see {log}") from None
                time.sleep(0.2)

    def json(self, route: str) -> dict:
        with urllib.request.urlopen(f"{self.url}/data/plugin/diagnostics/{route}",
                                    timeout=60) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


def _cpu_run(dest: Path) -> None:
    """The CPU ``01_matmul_add`` run: the shipped sample in ./log, else made now with torch."""
    shipped = REPO / "log" / CPU_RUN
    if shipped.is_dir() and any(shipped.glob("*.pt.trace.json*")):
        shutil.copytree(shipped, dest / CPU_RUN)
        return
    pytest.importorskip("torch")
    subprocess.run([sys.executable, str(REPO / "workloads" / "01_matmul_add.py"), "--size", "64",
                    "--logdir", str(dest), "--run", CPU_RUN, "--device", "cpu"],
                   check=True, capture_output=True, timeout=300)


def _hostile_and_broken(dest: Path) -> None:
    evil = '<img src=x onerror="alert(1)">'
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": evil, "pid": 1, "tid": 1, "ts": 10, "dur": 500},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20,
         "dur": 400},
    ]
    (dest / "hostile").mkdir()
    (dest / "hostile" / "worker0.1.pt.trace.json").write_text(json.dumps(
        {"schemaVersion": 1, "traceEvents": events}))
    (dest / "broken").mkdir()
    (dest / "broken" / "worker0.1.pt.trace.json").write_text('{"traceEvents": [{"ph": "X"')


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def logdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tb-log")
    if (SHARED_TRACES / RESNET).is_dir():
        shutil.copytree(SHARED_TRACES / RESNET, d / RESNET)  # copied: scans skip symlinks
    _cpu_run(d)
    _hostile_and_broken(d)
    return d


@pytest.fixture(scope="session")
def tensorboard(logdir, tmp_path_factory, artifacts):
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("cache"), artifacts / "tensorboard.log")
    yield tb
    tb.stop()


@pytest.fixture
def start_tensorboard(tmp_path):
    """Start another TensorBoard (the caller stops it)."""
    return lambda logdir: TensorBoard(logdir, tmp_path / "cache", tmp_path / "tensorboard.log")


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        yield b
        b.close()


class Problems(list):
    """Console errors, uncaught exceptions and dialogs seen by a page."""


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    problems = Problems()
    pg.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    pg.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))

    def dialog(d):
        problems.append(f"dialog: {d.message}")
        d.dismiss()

    pg.on("dialog", dialog)
    pg.problems = problems
    yield pg
    context.close()
    assert not problems, problems


@pytest.fixture
def open_tab(page, tensorboard):
    """``open_tab(run=..., step=...)``: TensorBoard on the Diagnostics tab; returns the frame."""

    def go(tb: TensorBoard | None = None, **state: str):
        frag = "".join(f"&p.diagnostics.{k}={v}" for k, v in state.items())
        page.goto(f"{(tb or tensorboard).url}/#diagnostics{frag}")
        return page.frame_locator(FRAME)

    return go


@pytest.fixture
def resnet(logdir) -> str:
    if not (logdir / RESNET).is_dir():
        pytest.skip("../shared/traces is not present")
    return RESNET


# ---- helpers the card tests share ---------------------------------------------------
#: How long a card test waits for a span to load and the tab to be ready (ms).
READY = 60_000


def shared_runs_logdir(tmp_path_factory, label: str, runs: tuple[str, ...]) -> Path:
    """A fresh log dir holding a copy of each of ``runs`` that ../shared/traces has
    (copied: scans skip symlinks)."""
    logdir = tmp_path_factory.mktemp(f"{label}-log")
    for run in runs:
        if (SHARED_TRACES / run).is_dir():
            shutil.copytree(SHARED_TRACES / run, logdir / run)
    return logdir


def open_run(page, tb: TensorBoard, run: str):
    """The tab on ``run``, once it says it is ready; the plugin's frame."""
    from playwright.sync_api import expect

    page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={run}")
    frame = page.frame_locator(FRAME)
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    return frame


def view_document(tb: TensorBoard, run: str, name: str, **params) -> dict:
    """The /view route's ``name`` document for the run's first span (asked again while
    it loads)."""
    import urllib.parse

    deadline = time.monotonic() + READY / 1000
    while True:
        runs = {r["run"]: r for r in tb.json("runs").get("runs") or []}
        if run in runs:
            w = runs[run]["workers"][0]
            q = urllib.parse.urlencode({"name": name, "run": run, "worker": w["worker"],
                                        "span": w["spans"][0]["span"], **params})
            res = tb.json(f"view?{q}")
            if res.get("status") == "ready":
                return res
        assert time.monotonic() < deadline, f"{run} did not load"
        time.sleep(0.3)
