"""The compare picker knows every run's device on a fresh session, before any run is
analysed (issue 29 item 9): /runs gives each file's device from its header, so the
picker puts the same-device runs first and marks the others at once, each option's
title saying where its device was read. Screenshots of the picker (drawn as a list box,
a closed select shows one line) in both themes go to the artifacts directory.
"""

from __future__ import annotations

import shutil
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .conftest import FRAME, READY, SHARED_TRACES, TensorBoard

CANDIDATE = "kineto_resnet50_v100_dataloader_workers0"  # 4 x Tesla V100-DGXS-32GB
SAME = "kineto_resnet50_v100_dataloader_workers4"  # the same machine
OTHERS = {  # run -> its mark, from its header or (small files) the whole file
    "hta_amd_mi250_rocm_tiny": "other device: ROCm · AMD Radeon Graphics",
    "hta_cpu_only_gloo_rank34": "other device: CPU",
    "hta_v100_resnet_ns_timeunit": "other device: CUDA · Tesla V100-SXM2-32GB",
}
UNKNOWN = ["broken", "kineto_2021jan_resnet50_profiler_api"]  # no deviceProperties; garbage


@pytest.fixture(scope="module")
def tb(tmp_path_factory, artifacts):
    runs = [CANDIDATE, SAME, *OTHERS, UNKNOWN[1]]
    if not all((SHARED_TRACES / r).is_dir() for r in runs):
        pytest.skip("needs ../shared/traces")
    log = tmp_path_factory.mktemp("picker-log")
    for r in runs:
        shutil.copytree(SHARED_TRACES / r, log / r)
    (log / "broken").mkdir()
    (log / "broken" / "worker0.1.pt.trace.json.gz").write_bytes(b"\x1f\x8b\x08garbage")
    # A fresh cache: nothing of these runs analysed before.
    server = TensorBoard(log, tmp_path_factory.mktemp("picker-cache"),
                         artifacts / "tensorboard-picker.log")
    yield server
    server.stop()


def _options(frame, group: str):
    return frame.locator(f"#compare select optgroup[label^='{group}'] option")


def _shoot(page, frame, artifacts: Path, name: str) -> None:
    sel = frame.locator("#compare select")
    n = sel.locator("option, optgroup").count()
    sel.evaluate(f"s => {{ s.size = {n}; }}")  # every option in view, as a list box
    for dark in (False, True):
        page.evaluate(f"document.body.classList.{'add' if dark else 'remove'}('dark-mode')")
        page.wait_for_timeout(250)
        frame.locator("#compare").screenshot(
            path=str(artifacts / f"{name}-{'dark' if dark else 'light'}.png"))
    page.evaluate("document.body.classList.remove('dark-mode')")
    sel.evaluate("s => { s.size = 0; }")


def test_the_picker_sorts_by_device_before_any_run_is_analysed(page, tb, artifacts):
    page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={CANDIDATE}")
    frame = page.frame_locator(FRAME)
    same = _options(frame, "same device")
    # Right away, while the candidate (a 35 MB trace) is still loading: its own device
    # from its header heads the list, the other runs marked, unknown ones last.
    expect(frame.locator("#compare select optgroup").first).to_have_attribute(
        "label", "same device (CUDA · Tesla V100-DGXS-32GB)", timeout=READY)
    # Read before the candidate's analysis is in (it takes seconds to decode).
    assert frame.locator("body").get_attribute("data-ready") != "true"
    expect(same).to_have_text([SAME])
    expect(_options(frame, "other devices")).to_have_text(
        [f"{r} ({mark})" for r, mark in sorted(OTHERS.items())])
    expect(_options(frame, "device unknown")).to_have_text(
        [f"{r} (device unknown)" for r in UNKNOWN])
    labels = [frame.locator("#compare select optgroup").nth(i).get_attribute("label")
              for i in range(3)]
    assert labels == ["same device (CUDA · Tesla V100-DGXS-32GB)", "other devices",
                      "device unknown"]
    # Where each device was read: headers, a small file read whole, or why it is unknown.
    assert same.first.get_attribute("title").startswith(
        "from the file's header: deviceProperties lists 4 GPUs")
    other = _options(frame, "other devices")
    assert other.nth(0).get_attribute("title") == "from the whole file (a small trace)"
    assert other.nth(2).get_attribute("title").startswith("from the file's header")
    unknown = _options(frame, "device unknown")
    assert "gzip" in unknown.nth(0).get_attribute("title")
    assert unknown.nth(1).get_attribute("title") == (
        "device unknown: no deviceProperties before the events")
    _shoot(page, frame, artifacts, "tab-compare-picker-devices")

    # Once the candidate is analysed its device (the analysis') keeps the same order.
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)
    expect(same).to_have_text([SAME])
    expect(frame.locator("#compare select optgroup").first).to_have_attribute(
        "label", "same device (CUDA · Tesla V100-DGXS-32GB)")
    # No other run was loaded to find its device.
    for r in tb.json("runs")["runs"]:
        states = {s["state"] for w in r["workers"] for s in w["spans"]}
        if r["run"] != CANDIDATE:
            assert states == {"unloaded"}, (r["run"], states)


def test_a_cpu_candidate_has_every_gpu_run_marked(page, tb):
    run = "hta_cpu_only_gloo_rank34"  # the only CPU run: no same-device group at all
    page.goto(f"{tb.url}/#diagnostics&p.diagnostics.run={urllib.parse.quote(run)}")
    frame = page.frame_locator(FRAME)
    groups = frame.locator("#compare select optgroup")
    expect(groups).to_have_count(2, timeout=READY)
    assert [groups.nth(i).get_attribute("label") for i in range(2)] == [
        "other devices", "device unknown"]
    v100 = "other device: CUDA · Tesla V100-DGXS-32GB"
    expect(_options(frame, "other devices")).to_have_text([
        f"hta_amd_mi250_rocm_tiny ({OTHERS['hta_amd_mi250_rocm_tiny']})",
        f"hta_v100_resnet_ns_timeunit ({OTHERS['hta_v100_resnet_ns_timeunit']})",
        f"{CANDIDATE} ({v100})", f"{SAME} ({v100})"])
