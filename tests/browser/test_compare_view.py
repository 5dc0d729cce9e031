"""The compare view: the selected run against a baseline run picked in the tab, kept in
the URL like every other view state."""

from __future__ import annotations

import shutil
from pathlib import Path

from playwright.sync_api import expect

from .conftest import FRAME

READY = 60_000
REPO = Path(__file__).resolve().parents[2]
SMALL, LARGE = "matmul_add-size64-cpu", "matmul_add-size2048-cpu"


def test_compare_two_runs_and_share_it(page, start_tensorboard, tmp_path, artifacts):
    log = tmp_path / "log"
    for run in (SMALL, LARGE):
        shutil.copytree(REPO / "log" / run, log / run)
    tb = start_tensorboard(log)
    try:
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={LARGE}")
        frame = page.frame_locator(FRAME)
        expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
        frame.locator("#compare select").select_option(SMALL)
        summary = frame.locator("#compare-summary")
        expect(summary).to_contain_text("median warm step", timeout=READY)
        expect(summary).to_contain_text("overhead-bound")
        expect(summary).to_contain_text("compute-bound")
        expect(frame.locator("#compare .compare-steps tbody tr").first).to_be_visible()
        page.wait_for_function("location.hash.includes('p.diagnostics.compare=')")
        page.screenshot(path=str(artifacts / "tab-compare.png"))
        link = page.url
        page.goto("about:blank")
        page.goto(link)  # a teammate opening the link sees the same comparison
        expect(page.frame_locator(FRAME).locator("#compare-summary")).to_contain_text(
            "median warm step", timeout=READY)
    finally:
        page.goto("about:blank")
        tb.stop()
