"""The step chart is scaled to the warm steps (issue 16.4): a cold first step 50× longer no
longer flattens them; it is clipped, with a break mark and its real wall time as a label.
"""

from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from .conftest import CPU_RUN
from .test_tab import ready
from .test_timeline_tooltips import summary_of


def dur(us: float) -> str:
    """format.js dur(), for the labels the chart prints."""
    a = abs(us)
    if a < 1000:
        return f"{us:.{2 if a < 10 else 1}f} µs"
    if a < 1e6:
        return f"{us / 1000:.{2 if a < 1e4 else 1}f} ms"
    return f"{us / 1e6:.2f} s"


def drawn_bars(frame) -> list[dict]:
    chart = frame.locator("#step-chart")
    expect(chart).to_have_attribute("data-bars", re.compile(r"^\[\{"))
    return json.loads(chart.get_attribute("data-bars"))


def pixel(frame, x: float, y: float) -> list[int]:
    """RGBA of the chart's canvas at (x, y) CSS pixels."""
    return frame.locator("#step-chart .uplot canvas").first.evaluate(
        "(cv, [x, y]) => { const r = devicePixelRatio || 1;"
        " return [...cv.getContext('2d').getImageData(Math.round(x * r), Math.round(y * r), 1, 1)"
        ".data]; }", [x, y])


def painted(frame, x: float, y: float) -> bool:
    return pixel(frame, x, y)[3] > 0


def test_a_cold_step_is_clipped_and_the_warm_steps_fill_the_chart(page, open_tab, tensorboard):
    frame = open_tab(run=CPU_RUN)
    ready(frame)
    steps = summary_of(tensorboard, CPU_RUN)["steps"]
    cold = [s for s in steps if "cold" in s["flags"]]
    warm = [s for s in steps if "cold" not in s["flags"]]
    assert cold and warm, "the CPU sample run has a cold first step"
    assert cold[0]["wall_us"] > 10 * max(s["wall_us"] for s in warm)

    bars = drawn_bars(frame)
    assert len(bars) == len(steps)
    by_step = {b["step"]: b for b in bars}
    plot_top = min(b["top"] for b in bars)
    for s in cold:
        b = by_step[s["step"]]
        assert b["clipped"], b
        assert b["label"].startswith(dur(s["wall_us"])) and "cold" in b["label"], b
    y_max_ms = float(frame.locator("#step-chart").get_attribute("data-y-max-ms"))
    assert y_max_ms < cold[0]["wall_us"] / 1000
    assert y_max_ms >= max(s["wall_us"] for s in warm) / 1000
    for s in warm:
        b = by_step[s["step"]]
        assert not b["clipped"], b
        # Each warm bar takes a good part of the chart's height: they are not flattened.
        assert b["bottom"] - b["top"] >= 0.3 * (b["bottom"] - plot_top), (b, plot_top)
        assert painted(frame, b["x"], (b["top"] + b["bottom"]) / 2), b
    # Across the cold bar, 14 px under its cap (stepchart.js breakMark): a cut in the card's
    # colour, with the bar painted below it.
    b = by_step[cold[0]["step"]]
    card = frame.locator("body").evaluate(
        "() => getComputedStyle(document.documentElement).getPropertyValue('--card').trim()")
    rgb = [int(card[i:i + 2], 16) for i in (1, 3, 5)]
    cut, below = pixel(frame, b["x"], b["top"] + 20), pixel(frame, b["x"], b["top"] + 30)
    assert all(abs(c - w) <= 8 for c, w in zip(cut[:3], rgb, strict=True)), (cut, card)
    assert below[3] > 0 and below[:3] != cut[:3], (below, cut)


def test_without_a_cold_step_nothing_is_clipped(page, open_tab, tensorboard):
    frame = open_tab(run="hostile")
    ready(frame)
    bars = drawn_bars(frame)
    assert bars and not any(b["clipped"] for b in bars)
    assert all(b["label"] in ("", "artefact") or "ms" not in b["label"] for b in bars)
