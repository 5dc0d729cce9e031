"""The Kernels card in a real browser, on the shared H100 OWLv2 inference run (cuBLAS and
CUTLASS Tensor Core GEMMs, a kernel that opted in to 226 KB of shared memory) and a
CPU-only run, in both themes and by keyboard. Screenshots land in the test artifacts
directory."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import READY, SHARED_TRACES, TensorBoard, open_run, shared_runs_logdir
from .test_ops_modules import dark, shot, view

OWL = "tracelens_h100_owlv2_large_inference"
CPU = "hta_cpu_only_gloo_rank34"


@pytest.fixture(scope="module")
def kernels_tb(tmp_path_factory, artifacts):
    if not (SHARED_TRACES / OWL).is_dir():
        pytest.skip("../shared/traces is not present")
    logdir = shared_runs_logdir(tmp_path_factory, "kernels", (OWL, CPU))
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("kernels-cache"),
                     artifacts / "tensorboard-kernels.log")
    yield tb
    tb.stop()


def test_kernels_card_lists_configurations_and_opens_kernels_and_ops(page, kernels_tb,
                                                                      artifacts):
    doc = view(kernels_tb, OWL, "kernels", limit=50)
    frame = open_run(page, kernels_tb, OWL)
    card = frame.locator("#kernels")
    expect(card.locator("h2")).to_have_text("Kernels")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "ready", timeout=READY)
    rows = card.locator("tbody tr")
    expect(rows).to_have_count(min(50, doc["total_rows"]))
    first = doc["rows"][0]
    expect(rows.first.locator("td").nth(1)).to_have_text(str(first["calls"]))
    expect(card.locator(".kn-note")).to_contain_text(f"{doc['total_rows']} kernel groups")
    expect(card.locator(".kn-note")).to_contain_text("cc 9.0, 132 SMs")
    # The GEMM that opted in to more shared memory: recorded 0 %, theoretical 19 %.
    gemm = next(i for i, r in enumerate(doc["rows"]) if r["name"].startswith("sm90_xmma"))
    occ = rows.nth(gemm).locator(".kn-occ")
    expect(occ).to_have_text("0% / 19%")
    assert "limited by registers and shared memory" in occ.get_attribute("title")
    expect(rows.nth(gemm).locator(".kn-tc")).to_have_text("yes")
    shot(page, frame, "kernels", artifacts / "kernels-owlv2-light.png")
    # keyboard: down to the second row, Enter opens its first kernel in the timeline
    second = doc["rows"][1]
    rows.first.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(frame.locator(".tl")).to_have_attribute("data-selected-row", str(second["rows"][0]),
                                                   timeout=READY)
    expect(card.locator(".kn-detail")).to_contain_text("Launched by")
    # o: its launching op in the dispatch chain
    rows.nth(1).focus()
    page.keyboard.press("o")
    expect(frame.locator(".tl")).to_have_attribute("data-selected-row",
                                                   str(second["op_rows"][0]), timeout=READY)
    expect(frame.locator("#tree .node.hl").first).to_contain_text(second["ops"][0]["name"])
    shot(page, frame, "kernels", artifacts / "kernels-owlv2-opened-light.png")
    # sort by registers (a new column: the most first)
    card.locator("th button", has_text="Regs").click()
    by_regs = view(kernels_tb, OWL, "kernels", limit=50, sort="-registers_per_thread")
    expect(card.locator('th[aria-sort="descending"]')).to_contain_text("Regs")
    expect(rows.first.locator("td").nth(11)).to_have_text(
        str(by_regs["rows"][0]["registers_per_thread"]))
    # by launching op: a column more, more groups
    card.locator("select[aria-label='group kernels']").select_option("op")
    by_op = view(kernels_tb, OWL, "kernels", limit=50, sort="-registers_per_thread", group="op")
    expect(card.locator("th", has_text="Launched by")).to_be_visible()
    expect(card.locator(".kn-note")).to_contain_text(f"{by_op['total_rows']} kernel groups")
    # the selected step only (the tab has one selected)
    card.locator("select[aria-label='kernels of']").select_option("step")
    expect(card.locator(".kn-note")).to_contain_text("in step #")
    card.locator("select[aria-label='kernels of']").select_option("span")
    expect(card.locator(".kn-note")).to_contain_text("in the whole span")
    # search
    card.locator(".ops-search").fill("softmax")
    expect(rows.first.locator("td").first).to_contain_text("SoftMax")
    dark(page, frame)
    shot(page, frame, "kernels", artifacts / "kernels-owlv2-dark.png")
    # the whole table again, by name, in the dark theme (Tensor Core badges)
    card.locator(".ops-search").fill("")
    card.locator("select[aria-label='group kernels']").select_option("name")
    expect(card.locator(".kn-note")).to_contain_text(f"{doc['total_rows']} kernel groups")
    expect(card.locator(".kn-tc").first).to_be_visible()
    shot(page, frame, "kernels", artifacts / "kernels-owlv2-all-dark.png")


def test_a_cpu_only_trace_says_there_are_no_kernels(page, kernels_tb, artifacts):
    if not (SHARED_TRACES / CPU).is_dir():
        pytest.skip(f"{CPU} is not in ../shared/traces")
    frame = open_run(page, kernels_tb, CPU)
    card = frame.locator("#kernels")
    expect(card.locator(".card-body")).to_have_attribute("data-state", "empty", timeout=READY)
    expect(card.locator(".none")).to_contain_text("CPU-only trace")
    dark(page, frame)
    shot(page, frame, "kernels", artifacts / "kernels-cpu-dark.png")
