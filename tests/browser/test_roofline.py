"""The roofline card and the FLOP-utilisation column, in a real browser.

Runs against its own TensorBoard on a log dir with the H100 OWLv2 inference run
(and, where ../shared has them, the H100 Qwen run, the V100 ResNet-50 run and
the MI250 run, whose GPU has no peak figures), plus the CPU matmul run. Skipped
when ../shared/traces is absent. Screenshots land in the test artifacts directory only (tests
write nothing into the repository); docs/img/roofline-owlv2-h100.png, which the README
links, is a copy of roofline-owlv2-light.png made by hand.
"""

from __future__ import annotations

import re
import shutil
import time

import pytest
from playwright.sync_api import expect

from .conftest import CPU_RUN, READY, RESNET, SHARED_TRACES, TensorBoard, _cpu_run, open_run

OWL = "tracelens_h100_owlv2_large_inference"
QWEN = "tracelens_h100_qwen1.5_0.5b_inference"
MI250 = "hta_amd_mi250_rocm_tiny"
#: A plain "NVIDIA H100" (cc 9.0, 132 SMs): no row by name, identified by its properties.
PAIR = SHARED_TRACES.parent / "pairs" / "h100_toyblocks_eager_vs_compile" / "before"
PAIR_RUN = "pair-h100-eager"


@pytest.fixture(scope="module")
def roof_tb(tmp_path_factory, artifacts):
    if not (SHARED_TRACES / OWL).is_dir():
        pytest.skip("../shared/traces is not present")
    logdir = tmp_path_factory.mktemp("roofline-log")
    for run in (OWL, QWEN, RESNET, MI250):
        if (SHARED_TRACES / run).is_dir():
            shutil.copytree(SHARED_TRACES / run, logdir / run)  # copied: scans skip symlinks
    if PAIR.is_dir():
        shutil.copytree(PAIR, logdir / PAIR_RUN)
    _cpu_run(logdir)
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("roofline-cache"),
                     artifacts / "tensorboard-roofline.log")
    yield tb
    tb.stop()


def summary(tb: TensorBoard, run: str) -> dict:
    """The span route's summary of the run's first span (asked again while it loads)."""
    deadline = time.monotonic() + READY / 1000
    while True:
        listing = tb.json("runs")
        runs = {r["run"]: r for r in listing.get("runs") or []}
        if run in runs:
            w = runs[run]["workers"][0]
            res = tb.json(f"span?run={run}&worker={w['worker']}&span={w['spans'][0]['span']}")
            if "summary" in res:
                return res["summary"]
        assert time.monotonic() < deadline, f"{run} did not load"
        time.sleep(0.3)


def plottable(ops: list[dict]) -> list[dict]:
    """The chart's points in its keyboard order: heaviest device time first."""
    ok = [o for o in ops if (o["intensity"] or 0) > 0 and (o["achieved_tflops"] or 0) > 0
          and (o["device_us"] or 0) > 0]
    return sorted(ok, key=lambda o: -o["device_us"])


def card_shot(page, frame, path) -> None:
    card = frame.locator("#roofline")
    card.scroll_into_view_if_needed()
    page.wait_for_timeout(300)  # let the canvas settle
    card.screenshot(path=str(path))


def dark(page, frame) -> None:
    page.evaluate("document.body.classList.add('dark-mode')")  # what TB's theme switch does
    expect(frame.locator("html")).to_have_class("dark")


def test_owlv2_card_has_ceilings_points_and_the_ops_that_lose_most(page, roof_tb, artifacts):
    s = summary(roof_tb, OWL)
    r = s["roofline"]
    points = plottable(r["ops"])
    peaks = r["device"]["peaks"]
    roofs = {peaks[o["peak_precision"]] for o in r["ops"] if peaks.get(o["peak_precision"])}
    frame = open_run(page, roof_tb, OWL)
    expect(frame.locator("#roofline h2")).to_have_text("Roofline")
    expect(frame.locator("#roofline .card-body")).to_have_attribute("data-state", "ok")
    chart = frame.locator("#roofline-chart")
    expect(chart).to_have_attribute("data-points", str(len(points)))
    expect(chart).to_have_attribute("data-ceilings", str(len(roofs)))  # bf16, fp32 = fp64
    expect(chart).to_have_attribute("data-memory-roof", "1")
    expect(chart.locator("canvas")).to_be_visible()
    expect(frame.locator("#roofline .card-tools")).to_contain_text("H100")
    # the ops losing the most time against the roofline, most first
    rows = frame.locator("#roofline .rf-table tbody tr")
    expect(rows).to_have_count(min(8, len(r["ops"])))
    worst = max(r["ops"], key=lambda o: o["loss_us"] or 0)
    expect(rows.first.locator("td").first).to_contain_text(worst["name"].replace("aten::", ""))
    expect(rows.first).to_contain_text(f"{round(worst['roofline_pct'] * 100)}%")
    # the little device time without a cost model is said, by name
    expect(frame.locator("#roofline-unmodelled")).to_contain_text(r["unmodelled"][0]["name"])
    # the FLOP-utilisation column in the steps table
    expect(frame.locator("#steps th", has_text="FLOP util")).to_be_visible()
    st = s["steps"][0]
    cell = flop_cell(frame)
    expect(cell).to_have_text(f"{round(st['flop_utilisation'] * 100)}%")
    assert "TFLOP/s" in cell.get_attribute("title")
    assert st["flop_precision"] in cell.get_attribute("title")
    card_shot(page, frame, artifacts / "roofline-owlv2-light.png")
    page.screenshot(path=str(artifacts / "roofline-owlv2-tab.png"))


def test_hovering_and_clicking_a_point_opens_its_first_call(page, roof_tb, artifacts):
    s = summary(roof_tb, OWL)
    points = plottable(s["roofline"]["ops"])
    frame = open_run(page, roof_tb, OWL)
    chart = frame.locator("#roofline-chart")
    x, y = map(float, chart.get_attribute("data-xy").split(";")[0].split(","))
    over = chart.locator(".u-over")
    over.hover(position={"x": x, "y": y})
    expect(chart).not_to_have_attribute("data-active", "")
    op = points[int(chart.get_attribute("data-active"))]
    tip = frame.locator(".rf-tip")
    expect(tip).to_be_visible()
    expect(tip.locator(".n")).to_have_text(op["name"])
    expect(tip).to_contain_text("of its roofline")
    expect(tip).to_contain_text(f"{op['calls']} calls")
    card_shot(page, frame, artifacts / "roofline-owlv2-hover.png")
    over.click(position={"x": x, "y": y})
    tl = frame.locator(".tl")
    expect(tl).to_have_attribute("data-selected-row", str(op["rows"][0]), timeout=READY)
    assert str(op["rows"][0]) in tl.get_attribute("data-highlight").split(",")
    expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text(
        f"#{op['steps'][0]}")
    # the dispatch chain is open at the op's node, marked
    expect(frame.locator("#tree .node.hl")).to_contain_text(op["name"])
    page.screenshot(path=str(artifacts / "roofline-owlv2-opened.png"))


def test_keyboard_walks_the_points_by_device_time_and_enter_opens(page, roof_tb):
    points = plottable(summary(roof_tb, OWL)["roofline"]["ops"])
    frame = open_run(page, roof_tb, OWL)
    frame.locator("#roofline .rf-chart").focus()
    chart = frame.locator("#roofline-chart")
    tip = frame.locator(".rf-tip")
    page.keyboard.press("ArrowRight")
    expect(chart).to_have_attribute("data-active", "0")
    expect(tip.locator(".n")).to_have_text(points[0]["name"])
    page.keyboard.press("ArrowRight")
    expect(chart).to_have_attribute("data-active", "1")
    expect(tip.locator(".n")).to_have_text(points[1]["name"])
    expect(tip).to_contain_text("Enter")
    page.keyboard.press("Enter")
    expect(frame.locator(".tl")).to_have_attribute("data-selected-row", str(points[1]["rows"][0]),
                                                   timeout=READY)
    expect(frame.locator("#tree .node.hl")).to_contain_text(points[1]["name"])
    page.keyboard.press("End")
    expect(chart).to_have_attribute("data-active", str(len(points) - 1))
    page.keyboard.press("Escape")
    expect(tip).to_be_hidden()


def test_a_table_row_opens_its_op(page, roof_tb):
    ops = summary(roof_tb, OWL)["roofline"]["ops"]
    second = sorted(ops, key=lambda o: -(o["loss_us"] or 0))[1]
    frame = open_run(page, roof_tb, OWL)
    row = frame.locator("#roofline .rf-table tbody tr").nth(1)
    row.click()
    expect(row).to_have_attribute("aria-selected", "true")
    expect(frame.locator(".tl")).to_have_attribute("data-selected-row", str(second["rows"][0]),
                                                   timeout=READY)


def test_dark_theme_rebuilds_the_chart(page, roof_tb, artifacts):
    frame = open_run(page, roof_tb, OWL)
    points = frame.locator("#roofline-chart").get_attribute("data-points")
    dark(page, frame)
    expect(frame.locator("#roofline-chart")).to_have_attribute("data-points", points)
    chart = frame.locator("#roofline-chart")
    x, y = map(float, chart.get_attribute("data-xy").split(";")[0].split(","))
    card_shot(page, frame, artifacts / "roofline-owlv2-dark.png")
    frame.locator("#roofline-chart .u-over").hover(position={"x": x, "y": y})
    expect(frame.locator(".rf-tip")).to_be_visible()
    card_shot(page, frame, artifacts / "roofline-owlv2-dark-hover.png")
    page.screenshot(path=str(artifacts / "roofline-owlv2-tab-dark.png"))


@pytest.mark.parametrize("run", [QWEN, RESNET])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_other_gpus_in_both_themes(page, roof_tb, artifacts, run, theme):
    if not (SHARED_TRACES / run).is_dir():
        pytest.skip(f"{run} is not in ../shared/traces")
    r = summary(roof_tb, run)["roofline"]
    frame = open_run(page, roof_tb, run)
    if theme == "dark":
        dark(page, frame)
    chart = frame.locator("#roofline-chart")
    expect(chart).to_have_attribute("data-points", str(len(plottable(r["ops"]))))
    assert int(chart.get_attribute("data-ceilings")) >= 1
    short = "qwen-h100" if run == QWEN else "resnet50-v100"
    card_shot(page, frame, artifacts / f"roofline-{short}-{theme}.png")


def test_a_gpu_without_peaks_is_plotted_without_ceilings(page, roof_tb, artifacts):
    if not (SHARED_TRACES / MI250).is_dir():
        pytest.skip(f"{MI250} is not in ../shared/traces")
    r = summary(roof_tb, MI250)["roofline"]
    frame = open_run(page, roof_tb, MI250)
    expect(frame.locator("#roofline .card-body")).to_have_attribute("data-state", "no-peaks")
    expect(frame.locator("#roofline-no-peaks")).to_contain_text(
        re.compile(r"no peak figures for .+: give them with --peaks FILE\.json"
                   r" or TB_DIAGNOSTICS_PEAKS"))
    chart = frame.locator("#roofline-chart")
    expect(chart).to_have_attribute("data-ceilings", "0")
    expect(chart).to_have_attribute("data-points", str(len(plottable(r["ops"]))))
    expect(flop_cell(frame)).to_have_text("—")
    card_shot(page, frame, artifacts / "roofline-mi250-no-peaks.png")


def flop_cell(frame):
    """The first step's FLOP-utilisation cell, found by its column's header (columns come
    and go: the critical path's has been added before it)."""
    header = frame.locator("#steps thead th", has_text="FLOP util")
    expect(header).to_be_visible()
    index = header.evaluate("th => [...th.parentElement.children].indexOf(th)")
    return frame.locator("#steps tbody tr").first.locator("td").nth(index)


def test_cpu_only_run_says_why_there_is_no_roofline(page, roof_tb, artifacts):
    frame = open_run(page, roof_tb, CPU_RUN)
    expect(frame.locator("#roofline .card-body")).to_have_attribute("data-state", "cpu")
    expect(frame.locator("#roofline-empty")).to_contain_text("CPU-only trace")
    assert frame.locator("#roofline-chart").count() == 0
    expect(flop_cell(frame)).to_have_text("—")
    card_shot(page, frame, artifacts / "roofline-cpu-only.png")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_host_device_copies_show_the_host_link_ceiling(page, roof_tb, artifacts, theme):
    r = summary(roof_tb, OWL)["roofline"]
    copies = [o for o in r["ops"] if o["bound"] == "host-link"]
    assert copies and r["host_link"]["name"] == "PCIe 5.0 x16"  # H100: PCIe Gen5 x16
    frame = open_run(page, roof_tb, OWL)
    if theme == "dark":
        dark(page, frame)
    note = frame.locator("#roofline-host-link")
    expect(note).to_contain_text("host-link ceiling 63 GB/s per direction (PCIe 5.0 x16)")
    expect(note).to_contain_text(f"{len(copies)} host↔device copy group")
    colour = note.locator(".rf-bound").evaluate("e => getComputedStyle(e).color")
    assert colour not in ("", "rgb(0, 0, 0)")
    card_shot(page, frame, artifacts / f"roofline-owlv2-host-link-{theme}.png")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_device_identified_by_its_properties_says_so(page, roof_tb, artifacts, theme):
    if not PAIR.is_dir():
        pytest.skip("../shared/pairs is not present")
    dev = summary(roof_tb, PAIR_RUN)["roofline"]["device"]
    assert dev["identified_by"] == "properties" and dev["identification"]
    frame = open_run(page, roof_tb, PAIR_RUN)
    if theme == "dark":
        dark(page, frame)
    label = frame.locator("#roofline-identified")
    expect(label).to_have_text(" (identified by its properties)")
    expect(label).to_have_attribute("title", dev["identification"])
    expect(frame.locator("#roofline .rf-device")).to_contain_text(dev["name"])
    card_shot(page, frame, artifacts / f"roofline-h100-identified-{theme}.png")
