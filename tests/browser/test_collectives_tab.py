"""The tab shows collective kernels that no compute overlaps as their own part of each
step's bar, in their own colour in both themes, and the table's busy figure is compute."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from conftest import TraceBuilder  # tests/conftest.py: the trace builder

from .conftest import SHARED_TRACES

READY = 60_000
RCCL = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
REAL_RUN = "hta_2022_a100_rank3_of8"


def _rccl_rank(dest: Path) -> None:
    """Three steps of 49, 19 and 18.5 ms; 32, 11.9 and 11.4 ms of each are a collective
    kernel that no compute overlaps (issue 23's RCCL rank)."""
    b = TraceBuilder(device_properties=[{"id": 0, "name": "AMD Instinct MI250X",
                                         "gcnArchName": "gfx90a"}])
    b.top["distributedInfo"] = {"backend": "nccl", "rank": 3, "world_size": 8}
    t0 = 0.0
    for n, (wall, compute, alone) in enumerate([(49_000, 15_000, 32_000),
                                                (19_000, 6_000, 11_900),
                                                (18_500, 6_000, 11_400)]):
        b.step(n, t0, wall)
        b.op("aten::mm", t0 + 100, 400)
        b.launch(t0 + 400, 10, "Cijk_Ailk_Bljk_SB_MT64x64x16", t0 + 500, compute,
                 runtime="hipLaunchKernel")
        b.op("record_param_comms", t0 + 600, 50)
        b.launch(t0 + 610, 10, RCCL, t0 + 500 + compute, alone, stream=20,
                 runtime="hipExtLaunchKernel")
        t0 += wall
    b.write(dest / "rccl" / "rank3.1.pt.trace.json")


@pytest.fixture
def comm_tb(start_tensorboard, tmp_path):
    logdir = tmp_path / "log"
    _rccl_rank(logdir)
    if (SHARED_TRACES / REAL_RUN).is_dir():
        shutil.copytree(SHARED_TRACES / REAL_RUN, logdir / REAL_RUN)  # copied: links are skipped
    tb = start_tensorboard(logdir)
    yield tb
    tb.stop()


def _segments(frame, row: int) -> list[tuple[str, float]]:
    """(CSS background, width %) of each part of a step row's busy bar (not its critical
    path's, which has a bar of its own)."""
    return frame.locator("#steps tbody tr").nth(row).locator(
        ".bar:not(.cp-bar) > span").evaluate_all(
        "els => els.map(e => [e.style.background, parseFloat(e.style.width)])")


def test_lone_collectives_have_their_own_part_and_colour(page, open_tab, comm_tb, artifacts):
    frame = open_tab(comm_tb, run="rccl")
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    rows = frame.locator("#steps tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("communication-bound")
    expect(frame.locator("#steps th button", has_text="Compute busy")).to_be_visible()
    expect(rows.first.locator(".bar + .num")).to_have_text("31%")  # compute, not 96 % busy
    parts = {bg: w for bg, w in _segments(frame, 0) if w > 0}
    assert parts["var(--c-busy)"] == pytest.approx(100 * 15_000 / 49_000, abs=0.01)
    assert parts["var(--c-collective)"] == pytest.approx(100 * 32_000 / 49_000, abs=0.01)
    assert sum(parts.values()) == pytest.approx(100, abs=0.01)
    legend = frame.locator("div.legend").first
    expect(legend).to_contain_text("collectives no compute overlaps")
    # The legend lists only the parts this run has: no compilation, no DataLoader here.
    expect(legend.locator('[data-part="collective"]')).to_be_visible()
    expect(legend.locator('[data-part="compile"]')).to_be_hidden()
    expect(legend.locator('[data-part="input"]')).to_be_hidden()
    expect(legend.locator('[data-part="busy"]')).to_be_visible()
    colour = "getComputedStyle(document.documentElement).getPropertyValue('--c-%s').trim()"
    names = ("busy", "collective", "input", "sync", "comm", "launch", "other", "profiler")
    themes = []
    for dark in (False, True):
        page.evaluate(f"document.body.classList.{'add' if dark else 'remove'}('dark-mode')")
        html = frame.locator("html")
        (expect(html).to_have_class if dark else expect(html).not_to_have_class)("dark")
        got = {n: frame.locator("html").evaluate(f"() => {colour % n}") for n in names}
        # Its own colour: no other part of the bar (nor the cause it sits next to) has it.
        assert got["collective"] and list(got.values()).count(got["collective"]) == 1
        themes.append(got["collective"])
        page.wait_for_timeout(300)
        theme = "dark" if dark else "light"
        page.screenshot(path=str(artifacts / f"tab-rccl-collectives-{theme}.png"))
    assert themes[0] != themes[1]  # each theme has its own shade


def test_real_distributed_run_screenshots(page, open_tab, comm_tb, artifacts):
    if not (SHARED_TRACES / REAL_RUN).is_dir():
        pytest.skip("../shared/traces is not present")
    frame = open_tab(comm_tb, run=REAL_RUN)
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    rows = frame.locator("#steps tbody tr")
    expect(rows).to_have_count(6)
    # Every step of rank 3 ran NCCL kernels that no compute overlapped.
    for k in range(6):
        parts = dict(_segments(frame, k))
        assert parts["var(--c-collective)"] > 5
    for dark in (False, True):
        page.evaluate(f"document.body.classList.{'add' if dark else 'remove'}('dark-mode')")
        page.wait_for_timeout(500)
        theme = "dark" if dark else "light"
        page.screenshot(path=str(artifacts / f"tab-{REAL_RUN}-{theme}.png"))
