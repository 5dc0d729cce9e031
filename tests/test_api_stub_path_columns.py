"""The steps records and DataFrame carry the trailing stub (issue 29 item 1) and the critical
path's split (issue 27 item 5) as columns, and ``STEP_COLUMNS`` and ``Report.steps``' docstring
name what ``steps()`` gives."""

from __future__ import annotations

import math

import pytest
from rules.conftest import TraceBuilder
from test_trailing_stub import _stub_trace

import tb_diagnostics
from tb_diagnostics.api import STEP_COLUMNS, Report

PATH_COLUMNS = ("path_host_us", "path_input_us", "path_device_us", "path_comm_us",
                "path_latency_us")


def test_stub_and_path_columns_are_listed_and_documented():
    for col in ("stub", *PATH_COLUMNS):
        assert col in STEP_COLUMNS, col
        assert f"``{col}``" in Report.steps.__doc__, col
    assert "``critical_path``" in Report.steps.__doc__
    assert STEP_COLUMNS.index("stub") == STEP_COLUMNS.index("cold") + 1


def test_a_trailing_stub_and_each_steps_path_split_in_the_records(tmp_path):
    pytest.importorskip("pandas")
    b = TraceBuilder(tmp_path / "log")
    _stub_trace(b)
    b.write()
    report = tb_diagnostics.analyze(tmp_path / "log", cache=False)
    rows = report.steps()
    assert [r["step"] for r in rows] == [7, 8]
    assert [r["stub"] for r in rows] == [False, True]
    for r in rows:
        cp = r["critical_path"]
        # One column per kind of the path, each the document's figure; they add up.
        assert {k: r[f"path_{k}_us"] for k in cp["by_kind"]} == cp["by_kind"]
        assert sum(r[c] for c in PATH_COLUMNS) == pytest.approx(cp["total_us"], abs=1e-2)
    # Step 7 waits on its host's launches (the device is mostly idle), not on nothing.
    assert rows[0]["path_host_us"] > 0
    df = report.steps_frame()
    assert list(df.columns[:len(STEP_COLUMNS)]) == list(STEP_COLUMNS)
    assert df["stub"].tolist() == [False, True]
    assert df["path_host_us"].tolist() == [r["path_host_us"] for r in rows]


def test_a_document_without_paths_still_has_the_columns(tmp_path):
    pytest.importorskip("pandas")
    b = TraceBuilder(tmp_path / "log")
    _stub_trace(b)
    b.write()
    report = tb_diagnostics.analyze(tmp_path / "log", cache=False)
    for run in report.document["runs"]:
        for w in run["workers"]:
            for s in w["spans"]:
                for st in s["steps"]:
                    del st["critical_path"]
    assert not any(k.startswith("path_") for r in report.steps() for k in r)
    df = report.steps_frame()
    assert list(df.columns[:len(STEP_COLUMNS)]) == list(STEP_COLUMNS)
    assert all(math.isnan(v) for c in PATH_COLUMNS for v in df[c])
