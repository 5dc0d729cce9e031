"""The table views' common parts (report/views): parameters, paging, steps, the route."""

from __future__ import annotations

import pytest

from conftest import TraceBuilder, analyse
from tb_diagnostics.report.views import (
    MAX_LIMIT,
    ViewParamError,
    ViewParams,
    page,
    step_window,
)


def test_params_from_a_query_are_bounded_and_checked():
    p = ViewParams.from_query({"step": "3", "sort": "-calls", "limit": "100000", "offset": "-5",
                               "q": "mm", "name": "ops", "run": "r", "precision": "bf16"})
    assert (p.step, p.sort, p.q, p.limit, p.offset) == ("3", "-calls", "mm", MAX_LIMIT, 0)
    assert p.extra == {"precision": "bf16"}  # view-specific, passed on as given
    with pytest.raises(ViewParamError, match="limit must be an integer"):
        ViewParams.from_query({"limit": "ten"})


def test_page_filters_sorts_with_none_last_and_cuts():
    rows = [{"name": "aten::mm", "us": 5.0}, {"name": "aten::add", "us": None},
            {"name": "aten::bmm", "us": 9.0}, {"name": "Memcpy", "us": 1.0}]
    got, total = page(rows, ViewParams(sort="-us", q="MM", limit=1))
    assert total == 2 and got == [{"name": "aten::bmm", "us": 9.0}]
    got, total = page(rows, ViewParams(sort="us", offset=1))
    assert total == 4 and [r["name"] for r in got] == ["aten::mm", "aten::bmm", "aten::add"]
    with pytest.raises(ViewParamError, match="no column 'calls'"):
        page(rows, ViewParams(sort="calls"))


def test_step_window_finds_a_step_by_number(tmp_path):
    b = TraceBuilder()
    b.step(4, 0, 100)
    b.step(5, 100, 100)
    a = analyse(b, tmp_path)
    assert step_window(a, None) is None and step_window(a, "all") is None
    assert step_window(a, "5") == 1
    with pytest.raises(ViewParamError, match="no step 7"):
        step_window(a, "7")
    with pytest.raises(ViewParamError, match="step must be a step number"):
        step_window(a, "x")


def test_the_view_route_refuses_an_unknown_view(tmp_path):
    from tb_diagnostics.server.provider import BadRequest, DataProvider

    provider = DataProvider(str(tmp_path), None, cache=None)
    with pytest.raises(BadRequest, match="name must be one of"):
        provider.view("no-such-view", "r", "w", "s", {})
