"""A span of thousands of steps: the tab gets a bounded subset and still opens any step in
it by number (issue 15: huge spans are summarised)."""

from __future__ import annotations

from playwright.sync_api import expect

from conftest import TraceBuilder

from .conftest import FRAME
from .test_tab import READY, ready

STEPS = 3000


def test_a_span_of_thousands_of_steps_opens_with_a_subset(page, start_tensorboard, tmp_path,
                                                          artifacts):
    t = TraceBuilder([{"id": 0, "name": "Test GPU"}])
    for n in range(STEPS):
        t.step(n, n * 100, 100)
        t.launch(n * 100 + 5, 5, "k", n * 100 + 20, 50)
    t.write(tmp_path / "log" / "many" / "w.1.pt.trace.json")
    tb = start_tensorboard(tmp_path / "log")
    try:
        # The last step is among those shown (the last 100 always are): open it by link.
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run=many"
                  f"&p.diagnostics.step={STEPS - 1}")
        frame = page.frame_locator(FRAME)
        ready(frame)
        expect(frame.locator(".device")).to_contain_text(f"2,000 of {STEPS:,} steps")
        expect(frame.locator("#steps tbody tr")).to_have_count(2000)
        expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text(
            f"#{STEPS - 1}")
        expect(frame.locator("#tree")).to_contain_text(f"ProfilerStep#{STEPS - 1}",
                                                       timeout=READY)
        expect(frame.locator("#headline")).to_contain_text("the tab shows 2,000")
        expect(frame.locator(".finding .fsub").first).to_contain_text(
            f"{STEPS:,} steps, #0–#{STEPS - 1}")
        page.wait_for_timeout(300)
        page.screenshot(path=str(artifacts / "tab-many-steps.png"))
    finally:
        page.goto("about:blank")
        tb.stop()
