"""The steps DataFrame leads with the step figures a notebook asks for first: compute busy
(what the verdict reads), the verdict and its reason, cold, and the launch backlog."""

from __future__ import annotations

import pytest
from rules.conftest import TraceBuilder
from rules.test_launch_backlog_drain import drain_steps

import tb_diagnostics
from tb_diagnostics.api import STEP_COLUMNS


def test_the_steps_frame_leads_with_compute_verdict_cold_and_backlog(tmp_path):
    pytest.importorskip("pandas")
    b = TraceBuilder(tmp_path / "log")
    drain_steps(b)
    b.write()
    df = tb_diagnostics.analyze(tmp_path / "log").steps_frame()
    assert list(df.columns[:len(STEP_COLUMNS)]) == list(STEP_COLUMNS)
    for col in ("compute_busy_us", "compute_busy", "exposed_collective_us", "verdict_reason",
                "cold", "backlog_start_us", "backlog_trend", "host_limited"):
        assert col in STEP_COLUMNS, col
    second = df.iloc[1]
    assert (second["compute_busy"], second["cold"], second["host_limited"]) == (1.0, False, True)
    assert second["verdict"] == "overhead-bound" and second["backlog_trend"] == "draining"
    assert second["verdict_reason"].startswith("the host issues a step every 119 µs")
    assert df.iloc[0]["cold"]
