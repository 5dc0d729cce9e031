"""The critical path in the tab (issue 27 item 4), in a real browser, on the shared V100
ResNet-50 run (DataLoader in the main process: host, input, device and latency on the
path): the steps table's bar of each step's path by kind adds up to its wall; by keyboard,
the timeline's highlight outlines exactly the step route's segments wide enough to
outline, a segment's event says so in its tooltip, the toggle switches back; the dispatch
chain marks nodes the path runs through. Both themes; screenshots in the artifacts dir.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import READY, RESNET, SHARED_TRACES, TensorBoard, open_run, shared_runs_logdir
from .test_ops_modules import dark, shot
from .test_span_timeline import hash_state
from .test_timeline_tooltips import SCROLL_TO_ROW, route, summary_of, where

LABEL_W, ROW_H, LANE_GAP = 150, 15, 8  # static/app/tldraw.js
OUTLINE_MIN_PX = 4  # static/app/tlpath.js
KINDS = ("host", "input", "device", "comm", "latency")


#: H100 inference with Python frames (with_stack): path segments named after frames the
#: timeline never draws are placed on their lane.
TIMESFORMER = "tracelens_h100_timesformer_inference"


@pytest.fixture(scope="module")
def cp_tb(tmp_path_factory, artifacts):
    if not (SHARED_TRACES / RESNET).is_dir():
        pytest.skip("../shared/traces is not present")
    logdir = shared_runs_logdir(tmp_path_factory, "critpath", (RESNET, TIMESFORMER))
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("critpath-cache"),
                     artifacts / "tensorboard-critpath.log")
    yield tb
    tb.stop()


def check_step_bars(frame, steps: list[dict]) -> None:
    """Every step's bar: its parts are the step's by_kind, they add up to its wall (the
    path's length is the wall within 1 %), and their drawn widths fill the bar."""
    bars = frame.locator("#steps tbody tr .cp-bar")
    expect(bars).to_have_count(len(steps))
    present = [k for k in KINDS if any(s["critical_path"]["by_kind"][k] > 0 for s in steps)]
    legend = frame.locator("#steps caption .cp-legend [data-kind]")
    expect(legend).to_have_count(len(present))
    assert legend.evaluate_all("(els) => els.map((e) => e.dataset.kind)") == present
    drawn = bars.evaluate_all("""(bars) => bars.map((b) => ({
        wall: +b.dataset.wall, total: +b.dataset.total, width: b.clientWidth, title: b.title,
        parts: [...b.children].map((p) => [p.dataset.kind, +p.dataset.us,
                                           p.getBoundingClientRect().width]) }))""")
    by_wall = sorted(steps, key=lambda s: s["wall_us"])
    for bar in drawn:
        s = min(by_wall, key=lambda x: abs(x["wall_us"] - bar["wall"]))
        cp = s["critical_path"]
        assert [k for k, _, _ in bar["parts"]] == list(KINDS)
        assert {k: us for k, us, _ in bar["parts"]} == pytest.approx(cp["by_kind"], abs=1e-3)
        assert sum(us for _, us, _ in bar["parts"]) == pytest.approx(bar["wall"], rel=0.01)
        assert sum(w for _, _, w in bar["parts"]) == pytest.approx(bar["width"], rel=0.01, abs=1)
        assert "critical path" in bar["title"] and "ended by the" in bar["title"]


def expected_outlined(cp: dict, view: tuple[float, float], width: float,
                      margin: float) -> tuple[set, set]:
    """The segments surely outlined (wider than the threshold by ``margin`` px) and those
    that may be, for the view [t0, t1] on a canvas ``width`` wide."""
    t0, t1 = view
    scale = (width - LABEL_W - 6) / (t1 - t0)
    sure, maybe = set(), set()
    for g in cp["segments"]:
        x0 = LABEL_W + (g["start_us"] - t0) * scale
        x1 = x0 + g["dur_us"] * scale
        if x1 < LABEL_W or x0 > width:
            continue
        w = x1 - x0
        key = (g["row"], g["start_us"])
        if w >= OUTLINE_MIN_PX - margin:
            maybe.add(key)
        if w >= OUTLINE_MIN_PX + margin:
            sure.add(key)
    return sure, maybe


def check_outlined(frame, cp: dict) -> tuple[float, float, float]:
    """What the timeline outlines now is exactly the path's segments at least
    OUTLINE_MIN_PX wide in the view (each with its name and kind from the JSON)."""
    tl = frame.locator(".tl")
    t0, t1 = (float(x) for x in tl.get_attribute("data-view").split(","))
    width = frame.locator(".tl-scroll").evaluate("(el) => el.clientWidth")
    outlined = tl.evaluate("(el) => el.tbdPathOutlined")
    assert int(tl.get_attribute("data-path-outlined")) == len(outlined) > 0
    by_key = {(g["row"], g["start_us"]): g for g in cp["segments"]}
    got = {(o["row"], o["start_us"]) for o in outlined}
    assert got <= set(by_key), "outlined something that is not a segment of the step's path"
    for o in outlined:
        g = by_key[(o["row"], o["start_us"])]
        assert (o["name"], o["kind"]) == (g["name"], g["kind"])
    sure, maybe = expected_outlined(cp, (t0, t1), width, margin=0.5)
    assert sure <= got <= maybe
    return t0, t1, width


def check_highlight(page, frame, tb, run: str, step: str) -> dict:
    detail = route(tb, f"step?{where(tb, run)}&step={step}")
    cp, tl_json = detail["critical_path"], detail["timeline"]
    assert cp["whole_path"] and cp["segments_omitted"] == 0
    tl = frame.locator(".tl")
    canvas = frame.locator(".tl canvas:not(.tl-axis)")
    expect(tl).to_have_attribute("data-path", "off")
    canvas.focus()
    page.keyboard.press("c")
    expect(tl).to_have_attribute("data-path", "on")
    expect(frame.locator("#timeline button.tl-path")).to_have_attribute("aria-pressed", "true")
    # Every segment of the step's path is placed on the timeline (its own event's row, or
    # its lane where the timeline left the event out).
    expect(tl).to_have_attribute("data-path-segments", str(cp["segments_total"]))
    expect(frame.locator(".tl-info .tl-path-info")).to_contain_text(
        f"{cp['segments_total']:,} segments")
    t0, t1, width = check_outlined(frame, cp)

    # The longest segment whose event the timeline draws: its tooltip says it is on the path.
    ev = tl_json["events"]
    index = {r: i for i, r in enumerate(ev["row"])}
    longest = max((g for g in cp["segments"] if g["row"] in index), key=lambda g: g["dur_us"])
    i = index[longest["row"]]
    tops, y = [], 4
    for lane in tl_json["lanes"]:
        tops.append(y)
        y += max(lane["depth"], 1) * ROW_H + LANE_GAP
    cy = tops[ev["lane"][i]] + ev["depth"][i] * ROW_H + 6
    canvas.evaluate(SCROLL_TO_ROW, cy)
    mid = longest["start_us"] + longest["dur_us"] / 2
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + LABEL_W + (mid - t0) / (t1 - t0) * (width - LABEL_W - 6),
                    box["y"] + cy)
    tip = frame.locator("#timeline .tl-tip")
    expect(tip).to_contain_text("on the critical path")
    expect(tip).to_contain_text(longest["kind"])
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    return cp


def check_tree(frame, cp: dict) -> None:
    """Nodes marked as on the path are named after the path's segments or their ops."""
    names = {g["name"] for g in cp["segments"]} | {g["op"] for g in cp["segments"] if g["op"]}
    badges = frame.locator("#tree .node:has(.badge.path)")
    expect(badges.first).to_be_visible()
    titles = badges.evaluate_all("(els) => els.map((e) => e.title.split('\\n')[0])")
    assert titles and set(titles) <= names
    # The heaviest chain is open: the op the path spends most device time in shows.
    first = frame.locator("#tree .badge.path").first
    assert "on the critical path" in first.get_attribute("title")


def test_critical_path_in_steps_table_timeline_and_tree(page, cp_tb, artifacts):
    page.set_viewport_size({"width": 1400, "height": 1600})
    frame = open_run(page, cp_tb, RESNET)
    summary = summary_of(cp_tb, RESNET)
    steps = [s for s in summary["steps"] if s.get("critical_path")]
    assert steps and len(steps) == len(summary["steps"])
    check_step_bars(frame, steps)
    step = hash_state(page)["step"]
    cp = check_highlight(page, frame, cp_tb, RESNET, step)
    check_tree(frame, cp)
    shot(page, frame, "timeline", artifacts / "critpath-timeline-light.png")
    # Zoomed in by keyboard: more, shorter segments outlined, still exactly the path's.
    tl = frame.locator(".tl")
    before = tl.get_attribute("data-view")
    frame.locator(".tl canvas:not(.tl-axis)").focus()
    for _ in range(8):
        page.keyboard.press("w")
    expect(tl).not_to_have_attribute("data-view", before)
    check_outlined(frame, cp)
    shot(page, frame, "timeline", artifacts / "critpath-timeline-zoom-light.png")
    shot(page, frame, "steps", artifacts / "critpath-steps-light.png")
    shot(page, frame, "tree", artifacts / "critpath-tree-light.png")

    # Off by keyboard, on by the button.
    tl = frame.locator(".tl")
    frame.locator(".tl canvas:not(.tl-axis)").focus()
    page.keyboard.press("c")
    expect(tl).to_have_attribute("data-path", "off")
    expect(tl).to_have_attribute("data-path-outlined", "0")
    button = frame.locator("#timeline button.tl-path")
    button.focus()
    page.keyboard.press("Enter")
    expect(tl).to_have_attribute("data-path", "on")
    page.keyboard.press("Enter")
    expect(tl).to_have_attribute("data-path", "off")

    # Dark theme: the same, drawn in the dark palette.
    dark(page, frame)
    check_step_bars(frame, steps)
    # Another step by keyboard in the table: the path follows the step.
    rows = frame.locator("#steps tbody tr")
    rows.first.focus()
    page.keyboard.press("End")
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    last = hash_state(page)["step"]
    assert last != step or len(steps) == 1
    expect(frame.locator("#tree .card-tools")).to_have_text(f"step #{last}")
    cp2 = check_highlight(page, frame, cp_tb, RESNET, last)
    check_tree(frame, cp2)
    shot(page, frame, "timeline", artifacts / "critpath-timeline-dark.png")
    shot(page, frame, "steps", artifacts / "critpath-steps-dark.png")
    shot(page, frame, "tree", artifacts / "critpath-tree-dark.png")

    # The whole span has no one step's path: none drawn there, back with the step view.
    mode = frame.locator("#timeline select[aria-label='timeline of']")
    mode.select_option("span")
    expect(tl).to_have_attribute("data-span-state", "ready", timeout=READY)
    expect(tl).to_have_attribute("data-path-outlined", "0")
    expect(frame.locator(".tl-info .tl-path-info")).to_have_count(0)
    mode.select_option("step")
    expect(tl).not_to_have_attribute("data-path-outlined", "0")
    check_outlined(frame, cp2)


def test_critical_path_of_an_h100_step_with_python_frames(page, cp_tb, artifacts):
    if not (SHARED_TRACES / TIMESFORMER).is_dir():
        pytest.skip(f"{TIMESFORMER} is not in ../shared/traces")
    page.set_viewport_size({"width": 1400, "height": 1600})
    frame = open_run(page, cp_tb, TIMESFORMER)
    summary = summary_of(cp_tb, TIMESFORMER)
    check_step_bars(frame, summary["steps"])
    step = hash_state(page)["step"]
    cp = check_highlight(page, frame, cp_tb, TIMESFORMER, step)
    # Some segments are Python frames' time: drawn on their lane, and said so.
    tl = frame.locator(".tl")
    assert int(tl.get_attribute("data-path-cut")) > 0
    expect(frame.locator(".tl-info .tl-path-info")).to_contain_text("left out their event")
    check_tree(frame, cp)
    shot(page, frame, "timeline", artifacts / "critpath-timesformer-light.png")
    dark(page, frame)
    check_outlined(frame, cp)
    shot(page, frame, "timeline", artifacts / "critpath-timesformer-dark.png")
