"""The timeline card's whole-span mode and "Open in Perfetto", in a real browser, on the
shared V100 ResNet-50 run: switched to by keyboard, zoomed (the server sends the detail
of the visible range), a step selected from the strip by keyboard and by click, a merged
block's tooltip, the download links, both themes. Screenshots land in the artifacts dir.
"""

from __future__ import annotations

import gzip
import json
import math
import urllib.parse

import pytest
from playwright.sync_api import expect

from .conftest import READY, RESNET, SHARED_TRACES, TensorBoard, open_run, shared_runs_logdir
from .test_ops_modules import dark, shot
from .test_timeline_tooltips import SCROLL_TO_ROW

LABEL_W, ROW_H, LANE_GAP = 150, 15, 8  # static/app/tldraw.js


@pytest.fixture(scope="module")
def span_tb(tmp_path_factory, artifacts):
    if not (SHARED_TRACES / RESNET).is_dir():
        pytest.skip("../shared/traces is not present")
    logdir = shared_runs_logdir(tmp_path_factory, "spantl", (RESNET,))
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("spantl-cache"),
                     artifacts / "tensorboard-spantl.log")
    yield tb
    tb.stop()


def view(frame) -> tuple[float, float]:
    t0, t1 = frame.locator(".tl").get_attribute("data-view").split(",")
    return float(t0), float(t1)


def hash_state(page) -> dict:
    frag = urllib.parse.urlparse(page.url).fragment
    return {k.removeprefix("p.diagnostics."): v for k, v in
            urllib.parse.parse_qsl(frag.partition("&")[2])}


def test_whole_span_zoom_steps_and_perfetto(page, span_tb, artifacts):
    # Tall enough that the timeline card fits on screen whole (for its screenshots).
    page.set_viewport_size({"width": 1280, "height": 1500})
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    frame = open_run(page, span_tb, RESNET)
    tl = frame.locator(".tl")
    card = frame.locator("#timeline")
    mode = card.locator("select[aria-label='timeline of']")
    expect(mode).to_have_value("step")
    # Keyboard: the select, one down: "whole span".
    mode.focus()
    page.keyboard.press("ArrowDown")
    expect(tl).to_have_attribute("data-mode", "span")
    expect(tl).to_have_attribute("data-span-state", "ready", timeout=READY)
    assert int(tl.get_attribute("data-span-items")) <= 5000
    state = hash_state(page)
    run, span = state["run"], state["span"]
    worker = state.get("worker") or span_tb.json("runs")["runs"][0]["workers"][0]["worker"]
    full = view(frame)
    strip = frame.locator(".tl-strip")
    expect(strip).to_be_visible()
    expect(frame.locator(".tl-info")).to_contain_text("events in view")
    shot(page, frame, "timeline", artifacts / "timeline-span-light.png")

    # The same request the page made (its width) gives the same payload: a merged block
    # of it, hovered, says how many events it holds.
    width = frame.locator(".tl-scroll").evaluate("(el) => el.clientWidth")
    asked = [u for u in requests if "/timeline?" in u]
    assert len(asked) == 1 and "t0=" not in asked[0]  # the whole span, once
    payload = span_tb.json(asked[0].partition("/diagnostics/")[2])
    assert payload["range"]["start_us"] == pytest.approx(full[0], abs=0.1)
    ev, merged = payload["events"], payload["merged"]
    assert merged["index"], "the whole span of a ResNet run has blocks of merged events"
    tops, y = [], 4
    for lane in payload["lanes"]:
        tops.append(y)
        y += max(lane["depth"], 1) * ROW_H + LANE_GAP
    # Blocks may overlap their neighbours (an event starts in its bin and ends in the
    # next): aim at the middle of the stretch that only one block covers, the widest.
    def alone(j):
        row = [x for x in range(len(ev["row"]))
               if (ev["lane"][x], ev["depth"][x]) == (ev["lane"][j], ev["depth"][j])]
        s, e = ev["start_us"][j], ev["start_us"][j] + ev["dur_us"][j]
        for x in row:
            xs, xe = ev["start_us"][x], ev["start_us"][x] + ev["dur_us"][x]
            if x != j and xs <= s:
                s = max(s, min(xe, e))
            elif x != j:
                e = min(e, max(xs, s))
        return s, e

    spans = {k: alone(i) for k, i in enumerate(merged["index"])}
    k = max(spans, key=lambda k: spans[k][1] - spans[k][0])
    i = merged["index"][k]
    t0, t1 = full

    def px(t):
        return LABEL_W + (t - t0) / (t1 - t0) * (width - LABEL_W - 6)
    cy = tops[ev["lane"][i]] + ev["depth"][i] * ROW_H + 6
    canvas = frame.locator(".tl canvas:not(.tl-axis)")
    frame.locator(".tl-scroll").evaluate("(el, y) => { el.scrollTop = Math.max(y - 60, 0); }",
                                         cy)
    canvas.evaluate(SCROLL_TO_ROW, cy)
    box = canvas.bounding_box()
    # The pointer lands on whole pixels: one inside the stretch, a margin either side.
    lo, hi = box["x"] + px(spans[k][0]), box["x"] + px(spans[k][1])
    assert math.floor(hi - 0.05) >= math.ceil(lo + 0.05), (lo, hi)
    page.mouse.move((math.ceil(lo + 0.05) + math.floor(hi - 0.05)) // 2, box["y"] + cy)
    tip = card.locator(".tl-tip")
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(f"{merged['count'][k]:,} events merged")

    # Keyboard zoom: the view narrows and the page asks the server for that range.
    canvas.focus()
    for _ in range(4):
        page.keyboard.press("+")
    expect(tl).not_to_have_attribute("data-view", f"{full[0]:.1f},{full[1]:.1f}")
    z0, z1 = view(frame)
    assert z1 - z0 < (full[1] - full[0]) * 0.3
    expect(tl).to_have_attribute("data-span-state", "ready", timeout=READY)
    page.wait_for_timeout(400)  # the debounce, then the answer
    expect(tl).to_have_attribute("data-span-state", "ready", timeout=READY)
    zoomed = [u for u in requests if "/timeline?" in u and "t0=" in u]
    assert zoomed, "a zoom asks for the visible range"
    got = urllib.parse.parse_qs(urllib.parse.urlparse(zoomed[-1]).query)
    assert float(got["t1"][0]) - float(got["t0"][0]) < (full[1] - full[0]) * 0.3

    # ] selects the next step in the whole tab (the URL's step follows).
    before = tl.get_attribute("data-selected-step")
    names = urllib.parse.urlencode({"run": run, "worker": worker, "span": span})
    summary = span_tb.json(f"span?{names}")
    numbers = [s["step"] for s in summary["summary"]["steps"]]
    page.keyboard.press("]")
    nxt = numbers[numbers.index(int(before)) + 1] if int(before) != numbers[-1] else None
    if nxt is None:
        page.keyboard.press("[")
        nxt = numbers[numbers.index(int(before)) - 1]
    expect(tl).to_have_attribute("data-selected-step", str(nxt), timeout=READY)
    assert hash_state(page)["step"] == str(nxt)
    shot(page, frame, "timeline", artifacts / "timeline-span-zoomed-light.png")

    # 0 fits the whole span again; a click on the first step's band selects it.
    canvas.focus()
    page.keyboard.press("0")
    expect(tl).to_have_attribute("data-view", f"{full[0]:.1f},{full[1]:.1f}")
    first = payload["steps"][0]
    if first["step"] == nxt:
        first = payload["steps"][-1]
    bx = LABEL_W + ((first["start_us"] + first["end_us"]) / 2 - full[0]) / (full[1] - full[0]) \
        * (width - LABEL_W - 6)
    strip.click(position={"x": bx, "y": 10})
    expect(tl).to_have_attribute("data-selected-step", str(first["step"]), timeout=READY)
    expect(frame.locator("#tree .card-tools")).to_contain_text(str(first["step"]))

    # Open in Perfetto: the step's link downloads exactly that step's Chrome trace.
    link = card.locator(".tl-export a", has_text="step")
    href = link.get_attribute("href")
    assert "chrome_trace" in href and f"step={first['step']}" in href
    r = page.request.get(f"{span_tb.url}/data/plugin/diagnostics/{href.removeprefix('./')}")
    assert r.status == 200 and "attachment" in r.headers["content-disposition"]
    doc = json.loads(gzip.decompress(r.body()))
    assert f"ProfilerStep#{first['step']}" in {e.get("name") for e in doc["traceEvents"]}
    dark(page, frame)
    shot(page, frame, "timeline", artifacts / "timeline-span-dark.png")
    # Back to the step: its own timeline again.
    mode.focus()
    page.keyboard.press("ArrowUp")
    expect(tl).to_have_attribute("data-mode", "step")
    expect(strip).to_be_hidden()
    shot(page, frame, "timeline", artifacts / "timeline-step-dark.png")
    # Nothing was asked of any other host.
    assert all(u.startswith(span_tb.url) or u.startswith(("data:", "blob:")) for u in requests), \
        [u for u in requests if not u.startswith(span_tb.url)]
