"""The Memory card in a real browser: the V100 profile_memory run (curve, peak, alive at the
peak by op, per step, keyboard), the 2021 ResNet-50 run (no addresses: nothing matched)
and a trace without [memory] events (the empty state), in both themes. Screenshots land
in the test artifacts directory."""

from __future__ import annotations

import json
import re

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

V100 = "hta_v100_profile_memory_rank1_of2"
NO_MEMORY = "hta_2022_legacy_categories_tiny"
GROWS = "moe-forward-grows"
BERT = "tracelens_h100_bert_small_inference"  # with_stack: Python frames in the call paths


def _growing_run(dest) -> None:
    """Two steps; the first grows from 2.3 GB to 23.1 GB (experts' buffers made by
    aten::index_select and kept): memory-growth's growth inside a window."""
    ev = []
    x = lambda cat, name, ts, dur: ev.append(  # noqa: E731
        {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur})

    def mem(ts, nbytes, total, addr):
        ev.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                   "pid": 1, "tid": 1, "ts": ts,
                   "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes,
                            "Total Allocated": total, "Total Reserved": 30e9}})
    total = 2.3e9
    for step, t0 in ((1, 0), (2, 10_000)):
        x("user_annotation", f"ProfilerStep#{step}", t0, 9_999)
        for i in range(8):
            x("cpu_op", "aten::index_select", t0 + 100 + 1000 * i, 50)
            grow = 2.6e9 if step == 1 else 1e6
            total += grow
            mem(t0 + 110 + 1000 * i, grow, total, (step << 40) + (i << 32))
            if step == 2:
                total -= grow
                mem(t0 + 130 + 1000 * i, -grow, total, (step << 40) + (i << 32))
    (dest / GROWS).mkdir()
    (dest / GROWS / "worker0.1.pt.trace.json").write_text(json.dumps(
        {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                   "totalGlobalMem": 85018279936}],
         "traceEvents": ev}))


@pytest.fixture(scope="module")
def mem_tb(tmp_path_factory, artifacts):
    if not (SHARED_TRACES / V100).is_dir():
        pytest.skip("../shared/traces is not present")
    logdir = shared_runs_logdir(tmp_path_factory, "memory", (V100, RESNET, NO_MEMORY, BERT))
    _growing_run(logdir)
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("memory-cache"),
                     artifacts / "tensorboard-memory.log")
    yield tb
    tb.stop()


def view(tb: TensorBoard, run: str, **params) -> dict:
    """The memory view's document for the run's first span."""
    return view_document(tb, run, "memory", **params)


def shot(page, frame, path) -> None:
    el = frame.locator("#memory")
    el.scroll_into_view_if_needed()
    page.wait_for_timeout(300)  # let the canvas settle
    el.screenshot(path=str(path))


def starts(text: str) -> re.Pattern:
    """A row's title starts with its op's full name (the cell may shorten it)."""
    return re.compile("^" + re.escape(text) + "(\n|$)")


def selected_step(frame):
    return frame.locator("table[aria-label='steps'] tr[aria-selected='true'] td").first


def test_memory_card_draws_the_curve_and_the_alive_table(page, mem_tb, artifacts):
    doc = view(mem_tb, V100, limit=50, device="CUDA 1")  # the table is one device's
    dev = doc["devices"][0]
    assert dev["device"] == "CUDA 1"  # the GPU before the CPU
    frame = open_run(page, mem_tb, V100)
    card = frame.locator("#memory")
    expect(card.locator("h2")).to_have_text("Memory")
    body = card.locator(".card-body")
    expect(body).to_have_attribute("data-state", "ok", timeout=READY)
    expect(card.locator("#memory-summary")).to_contain_text("CUDA 1 · peak allocated 6.6 GB")
    expect(card.locator("#memory-summary")).to_contain_text(f"(step {dev['peak_step']})")
    expect(card.locator("#memory-chart canvas")).to_have_count(1)
    rows = card.locator("#memory-alive tbody tr")
    expect(rows).to_have_count(min(50, doc["total_rows"]))
    expect(rows.first).to_have_attribute("title", starts(doc["rows"][0]["op"]))
    expect(card.locator("#memory-steps tbody tr")).to_have_count(len(dev["per_step"]))
    expect(card.locator("#memory-device option")).to_have_count(len(doc["devices"]))
    shot(page, frame, artifacts / "memory-v100-light.png")
    # The chart by keyboard: Home goes to the peak's step, Enter opens it in the tab.
    card.locator(".mem-chart").focus()
    page.keyboard.press("Home")
    page.keyboard.press("Enter")
    expect(selected_step(frame)).to_have_text(f"#{dev['peak_step']}")
    # The per-step table by keyboard: down one row, Enter selects that step.
    second = dev["per_step"][1]["step"]
    card.locator("#memory-steps tbody tr").first.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(selected_step(frame)).to_have_text(f"#{second}")
    # Sorting is the server's: by allocations, most first.
    card.locator("#memory-alive th button", has_text="Allocations").click()
    by_count = view(mem_tb, V100, limit=50, sort="-count", device="CUDA 1")
    expect(card.locator('#memory-alive th[aria-sort="descending"]')).to_contain_text("Allocations")
    expect(rows.first).to_have_attribute("title", starts(by_count["rows"][0]["op"]))
    # The selected step's own curve and peak.
    card.locator("#memory-mode").select_option("step")
    one = view(mem_tb, V100, limit=50, step=str(second))["devices"][0]
    expect(card.locator("#memory-summary")).to_contain_text(f"{one['events']:,} events")
    # The CPU's curve.
    card.locator("#memory-device").select_option("CPU")
    expect(card.locator("#memory-summary")).to_contain_text("CPU · peak allocated")
    card.locator("#memory-device").select_option("CUDA 1")
    card.locator("#memory-mode").select_option("span")
    expect(card.locator("#memory-summary")).to_contain_text("peak allocated 6.6 GB")
    page.evaluate("document.body.classList.add('dark-mode')")  # what TB's theme switch does
    expect(frame.locator("html")).to_have_class("dark")
    shot(page, frame, artifacts / "memory-v100-dark.png")


def test_a_trace_without_addresses_says_nothing_is_matched(page, mem_tb, artifacts):
    if not (SHARED_TRACES / RESNET).is_dir():
        pytest.skip(f"{RESNET} is not in ../shared/traces")
    frame = open_run(page, mem_tb, RESNET)
    card = frame.locator("#memory")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "ok", timeout=READY)
    expect(card.locator("#memory-unmatched")).to_contain_text("no Addr")
    expect(card.locator("#memory-summary")).to_contain_text("relative to the start of profiling")
    shot(page, frame, artifacts / "memory-resnet2021-light.png")


def test_a_trace_without_memory_events_says_how_to_record_them(page, mem_tb, artifacts):
    if not (SHARED_TRACES / NO_MEMORY).is_dir():
        pytest.skip(f"{NO_MEMORY} is not in ../shared/traces")
    frame = open_run(page, mem_tb, NO_MEMORY)
    card = frame.locator("#memory")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "empty", timeout=READY)
    expect(card.locator("#memory-empty")).to_contain_text("profile_memory=True")
    shot(page, frame, artifacts / "memory-empty-light.png")
    page.evaluate("document.body.classList.add('dark-mode')")
    expect(frame.locator("html")).to_have_class("dark")
    shot(page, frame, artifacts / "memory-empty-dark.png")


def test_a_memory_finding_is_shown_and_its_step_shaded(page, mem_tb, artifacts):
    doc = view(mem_tb, GROWS)
    (f,) = [f for f in doc["findings"] if f["rule"] == "memory-growth"]
    assert f["steps"] == [1] and f["severity"] == "warning"
    frame = open_run(page, mem_tb, GROWS)
    card = frame.locator("#memory")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "ok", timeout=READY)
    expect(card.locator("#memory-findings")).to_contain_text("memory-growth")
    expect(card.locator("#memory-findings")).to_contain_text("grows 20.80 GB inside step 1")
    expect(card.locator(".mem-legend")).to_contain_text("a memory finding's steps")
    expect(card.locator("#memory-steps tbody tr").first).to_contain_text("20.8 GB (8)")
    shot(page, frame, artifacts / "memory-growth-light.png")
    page.evaluate("document.body.classList.add('dark-mode')")
    expect(frame.locator("html")).to_have_class("dark")
    shot(page, frame, artifacts / "memory-growth-dark.png")


def test_call_paths_show_their_innermost_frames(page, mem_tb, artifacts):
    if not (SHARED_TRACES / BERT).is_dir():
        pytest.skip(f"{BERT} is not in ../shared/traces")
    doc = view(mem_tb, BERT, limit=50, device="CUDA 0")
    first = doc["rows"][0]
    frame = open_run(page, mem_tb, BERT)
    card = frame.locator("#memory")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "ok", timeout=READY)
    row = card.locator("#memory-alive tbody tr").first
    expect(row).to_have_attribute("title", starts(first["op"]))
    # The cell ends where the allocation was made; the whole path is in the row's title.
    innermost = first["stack"].split(" > ")[-1]
    assert row.locator("td.mem-stack").inner_text().endswith(innermost[-20:])
    shot(page, frame, artifacts / "memory-bert-light.png")
