"""Issue 16.9: the URL hash drives an open tab (a link edited or pasted into the address
bar switches the run), and the compare baseline belongs to the run it was picked for.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import unquote

from playwright.sync_api import expect

from .conftest import CPU_RUN, FRAME
from .test_tab import READY, ready

REPO = Path(__file__).resolve().parents[2]
SMALL, LARGE, THIRD = "matmul_add-size64-cpu", "matmul_add-size2048-cpu", "tiny_ops-fused-cpu"


def set_hash(page, state: str) -> None:
    """What a user does in the address bar: only the hash changes, the page stays."""
    page.evaluate("(h) => { location.hash = h; }", f"diagnostics{state}")


def test_editing_the_hash_switches_the_run_and_step(page, open_tab, tensorboard):
    frame = open_tab(run=CPU_RUN, step="2")
    ready(frame)
    run_select = frame.locator('select[aria-label="run"]')
    expect(run_select).to_have_value(CPU_RUN)
    expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text("#2")
    before = page.evaluate("performance.getEntriesByType('navigation').length")

    set_hash(page, "&p.diagnostics.run=hostile")
    expect(run_select).to_have_value("hostile", timeout=READY)
    ready(frame)
    expect(frame.locator("#steps tbody tr")).to_have_count(1)
    assert "p.diagnostics.run=hostile" in unquote(page.evaluate("location.hash"))

    # Back to the first run at another step, and then only the step: no reload either time.
    set_hash(page, f"&p.diagnostics.run={CPU_RUN}&p.diagnostics.step=3")
    expect(run_select).to_have_value(CPU_RUN, timeout=READY)
    ready(frame)
    expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text("#3")
    set_hash(page, f"&p.diagnostics.run={CPU_RUN}&p.diagnostics.step=1")
    expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text("#1",
                                                                                 timeout=READY)
    assert page.evaluate("performance.getEntriesByType('navigation').length") == before
    assert frame.locator("body").evaluate("() => !!document.getElementById('app')")

    # A bare "#diagnostics" (TensorBoard's own tab link) keeps the view and writes it back.
    set_hash(page, "")
    page.wait_for_function("location.hash.includes('p.diagnostics.step=1')")
    expect(run_select).to_have_value(CPU_RUN)


def test_the_baseline_is_dropped_when_the_run_changes(page, start_tensorboard, tmp_path):
    log = tmp_path / "log"
    for run in (SMALL, LARGE, THIRD):
        shutil.copytree(REPO / "log" / run, log / run)
    tb = start_tensorboard(log)
    try:
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={LARGE}")
        frame = page.frame_locator(FRAME)
        ready(frame)
        baseline = frame.locator("#compare select")
        baseline.select_option(SMALL)
        expect(frame.locator("#compare-summary")).to_contain_text("median warm step",
                                                                  timeout=READY)
        page.wait_for_function("location.hash.includes('p.diagnostics.compare=')")

        # Another run picked in the tab: the baseline chosen for LARGE no longer applies.
        frame.locator('select[aria-label="run"]').select_option(THIRD)
        ready(frame)
        expect(baseline).to_have_value("")
        expect(frame.locator("#compare-summary")).to_have_count(0)
        expect(frame.locator("#compare .card-body")).to_be_hidden()
        assert "p.diagnostics.compare=" not in page.evaluate("location.hash")

        # The old baseline picked as the run: it cannot be its own baseline either.
        baseline.select_option(SMALL)
        expect(frame.locator("#compare-summary")).to_contain_text("median warm step",
                                                                  timeout=READY)
        frame.locator('select[aria-label="run"]').select_option(SMALL)
        ready(frame)
        expect(baseline).to_have_value("")
        assert "p.diagnostics.compare=" not in page.evaluate("location.hash")

        # A link naming a baseline that is not in this log dir opens without a comparison.
        page.goto("about:blank")
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={LARGE}"
                  "&p.diagnostics.compare=no-such-run")
        frame = page.frame_locator(FRAME)
        ready(frame)
        expect(frame.locator("#compare select")).to_have_value("")
        expect(frame.locator("#compare-summary")).to_have_count(0)
        assert "no-such-run" not in page.evaluate("location.hash")

        # ...while a shared link with a real baseline keeps it.
        page.goto("about:blank")
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={LARGE}"
                  f"&p.diagnostics.compare={SMALL}")
        frame = page.frame_locator(FRAME)
        expect(frame.locator("#compare-summary")).to_contain_text("median warm step",
                                                                  timeout=READY)
        expect(frame.locator("#compare select")).to_have_value(SMALL)
    finally:
        page.goto("about:blank")
        tb.stop()
