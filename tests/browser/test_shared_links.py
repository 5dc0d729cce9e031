"""Links (issue 8): the timeline's zoom and the open finding are in TensorBoard's URL, and a
pasted link opens the same view."""

from __future__ import annotations

import re
from urllib.parse import unquote

from playwright.sync_api import expect

from .conftest import CPU_RUN, FRAME
from .test_tab import ready


def test_zoom_and_finding_survive_a_pasted_link(page, open_tab, tensorboard):
    frame = open_tab(run=CPU_RUN, step="2")
    ready(frame)
    tl = frame.locator(".tl")
    expect(tl).to_have_attribute("data-view", re.compile(r"^[-\d.]+,[-\d.]+$"))
    fitted = tl.get_attribute("data-view")
    frame.locator('button[title="zoom in (+)"]').click()
    page.wait_for_function("location.hash.includes('p.diagnostics.zoom=')")
    zoomed = tl.get_attribute("data-view")
    assert zoomed != fitted
    frame.locator("#findings button.fhead").first.click()
    page.wait_for_function("location.hash.includes('p.diagnostics.finding=')")
    link = page.url
    state = unquote(link.split("#", 1)[1])
    assert f"p.diagnostics.zoom={zoomed}" in state and "p.diagnostics.step=2" in state

    # A teammate opens the link in a fresh page.
    other = page.context.new_page()
    try:
        other.goto(link)
        frame2 = other.frame_locator(FRAME)
        ready(frame2)
        expect(frame2.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text("#2")
        expect(frame2.locator(".tl")).to_have_attribute("data-view", zoomed)
        expect(frame2.locator('#findings button.fhead[aria-expanded="true"]')).to_have_count(1)
    finally:
        other.close()

    # Another step drops the zoom (its clock differs); double-click fits and clears it too.
    frame.locator("#steps tbody tr", has_text="#3").click()
    page.wait_for_function("location.hash.includes('p.diagnostics.step=3')")
    assert "p.diagnostics.zoom=" not in page.evaluate("location.hash")
