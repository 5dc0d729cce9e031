"""The Diagnostics tab in a real browser: TensorBoard on loopback, headless Debian Chromium.

Each test fails on any console error, uncaught exception or dialog in the
page (see the ``page`` fixture). Screenshots (1280×800) land in the test artifacts
directory (see conftest).
"""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from playwright.sync_api import expect

READY = 60_000  # ms: the first look at a span parses it (CI machines can be busy)


def ready(frame, state: str = "true"):
    expect(frame.locator("body")).to_have_attribute("data-ready", state, timeout=READY)


def shot(page, artifacts, name: str) -> None:
    page.wait_for_timeout(300)  # let the canvas and chart settle
    page.screenshot(path=str(artifacts / name))


def test_resnet_run_shows_verdicts_findings_and_dispatch_chain(page, open_tab, tensorboard,
                                                               resnet, artifacts):
    frame = open_tab(run=resnet)
    ready(frame)
    expect(frame.locator("#headline .chip")).to_have_text("mixed")
    expect(frame.locator("#headline-text")).to_contain_text("waiting for the DataLoader")
    expect(frame.locator(".topbar .device")).to_contain_text("Tesla V100-DGXS-32GB")
    # the step chart (uPlot) and the table
    expect(frame.locator("#step-chart .uplot canvas").first).to_be_visible()
    rows = frame.locator("#steps tbody tr")
    expect(rows).to_have_count(6)
    expect(rows.first).to_contain_text("#5")
    # the findings, as many as the route reports, grouped by severity
    span = tensorboard.json(f"span?run={resnet}&worker=worker0&span=1623143089861")["summary"]
    expect(frame.locator(".finding")).to_have_count(len(span["findings"]))
    if span["findings"]:
        first = max(("critical", "warning", "info").index(f["severity"]) for f in span["findings"])
        assert first >= 0
        expect(frame.locator(".sev-group h3").first).to_be_visible()
    # the dispatch tree: ProfilerStep#N down to a kernel, with times
    items = frame.locator("#tree [role=treeitem]")
    expect(items.first).to_contain_text("ProfilerStep#")
    assert items.count() > 5
    expect(frame.locator("#tree .k-kernel").first).to_be_visible()
    expect(frame.locator("#tree .k-runtime").first).to_contain_text("cudaLaunchKernel")
    # the timeline has events, lanes for the CPU threads and the GPU stream
    tl = frame.locator(".tl")
    assert int(tl.get_attribute("data-events")) > 1000
    shot(page, artifacts, "tab-resnet50-workers0.png")


def test_clicking_evidence_shows_it_in_the_timeline(page, open_tab, tensorboard, resnet,
                                                    artifacts):
    span = tensorboard.json(f"span?run={resnet}&worker=worker0&span=1623143089861")["summary"]
    with_evidence = [f for f in span["findings"] if f["evidence"]]
    if not with_evidence:
        pytest.skip("no finding with evidence on this run (no rule registered yet?)")
    frame = open_tab(run=resnet)
    ready(frame)
    heads = frame.locator("button.fhead")
    target = next(i for i in range(heads.count())
                  if heads.nth(i).locator(".fsub").inner_text().split(" · ")[0]
                  == with_evidence[0]["rule"])
    heads.nth(target).click()
    expect(heads.nth(target)).to_have_attribute("aria-expanded", "true")
    body = frame.locator(".finding.open .fbody")
    expect(body).to_contain_text(with_evidence[0]["message"][:40])
    expect(body.locator("h4", has_text="How to confirm")).to_be_visible()
    body.locator(".evidence button").first.click()
    row = str(with_evidence[0]["evidence"][0]["row"])
    tl = frame.locator(".tl")
    expect(tl).to_have_attribute("data-selected-row", row, timeout=READY)
    assert row in tl.get_attribute("data-highlight").split(",")
    expect(frame.locator(".tl-info .sel")).to_contain_text(
        with_evidence[0]["evidence"][0]["name"][:20])
    # the finding is in the shared URL
    assert f"p.diagnostics.finding={with_evidence[0]['rule']}" in unquote(
        page.evaluate("location.hash"))
    shot(page, artifacts, "tab-resnet50-evidence.png")


def test_cpu_matmul_run(page, open_tab, artifacts):
    frame = open_tab(run="matmul_add-size64-cpu")
    ready(frame)
    expect(frame.locator(".topbar .device")).to_contain_text("CPU only")
    expect(frame.locator("#headline .chip")).to_have_text("overhead-bound")
    expect(frame.locator("#headline .notes")).to_contain_text("CPU-only trace")
    tree = frame.locator("#tree")
    expect(tree.locator("[role=treeitem]").first).to_contain_text("ProfilerStep#")
    expect(tree).to_contain_text("aten::matmul")
    expect(tree).to_contain_text("aten::mm")
    shot(page, artifacts, "tab-cpu-matmul-add.png")


def test_keyboard_and_shareable_state(page, open_tab, resnet):
    frame = open_tab(run=resnet, step="7")
    ready(frame)
    selected = frame.locator('#steps tbody tr[aria-selected="true"]')
    expect(selected).to_contain_text("#7")
    selected.focus()
    page.keyboard.press("ArrowDown")
    expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text("#8")
    page.wait_for_function("location.hash.includes('p.diagnostics.step=8')")
    # a tree node opens and closes from the keyboard (once step 8's tree is in)
    expect(frame.locator("#tree [role=treeitem]").first).to_contain_text("ProfilerStep#8")
    ready(frame)
    node = frame.locator("#tree [role=treeitem][aria-expanded]").first
    node.focus()
    expanded = node.get_attribute("aria-expanded")
    page.keyboard.press("Enter")
    flipped = "false" if expanded == "true" else "true"
    expect(frame.locator("#tree [role=treeitem][aria-expanded]").first).to_have_attribute(
        "aria-expanded", flipped)
    # the same URL opens the same view
    page.reload()
    frame = page.frame_locator('iframe[src*="plugin_entry.html?name=diagnostics"]')
    ready(frame)
    expect(frame.locator('#steps tbody tr[aria-selected="true"]')).to_contain_text("#8")


def test_sorting_the_step_table(page, open_tab, resnet):
    frame = open_tab(run=resnet)
    ready(frame)
    frame.locator("#steps th button", has_text="Wall ms").click()  # longest first
    expect(frame.locator("#steps tbody tr").first).to_contain_text("#5")
    expect(frame.locator("#steps th[aria-sort]")).to_have_attribute("aria-sort", "descending")
    frame.locator("#steps th button", has_text="Wall ms").click()
    expect(frame.locator("#steps tbody tr").first).to_contain_text("#10")


def test_follows_tensorboards_dark_mode(page, open_tab, resnet, artifacts):
    frame = open_tab(run=resnet)
    ready(frame)
    html = frame.locator("html")
    expect(html).not_to_have_class("dark")
    page.evaluate("document.body.classList.add('dark-mode')")  # what TB's theme switch does
    expect(html).to_have_class("dark")
    shot(page, artifacts, "tab-resnet50-dark.png")
    page.evaluate("document.body.classList.remove('dark-mode')")
    expect(html).not_to_have_class("dark")


def test_unreadable_file_is_named(page, open_tab, artifacts):
    frame = open_tab(run="broken")
    ready(frame, "error")
    err = frame.locator("#span-error")
    expect(err).to_contain_text("This trace file cannot be read")
    expect(err).to_contain_text("broken/worker0.1.pt.trace.json")
    shot(page, artifacts, "tab-unreadable-file.png")


def test_event_names_are_text_not_html(page, open_tab):
    frame = open_tab(run="hostile")
    ready(frame)
    expect(frame.locator("#tree")).to_contain_text('<img src=x onerror="alert(1)">')
    assert frame.locator("img").count() == 0
    frame.locator(".tl canvas").last.hover(position={"x": 400, "y": 25})
    assert frame.locator("img").count() == 0


def test_empty_log_dir_explains_how_to_make_traces(page, open_tab, start_tensorboard, tmp_path,
                                                   artifacts):
    (tmp_path / "log").mkdir()
    tb = start_tensorboard(tmp_path / "log")
    try:
        frame = open_tab(tb)
        ready(frame, "empty")
        empty = frame.locator("#empty")
        expect(empty).to_contain_text("No PyTorch profiler traces yet")
        expect(empty.locator("pre")).to_contain_text("tensorboard_trace_handler")
        expect(empty.locator("pre")).to_contain_text("prof.step()")
        expect(empty).to_contain_text("workloads/")
        shot(page, artifacts, "tab-empty-logdir.png")
    finally:
        tb.stop()


def test_reload_button_picks_up_new_runs(page, open_tab, logdir):
    frame = open_tab(run="hostile")
    ready(frame)
    runs = frame.locator('select[aria-label="run"] option')
    before = runs.count()
    late = logdir / "zz_late_run"
    late.mkdir(exist_ok=True)
    (late / "worker0.7.pt.trace.json").write_text(
        (logdir / "hostile" / "worker0.1.pt.trace.json").read_text())
    page.wait_for_timeout(1100)  # the run list is at most a second old
    page.locator("button.reload-button").click()  # TensorBoard's reload: DataReloaded
    expect(runs).to_have_count(before + 1)
    expect(runs.last).to_have_text("zz_late_run")
    expect(frame.locator('select[aria-label="run"]')).to_have_value("hostile")
