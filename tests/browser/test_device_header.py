"""The span header names the device as the compare picker does: "ROCm", not "ROCM"."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SHARED_TRACES, TensorBoard, open_run, shared_runs_logdir

MI250 = "hta_amd_mi250_rocm_tiny"


def test_the_span_header_names_a_rocm_device(page, tmp_path_factory, artifacts):
    if not (SHARED_TRACES / MI250).is_dir():
        pytest.skip(f"{MI250} is not in ../shared/traces")
    logdir = shared_runs_logdir(tmp_path_factory, "rocm", (MI250,))
    tb = TensorBoard(logdir, tmp_path_factory.mktemp("rocm-cache"),
                     artifacts / "tensorboard-rocm.log")
    try:
        frame = open_run(page, tb, MI250)
        expect(frame.locator(".device")).to_contain_text("ROCm · AMD")
    finally:
        tb.stop()
