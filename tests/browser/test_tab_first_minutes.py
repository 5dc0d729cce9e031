"""What a new user tripped on in the tab (issue 29 items 4, 5, 6, 9), on the shipped runs:

- a distributed run's run-level findings are listed in Findings, marked and counted, and
  What-if says why a cross-rank wait is not replayed;
- the Timeline card is as tall as its lanes, not as the dispatch chain beside it, and its
  header says how many of the step's events it shows;
- a run in the URL that the log dir lacks is said so, with the runs, and nothing opens
  by itself;
- the compare picker puts runs on the same device first and marks the others.

Screenshots in both themes go to the artifacts directory.
"""

from __future__ import annotations

import re
import shutil
import time
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import FRAME, READY, TensorBoard, open_run

REPO = Path(__file__).resolve().parents[2]
DIST = "distributed-ws2-straggler1-cpu"
RESNET = "resnet50-workers0-v100"
CPU = "matmul_add-size64-cpu"


@pytest.fixture(scope="module")
def tb(tmp_path_factory, artifacts):
    log = tmp_path_factory.mktemp("first-minutes-log")
    for run in (DIST, RESNET, CPU):
        if not (REPO / "log" / run).is_dir():
            pytest.skip(f"./log/{run} is not in this checkout")
        shutil.copytree(REPO / "log" / run, log / run)
    server = TensorBoard(log, tmp_path_factory.mktemp("first-minutes-cache"),
                         artifacts / "tensorboard-first-minutes.log")
    yield server
    server.stop()


def _dark(page, on: bool) -> None:
    page.evaluate(f"document.body.classList.{'add' if on else 'remove'}('dark-mode')")
    page.wait_for_timeout(250)


def _shoot(page, frame, selector: str, artifacts: Path, name: str) -> None:
    for dark in (False, True):
        _dark(page, dark)
        frame.locator(selector).scroll_into_view_if_needed()
        frame.locator(selector).screenshot(
            path=str(artifacts / f"{name}-{'dark' if dark else 'light'}.png"))
    _dark(page, False)


def _wait_loaded(tb: TensorBoard, run: str) -> None:
    """Have the server load ``run``'s first span (so /runs knows its device)."""
    deadline = time.monotonic() + READY / 1000
    while True:
        r = next(x for x in tb.json("runs")["runs"] if x["run"] == run)
        w = r["workers"][0]
        q = urllib.parse.urlencode({"run": run, "worker": w["worker"],
                                    "span": w["spans"][0]["span"]})
        if tb.json(f"span?{q}").get("summary"):
            return
        assert time.monotonic() < deadline, f"{run} did not load"
        time.sleep(0.3)


def test_run_level_findings_are_listed_marked_and_counted(page, tb, artifacts):
    frame = open_run(page, tb, DIST)
    findings = frame.locator("#findings")
    run_level = findings.locator(".finding.run-level")
    expect(run_level).to_have_count(2, timeout=READY)  # straggler, comm imbalance
    expect(run_level.first.locator(".badge.run-level")).to_have_text("run-level")
    expect(findings.locator("div.finding[data-key='run:distributed-straggler.0']")).to_contain_text(
        "A straggler rank holds the others back")
    total = findings.locator(".finding").count()
    expect(findings.locator(".card-tools")).to_have_text(
        f"{total} (2 run-level) · by severity, then savings")
    # The straggler is critical: it heads the critical group, with its saving.
    first = findings.locator(".sev-group").first
    expect(first.locator("h3")).to_contain_text("critical")
    expect(first.locator(".finding").first).to_have_attribute(
        "data-key", "run:distributed-straggler.0")
    # What-if: why the exposed communication is not replayed, not "Nothing to replay".
    wi = frame.locator("#whatif-empty")
    expect(wi).to_contain_text("Communication is not replayed.")
    expect(wi).to_contain_text("one rank's trace cannot replay another's")
    expect(wi).not_to_contain_text("Nothing to replay")
    assert re.search(r"[\d.]+ ms of the median warm step \(\d+%\) is communication not "
                     r"hidden by compute", wi.inner_text())
    # Open the straggler: its cells open the ranks' steps, like the heat map's.
    findings.locator("button.fhead[data-key='run:distributed-straggler.0']").click()
    cell = findings.locator(".fbody .evidence button").first
    expect(cell).to_contain_text("rank 1 · step 3")
    _shoot(page, frame, "#findings", artifacts, "tab-run-level-findings")
    _shoot(page, frame, "#whatif", artifacts, "tab-whatif-comm")
    cell.click()
    page.wait_for_function("location.hash.includes('p.diagnostics.worker=rank1')")
    page.wait_for_function("location.hash.includes('p.diagnostics.step=3')")
    # Rank 1's span: the run-level findings stay listed (they are the run's).
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    expect(findings.locator(".finding.run-level")).to_have_count(2)


def test_the_timeline_card_is_as_tall_as_its_lanes(page, tb, artifacts):
    frame = open_run(page, tb, RESNET)
    card = frame.locator("#timeline")
    count = card.locator("#timeline-count")
    expect(count).to_have_text(re.compile(r"^shows [\d,]+ of [\d,]+ events \(the longest\)$"))
    shown, total = (int(x.replace(",", "")) for x in
                    re.findall(r"[\d,]+", count.inner_text()))
    assert shown < total
    # The footer says the same numbers.
    expect(card.locator(".tl-info")).to_contain_text(f"{shown:,} of {total:,} events")
    tree = frame.locator("#tree").bounding_box()
    box = card.bounding_box()
    lanes = card.locator(".tl-scroll canvas").bounding_box()
    head = card.locator(".card-head").bounding_box()
    info = card.locator(".tl-info").bounding_box()
    axis = card.locator("canvas.tl-axis").first.bounding_box()
    # Header, axis, lanes and footer fill the card: no blank space below the lanes.
    inner = head["height"] + axis["height"] + lanes["height"] + info["height"]
    assert box["height"] <= inner + 12, (box, inner)
    assert tree["height"] > box["height"] + 200  # the dispatch chain is the tall one
    _shoot(page, frame, "#timeline", artifacts, "tab-timeline-resnet")


def test_an_unknown_run_in_the_url_is_said_so(page, tb, artifacts):
    page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run=no-such-run")
    frame = page.frame_locator(FRAME)
    expect(frame.locator("body")).to_have_attribute("data-ready", "missing", timeout=READY)
    box = frame.locator("#missing-run")
    expect(box.locator("h1")).to_have_text("Run no-such-run not found in this log dir")
    runs = sorted([DIST, RESNET, CPU])
    expect(box.locator(".runs-list li")).to_have_text(runs)
    expect(box.locator("#open-first-run")).to_have_text(f"Open {runs[0]}")
    # Nothing opened by itself: no headline, no cards, and the URL keeps the name asked for.
    expect(frame.locator("#headline")).to_be_hidden()
    expect(frame.locator("#findings")).to_have_count(0)
    assert "p.diagnostics.run=no-such-run" in page.evaluate("location.hash")
    _shoot(page, frame, "#missing-run", artifacts, "tab-unknown-run")
    box.locator(".runs-list button", has_text=CPU).click()
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    page.wait_for_function(f"location.hash.includes('p.diagnostics.run={CPU}')")


def test_the_compare_picker_marks_runs_on_another_device(page, tb):
    _wait_loaded(tb, CPU)
    frame = open_run(page, tb, RESNET)
    options = frame.locator("#compare select option")
    other = frame.locator("#compare select optgroup[label='other devices'] option")
    expect(other.filter(has_text=CPU)).to_have_text(f"{CPU} (other device: CPU)", timeout=READY)
    expect(frame.locator("#compare select optgroup[label^='same device']")).to_have_count(0)
    # A run whose device is not known is marked so, never offered unmarked.
    labels = options.all_inner_texts()
    assert labels[0] == "— pick a run —"
    assert all(re.search(r"\((other device: .+|device not read yet|device unknown)\)$", t)
               for t in labels[1:])
    # A CPU candidate: the other CPU run (once read) is on its device, the GPU one marked.
    _wait_loaded(tb, DIST)
    frame = open_run(page, tb, CPU)
    same = frame.locator("#compare select optgroup[label='same device (CPU)'] option")
    expect(same).to_have_text([DIST], timeout=READY)
    expect(frame.locator("#compare select optgroup[label='other devices'] option")).to_have_text(
        [re.compile(rf"^{RESNET} \(other device: CUDA( · .+)?\)$")])
