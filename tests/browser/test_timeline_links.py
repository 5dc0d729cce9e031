"""Links keep the timeline's mode and the critical-path highlight (issues 26 item 5, 27 item
4): "whole span" and the highlight go into TensorBoard's URL hash (p.diagnostics.timeline,
p.diagnostics.path), so a shared link, or a hash pasted into the open tab, opens the same
view. On the CPU sample run (no ../shared needed); screenshots in both themes.
"""

from __future__ import annotations

from playwright.sync_api import expect

from .conftest import CPU_RUN, FRAME, READY
from .test_ops_modules import dark, shot
from .test_span_timeline import hash_state
from .test_tab import ready

CANVAS = ".tl canvas:not(.tl-axis)"


def _path_drawn(frame) -> None:
    """The highlight is on and draws the step's path: segments placed and in view."""
    tl = frame.locator(".tl")
    expect(tl).to_have_attribute("data-path", "on")
    expect(frame.locator("#timeline button.tl-path")).to_have_attribute("aria-pressed", "true")
    expect(tl).not_to_have_attribute("data-path-visible", "0")
    assert int(tl.get_attribute("data-path-segments")) > 0
    expect(frame.locator(".tl-info .tl-path-info")).to_contain_text("critical path")


def _span_shown(frame) -> None:
    tl = frame.locator(".tl")
    expect(tl).to_have_attribute("data-mode", "span")
    expect(tl).to_have_attribute("data-span-state", "ready", timeout=READY)
    expect(frame.locator("#timeline select.tl-mode")).to_have_value("span")
    expect(frame.locator(".tl-strip")).to_be_visible()
    expect(frame.locator(".tl-info")).to_contain_text("events in view")


def test_a_link_with_the_highlight_opens_it_and_the_toggle_goes_into_the_hash(
        page, open_tab, artifacts):
    page.set_viewport_size({"width": 1280, "height": 1400})
    frame = open_tab(run=CPU_RUN, step="2", path="on")
    ready(frame)
    _path_drawn(frame)
    expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text("#2")
    shot(page, frame, "timeline", artifacts / "link-path-light.png")

    # Off by keyboard: out of the hash; on again: back in.
    frame.locator(CANVAS).focus()
    page.keyboard.press("c")
    expect(frame.locator(".tl")).to_have_attribute("data-path", "off")
    page.wait_for_function("!location.hash.includes('p.diagnostics.path=')")
    page.keyboard.press("c")
    page.wait_for_function("location.hash.includes('p.diagnostics.path=on')")
    # Another step keeps it on, in the tab and in the link.
    frame.locator("#steps tbody tr", has_text="#3").click()
    page.wait_for_function("location.hash.includes('p.diagnostics.step=3')")
    ready(frame)
    _path_drawn(frame)
    assert hash_state(page)["path"] == "on"
    dark(page, frame)
    _path_drawn(frame)
    shot(page, frame, "timeline", artifacts / "link-path-dark.png")


def test_a_link_to_the_whole_span_opens_it_and_a_pasted_hash_switches(page, open_tab,
                                                                       artifacts):
    page.set_viewport_size({"width": 1280, "height": 1400})
    frame = open_tab(run=CPU_RUN, timeline="span")
    ready(frame)
    _span_shown(frame)
    assert hash_state(page)["timeline"] == "span"
    shot(page, frame, "timeline", artifacts / "link-span-light.png")

    # Back to the step by keyboard: out of the hash.
    mode = frame.locator("#timeline select.tl-mode")
    mode.focus()
    page.keyboard.press("ArrowUp")
    expect(frame.locator(".tl")).to_have_attribute("data-mode", "step")
    page.wait_for_function("!location.hash.includes('p.diagnostics.timeline=')")
    expect(frame.locator(".tl-strip")).to_be_hidden()

    # A hash pasted into the open tab (the whole span, the highlight on): the same span,
    # so no reload; the span is shown, and the highlight waits for the step view.
    state = hash_state(page)
    frag = "".join(f"&p.diagnostics.{k}={v}" for k, v in
                   {**state, "timeline": "span", "path": "on"}.items())
    page.evaluate("(h) => { location.hash = h; }", f"diagnostics{frag}")
    _span_shown(frame)
    expect(frame.locator(".tl")).to_have_attribute("data-path", "on")
    expect(frame.locator(".tl")).to_have_attribute("data-path-visible", "0")
    dark(page, frame)
    _span_shown(frame)
    shot(page, frame, "timeline", artifacts / "link-span-dark.png")
    mode.focus()
    page.keyboard.press("ArrowUp")
    expect(frame.locator(".tl")).to_have_attribute("data-mode", "step")
    _path_drawn(frame)
    assert "timeline" not in hash_state(page) and hash_state(page)["path"] == "on"

    # A teammate's fresh page with both: the whole span, and the highlight once on the step.
    other = page.context.new_page()
    try:
        other.goto(page.url.replace("p.diagnostics.path=on", "p.diagnostics.path=on"
                                    "&p.diagnostics.timeline=span"))
        frame2 = other.frame_locator(FRAME)
        ready(frame2)
        _span_shown(frame2)
        frame2.locator("#timeline select.tl-mode").select_option("step")
        _path_drawn(frame2)
    finally:
        other.close()
