"""The ranks × steps heat map of a distributed run: shown, with the run's findings; a
click opens that rank's step."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import FRAME

READY = 60_000
RUN = "distributed-ws2-straggler1-cpu"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def straggler_tab(page, start_tensorboard, tmp_path):
    """The tab on the shipped straggler run (its own TensorBoard); yields the tab's frame."""
    log = tmp_path / "log"
    shutil.copytree(REPO / "log" / RUN, log / RUN)
    tb = start_tensorboard(log)
    try:
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={RUN}")
        frame = page.frame_locator(FRAME)
        expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
        yield frame
    finally:
        page.goto("about:blank")  # stop the tab's polling before its server goes
        tb.stop()


def test_heatmap_renders_and_opens_a_rank_step(page, straggler_tab, artifacts):
    frame = straggler_tab
    ranks = frame.locator("#ranks")
    expect(ranks).to_be_visible(timeout=READY)
    expect(ranks.locator(".run-finding").first).to_contain_text("distributed-straggler")
    expect(ranks).to_contain_text("Rank 1")
    canvas = ranks.locator("canvas")
    box = canvas.bounding_box()
    assert box and box["width"] > 78 and box["height"] > 18 + 2 * 20
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / "tab-ranks-heatmap.png"))
    # Row 2 (rank 1), column 3 (step 2): the worker and step follow.
    canvas.click(position={"x": 78 + 2 * 36 + 10, "y": 18 + 1 * 22 + 10})
    page.wait_for_function("location.hash.includes('p.diagnostics.worker=rank1')")
    page.wait_for_function("location.hash.includes('p.diagnostics.step=2')")
    expect(frame.locator("#headline")).to_be_visible(timeout=READY)
    # The keyboard does the same: focus, move to rank 1 / step 3, Enter.
    canvas.focus()
    for key in ("ArrowDown", "ArrowRight", "ArrowRight", "ArrowRight", "Enter"):
        canvas.press(key)
    page.wait_for_function("location.hash.includes('p.diagnostics.step=3')")


SHARED_RUN = "hta_sampled_2ranks_of128"


def test_heatmap_of_the_shared_two_ranks(page, start_tensorboard, tmp_path, artifacts):
    shared = REPO.parent / "shared" / "traces" / SHARED_RUN
    if not shared.is_dir():
        pytest.skip("../shared/traces is not present")
    log = tmp_path / "log"
    shutil.copytree(shared, log / SHARED_RUN)
    tb = start_tensorboard(log)
    try:
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={SHARED_RUN}")
        frame = page.frame_locator(FRAME)
        expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
        ranks = frame.locator("#ranks")
        expect(ranks).to_be_visible(timeout=READY)
        box = ranks.locator("canvas").bounding_box()  # one row per rank, one column per step
        assert box and box["height"] > 18 + 2 * 20
        page.wait_for_timeout(300)
        page.screenshot(path=str(artifacts / "tab-ranks-heatmap-shared.png"))
    finally:
        page.goto("about:blank")
        tb.stop()


def test_run_findings_link_to_the_rank_steps_that_show_them(page, straggler_tab):
    frame = straggler_tab
    straggler = frame.locator(".run-finding", has_text="distributed-straggler")
    late = straggler.locator(".run-cell").first
    expect(late).to_contain_text("rank 1 · step 3")
    expect(late).to_contain_text("late by")
    # The keyboard reaches it too: a real button.
    late.focus()
    late.press("Enter")
    page.wait_for_function("location.hash.includes('p.diagnostics.worker=rank1')")
    page.wait_for_function("location.hash.includes('p.diagnostics.step=3')")
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    # The rank that was on time, same step, for comparison.
    straggler.locator(".run-cell").nth(1).click()
    page.wait_for_function("location.hash.includes('p.diagnostics.worker=rank0')")
