"""Timeline tooltips (issue 16.1): hovering any kind of event the timeline draws shows its
name and facts, never "null" or "undefined" (``showTip`` used to hand ``null`` children
to ``replaceChildren``, which prints them).

Each event is found on the canvas from the step route's own payload: the view is
zoomed on it with the wheel until it is wide enough to aim at, and the tooltip
must name that very event.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from .conftest import SHARED_TRACES
from .test_tab import READY, ready

# Canvas geometry, as in static/app/tldraw.js.
LABEL_W, ROW_H, LANE_GAP = 150, 15, 8
SYNTHETIC = "allkinds"
OWLV2 = "tracelens_h100_owlv2_large_inference"  # ops, driver calls, overhead, Python evidence
ALEXNET = "hta_a100_alexnet_cuda_sync"  # device syncs and memsets
KERNEL = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
          "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)")


def all_kinds_trace() -> dict:
    """Three steps holding one event of every category the timeline draws, with launch flows."""
    ev: list[dict] = []

    def x(cat, name, pid, tid, ts, dur, **args):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
                   "dur": dur, "args": args})

    corr = 0
    for k in range(3):
        t = 1000 + k * 2000
        x("user_annotation", f"ProfilerStep#{k}", 10, 10, t, 1800)
        x("user_annotation", "## forward ##", 10, 10, t + 20, 1500)
        x("cpu_op", "aten::mm", 10, 10, t + 40, 600)
        launches = [("cudaLaunchKernel", "kernel", KERNEL, 300),
                    ("cudaMemcpyAsync", "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 120),
                    ("cudaMemsetAsync", "gpu_memset", "Memset (Device)", 40)]
        for j, (runtime, cat, name, dur) in enumerate(launches):
            corr += 1
            rt, dt = t + 60 + j * 150, t + 260 + j * 350
            x("cuda_runtime", runtime, 10, 10, rt, 30, correlation=corr)
            x(cat, name, 0, 7, dt, dur, device=0, stream=7, correlation=corr)
            ev.append({"ph": "s", "id": corr, "pid": 10, "tid": 10, "ts": rt, "cat": "ac2g",
                       "name": "ac2g"})
            ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": dt, "cat": "ac2g",
                       "name": "ac2g", "bp": "e"})
        x("cuda_driver", "cuLaunchKernel", 10, 10, t + 560, 20)
        x("gpu_user_annotation", f"ProfilerStep#{k}", 0, 7, t + 250, 1500, device=0, stream=7)
        x("cuda_runtime", "cudaDeviceSynchronize", 10, 10, t + 700, 900)
        x("cuda_sync", "Device Synchronize", 0, 7, t + 1300, 300, device=0, stream=7)
        x("overhead", "Buffer Flush", 10, 11, t + 100, 200)
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": ev}


# The page scrolls too (the row must be inside the viewport to get mouse events):
# bring canvas row y to the middle of the scroller that holds the timeline card.
SCROLL_TO_ROW = """(canvas, y) => {
  let p = canvas.closest('.tl').parentElement;
  const scrolls = (el) => el.scrollHeight > el.clientHeight
    && /auto|scroll/.test(getComputedStyle(el).overflowY);
  while (p && !scrolls(p)) p = p.parentElement;
  const sc = p || document.scrollingElement;
  const box = p ? p.getBoundingClientRect() : { top: 0, height: innerHeight };
  sc.scrollTop += canvas.getBoundingClientRect().top + y - (box.top + box.height / 2);
}"""


def view(frame) -> tuple[float, float]:
    t0, t1 = frame.locator(".tl").get_attribute("data-view").split(",")
    return float(t0), float(t1)


def hover_event(page, frame, tl: dict, i: int) -> str:
    """Zoom the canvas on event ``i`` of the payload ``tl``, hover it, return the tooltip text.

    ``data-view`` is rounded to 0.1 µs, so a few x positions across the event are
    tried; the one whose tooltip names the event wins.
    """
    ev = tl["events"]
    canvas, scroll = frame.locator(".tl canvas:not(.tl-axis)"), frame.locator(".tl-scroll")
    canvas.focus()
    canvas.press("0")  # fit the step: every event starts from the same view
    top, y = [], 4
    for lane in tl["lanes"]:
        top.append(y)
        y += max(lane["depth"], 1) * ROW_H + LANE_GAP
    ey = top[ev["lane"][i]] + ev["depth"][i] * ROW_H
    scroll.evaluate("(el, y) => { el.scrollTop = y; }", max(ey - 40, 0))
    # The page scrolls too: the row must be inside the viewport to get mouse events.
    canvas.evaluate(SCROLL_TO_ROW, ey)
    width = scroll.evaluate("(el) => el.clientWidth")
    start, dur = ev["start_us"][i], ev["dur_us"][i]

    def px(t):
        t0, t1 = view(frame)
        return LABEL_W + (t - t0) / (t1 - t0) * (width - LABEL_W - 6)

    def to_page(cx):
        box = canvas.bounding_box()
        return box["x"] + cx, box["y"] + ey + (ROW_H - 2) / 2

    centre = (LABEL_W + width) / 2
    for _ in range(60):
        mid = px(start + dur / 2)
        if abs(mid - centre) > 30:  # drag the event to the middle: zooms keep it where it is
            d = max(min(centre - mid, centre - LABEL_W - 10), LABEL_W + 10 - centre)
            page.mouse.move(*to_page(centre - d / 2))
            page.mouse.down()
            page.mouse.move(*to_page(centre + d / 2), steps=4)
            page.mouse.up()
            continue
        t0, t1 = view(frame)
        if px(start + dur) - px(start) >= 40 or t1 - t0 <= 20:
            break
        page.mouse.move(*to_page(mid))  # the wheel zooms around the pointer
        page.mouse.wheel(0, -600)
        page.wait_for_timeout(20)
    tip = frame.locator(".tl .tl-tip")
    want = tl["names"][ev["name"][i]]
    a, b = px(start), px(start + dur)
    seen = []
    for f in (0.5, 0.3, 0.7, 0.1, 0.9, 0.0, 1.0):
        page.mouse.move(*to_page(a + f * (b - a)))
        if tip.is_visible():
            name = tip.locator(".n").inner_text()
            seen.append(name)
            if name == want:
                return tip.inner_text()
    raise AssertionError(f"event {i} ({ev['kind'][i]} {want[:60]!r}) not hovered at {to_page(a)}"
                         f" (view {view(frame)}, x {a:.0f}–{b:.0f}); saw {seen}")


def check_tooltips(page, frame, tl: dict, kinds: set[str] | None = None) -> set[str]:
    """Hover the longest event of every kind in ``tl``; the kinds checked."""
    ev = tl["events"]
    longest: dict[str, int] = {}
    for i, kind in enumerate(ev["kind"]):
        if kinds is not None and kind not in kinds:
            continue
        if kind not in longest or ev["dur_us"][i] > ev["dur_us"][longest[kind]]:
            longest[kind] = i
    for kind, i in sorted(longest.items()):
        text = hover_event(page, frame, tl, i)
        assert text.strip(), kind
        assert not re.search(r"null|undefined|NaN", text), (kind, text)
        lines = text.splitlines()
        assert lines[0] == tl["names"][ev["name"][i]], (kind, text)
        assert "duration" in text and "into the step" in text, (kind, text)
    return set(longest)


@pytest.fixture
def log(tmp_path) -> Path:
    d = tmp_path / "log"
    (d / SYNTHETIC).mkdir(parents=True)
    (d / SYNTHETIC / "worker0.1.pt.trace.json").write_text(json.dumps(all_kinds_trace()))
    for run in (OWLV2, ALEXNET):
        if (SHARED_TRACES / run).is_dir():
            shutil.copytree(SHARED_TRACES / run, d / run)  # copied: scans skip symlinks
    return d


def route(tb, path: str) -> dict:
    """A route's answer once the span is loaded (it answers "loading" until then)."""
    for _ in range(1200):
        res = tb.json(path)
        if res.get("status") != "loading":
            assert res.get("status") == "ready", res
            return res
        time.sleep(0.1)
    raise AssertionError(f"{path} still loading")


def where(tb, run: str) -> str:
    """``run=…&worker=…&span=…`` of the run's first span."""
    r = next(r for r in tb.json("runs")["runs"] if r["run"] == run)
    w = r["workers"][0]
    return f"run={quote(run)}&worker={quote(w['worker'])}&span={quote(w['spans'][0]['span'])}"


def summary_of(tb, run: str) -> dict:
    return route(tb, f"span?{where(tb, run)}")["summary"]


def step_payload(tb, run: str, step, highlight=()) -> dict:
    q = f"step?{where(tb, run)}&step={step}"
    if highlight:
        q += "&highlight=" + ",".join(map(str, highlight))
    return route(tb, q)["timeline"]


def test_every_kind_of_event_has_a_clean_tooltip(page, start_tensorboard, log):
    tb = start_tensorboard(log)
    try:
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={SYNTHETIC}&p.diagnostics.step=1")
        frame = page.frame_locator('iframe[src*="plugin_entry.html?name=diagnostics"]')
        ready(frame)
        tl = step_payload(tb, SYNTHETIC, 1)
        kinds = check_tooltips(page, frame, tl)
        assert kinds >= {"op", "annotation", "runtime", "driver", "kernel", "memcpy", "memset",
                         "gpu_annotation", "gpu_sync", "overhead"}
    finally:
        page.goto("about:blank")
        tb.stop()


def test_real_gpu_runs_including_python_frames(page, start_tensorboard, log):
    if not (log / OWLV2).is_dir():
        pytest.skip("../shared/traces is not present")
    tb = start_tensorboard(log)
    try:
        page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={OWLV2}")
        frame = page.frame_locator('iframe[src*="plugin_entry.html?name=diagnostics"]')
        ready(frame)
        summary = summary_of(tb, OWLV2)
        step = summary["steps"][0]["step"]
        check_tooltips(page, frame, step_payload(tb, OWLV2, step))

        # Python frames are drawn only as a finding's evidence: open one from the finding.
        f = next(f for f in summary["findings"] if any(e["category"] == "python"
                                                        for e in f["evidence"]))
        e = next(e for e in f["evidence"] if e["category"] == "python")
        heads = frame.locator("button.fhead")
        idx = next(i for i in range(heads.count()) if heads.nth(i).get_attribute("data-key")
                   and f["rule"] in heads.nth(i).inner_text()
                   and f["title"] in heads.nth(i).inner_text())
        heads.nth(idx).click()
        frame.locator(".finding.open .evidence button", has_text=e["name"][:30]).first.click()
        expect(frame.locator(".tl")).to_have_attribute("data-selected-row", str(e["row"]),
                                                       timeout=READY)
        rows = frame.locator(".tl").get_attribute("data-highlight").split(",")
        tl = step_payload(tb, OWLV2, step, rows)
        assert check_tooltips(page, frame, tl, {"python"}) == {"python"}

        if (log / ALEXNET).is_dir():  # device syncs and memsets
            steps = ["all" if x["step"] is None else x["step"]
                     for x in summary_of(tb, ALEXNET)["steps"]]
            tls = {st: step_payload(tb, ALEXNET, st) for st in steps}
            st = max(steps, key=lambda k: len(set(tls[k]["events"]["kind"])))
            page.goto("about:blank")
            page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={ALEXNET}&p.diagnostics.step={st}")
            frame = page.frame_locator('iframe[src*="plugin_entry.html?name=diagnostics"]')
            ready(frame)
            assert {"gpu_sync", "memset"} <= check_tooltips(page, frame, tls[st])
    finally:
        page.goto("about:blank")
        tb.stop()
