"""The Operators and Modules cards in a real browser, on the shared H100 BERT inference
run (nn.Module frames, with_stack) and the V100 ResNet-50 run (no modules), in both
themes and by keyboard. Screenshots land in the test artifacts directory."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import (
    READY,
    RESNET,
    SHARED_TRACES,
    TensorBoard,
    open_run,
    shared_runs_logdir,
    view_document,
)

BERT = "tracelens_h100_bert_small_inference"


@pytest.fixture(scope="module")
def views_tb(tmp_path_factory, artifacts):
    if not (SHARED_TRACES / BERT).is_dir():
        pytest.skip("../shared/traces is not present")
    logdir = shared_runs_logdir(tmp_path_factory, "ops", (BERT, RESNET))
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("ops-cache"),
                     artifacts / "tensorboard-ops.log")
    yield tb
    tb.stop()


view = view_document  # (tb, run, name, **params)


def shot(page, frame, card: str, path) -> None:
    el = frame.locator(f"#{card}")
    el.scroll_into_view_if_needed()
    page.wait_for_timeout(200)
    el.screenshot(path=str(path))


def dark(page, frame) -> None:
    page.evaluate("document.body.classList.add('dark-mode')")  # what TB's theme switch does
    expect(frame.locator("html")).to_have_class("dark")


def test_operators_card_lists_sorts_groups_and_opens_an_op(page, views_tb, artifacts):
    doc = view(views_tb, BERT, "ops", limit=50)
    frame = open_run(page, views_tb, BERT)
    card = frame.locator("#ops")
    expect(card.locator("h2")).to_have_text("Operators")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "ready", timeout=READY)
    rows = card.locator("tbody tr")
    expect(rows).to_have_count(min(50, doc["total_rows"]))
    expect(rows.first.locator("td").first).to_have_text(doc["rows"][0]["name"])
    expect(card.locator(".ops-note")).to_contain_text(f"{doc['total_rows']} op groups")
    shot(page, frame, "ops", artifacts / "ops-bert-light.png")
    # keyboard: the first row, down one, Enter opens that op's first call
    second = doc["rows"][1]
    rows.first.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(frame.locator(".tl")).to_have_attribute("data-selected-row", str(second["rows"][0]),
                                                   timeout=READY)
    expect(frame.locator("#tree .node.hl")).to_contain_text(second["name"])
    expect(card.locator(".ops-stack")).to_contain_text("Call stack of")
    expect(card.locator(".ops-frames li").first).to_have_text(second["stack"][0])
    shot(page, frame, "ops", artifacts / "ops-bert-opened-light.png")
    # sort by calls (a new column: the most first)
    card.locator("th button", has_text="Calls").click()
    by_calls = view(views_tb, BERT, "ops", limit=50, sort="-calls")
    expect(card.locator('th[aria-sort="descending"]')).to_contain_text("Calls")
    expect(rows.first.locator("td").first).to_have_text(by_calls["rows"][0]["name"])
    # by shapes: the shapes column, more groups
    card.locator("select[aria-label='group ops']").select_option("shapes")
    shaped = view(views_tb, BERT, "ops", limit=50, sort="-calls", group="shapes")
    expect(card.locator("th", has_text="Input shapes")).to_be_visible()
    expect(card.locator(".ops-note")).to_contain_text(f"{shaped['total_rows']} op groups")
    # the selected step instead of the span
    step = view(views_tb, BERT, "ops", limit=1)["rows"][0]["steps"][0]
    card.locator("select[aria-label='ops of']").select_option("step")
    expect(card.locator(".ops-note")).to_contain_text(f"in step #{step}")
    # search
    card.locator(".ops-search").fill("addmm")
    expect(rows.first.locator("td").first).to_have_text("aten::addmm")
    dark(page, frame)
    shot(page, frame, "ops", artifacts / "ops-bert-dark.png")


def test_modules_card_shows_the_tree_and_opens_its_ops(page, views_tb, artifacts):
    doc = view(views_tb, BERT, "modules", limit=200)
    frame = open_run(page, views_tb, BERT)
    card = frame.locator("#modules")
    expect(card.locator("h2")).to_have_text("Modules")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "ready", timeout=READY)
    rows = card.locator("tbody tr")
    expect(rows).to_have_count(min(200, doc["total_rows"]))
    expect(rows.first.locator("td").first).to_have_text(doc["rows"][0]["name"])
    expect(rows.nth(1)).to_have_attribute("aria-level", str(doc["rows"][1]["depth"] + 1))
    shot(page, frame, "modules", artifacts / "modules-bert-light.png")
    # keyboard: down to the second module, Enter: Operators under it
    target = doc["rows"][1]
    rows.first.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    under = view(views_tb, BERT, "ops", limit=50, module=target["id"])
    ops = frame.locator("#ops")
    expect(ops.locator(".ops-chip")).to_contain_text(target["name"])
    expect(ops.locator(".ops-note")).to_contain_text(f"{under['total_rows']} op groups")
    expect(ops.locator("tbody tr").first.locator("td").first).to_have_text(
        under["rows"][0]["name"])
    shot(page, frame, "ops", artifacts / "ops-bert-module-light.png")
    ops.locator(".ops-chip").click()
    expect(ops.locator(".ops-chip")).to_have_count(0)
    dark(page, frame)
    shot(page, frame, "modules", artifacts / "modules-bert-dark.png")


def test_a_trace_without_modules_says_how_to_record_them(page, views_tb, artifacts):
    if not (SHARED_TRACES / RESNET).is_dir():
        pytest.skip(f"{RESNET} is not in ../shared/traces")
    frame = open_run(page, views_tb, RESNET)
    empty = frame.locator("#modules-empty")
    expect(empty).to_contain_text("with_stack=True", timeout=READY)
    expect(frame.locator("#ops tbody tr").first).to_be_visible(timeout=READY)
    shot(page, frame, "modules", artifacts / "modules-resnet-empty-light.png")
    dark(page, frame)
    shot(page, frame, "modules", artifacts / "modules-resnet-empty-dark.png")


def test_an_op_opened_in_operators_is_selected_on_the_roofline(page, views_tb):
    from .test_roofline import plottable, summary

    points = plottable(summary(views_tb, BERT)["roofline"]["ops"])
    doc = view(views_tb, BERT, "ops", limit=50)
    names = [o["name"] for o in points]
    k, row = next((k, r) for k, r in enumerate(doc["rows"]) if r["name"] in names)
    frame = open_run(page, views_tb, BERT)
    card = frame.locator("#ops")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "ready", timeout=READY)
    rows = card.locator("tbody tr")
    rows.first.focus()
    for _ in range(k):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    # The first bubble of that name (by name grouping, shapes are not compared).
    expect(frame.locator("#roofline-chart")).to_have_attribute(
        "data-selected", str(names.index(row["name"])), timeout=READY)
