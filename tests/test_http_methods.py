"""Every route of the Diagnostics tab is GET-only (issue 22, case 15d): HEAD answers as
GET does without a body, any other method gets 405 with ``Allow: GET, HEAD``, through
TensorBoard's own WSGI app."""

from __future__ import annotations

import argparse
import json

import pytest
from tensorboard.plugins import base_plugin
from test_tb_plugin import BASE, get_ready, small_run, tb_app

from conftest import TraceBuilder
from tb_diagnostics.report.views import all_views
from tb_diagnostics.tb_plugin import DiagnosticsPlugin

#: A URL for each route pattern of get_plugin_apps (a span that exists, a real static file).
QUERY = "run=r&worker=w&span=1"
URLS = {"/index.js": "/index.js", "/static/*": "/static/app/main.js", "/runs": "/runs",
        "/span": f"/span?{QUERY}", "/step": f"/step?{QUERY}&step=1", "/progress": "/progress",
        "/run": "/run?run=r", "/compare": "/compare?baseline=r&candidate=r"}
#: The table views (report/views) share one route: ask for the first one there is.
_VIEW = next(iter(sorted(all_views())), None)
URLS["/view"] = f"/view?name={_VIEW}&{QUERY}" if _VIEW else "/view?name=none"
URLS["/timeline"] = f"/timeline?{QUERY}&width=400"
URLS["/chrome_trace"] = f"/chrome_trace?{QUERY}&step=1"  # after the others: span loaded
#: What a GET answers: a bad view name is a 400 (JSON), the rest 200.
STATUS = {"/view": 200 if _VIEW else 400}
OTHER_METHODS = ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"]


def _routes() -> list[str]:
    ctx = base_plugin.TBContext(logdir="", flags=argparse.Namespace(logdir_spec=""))
    return sorted(DiagnosticsPlugin(ctx).get_plugin_apps())


def test_every_route_has_a_url_here():
    assert sorted(URLS) == _routes()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("log")
    small_run(TraceBuilder(device_properties=[{"id": 0, "name": "Test GPU",
                                               "totalGlobalMem": 1}])).write(
        logdir / "r" / "w.1.pt.trace.json")
    c = tb_app(["--logdir", str(logdir)])
    for route, url in URLS.items():  # loaded, so GET and HEAD below see the same answer
        assert get_ready(c, BASE + url).status_code == STATUS.get(route, 200), url
    return c


@pytest.mark.parametrize("method", OTHER_METHODS)
@pytest.mark.parametrize("route", sorted(URLS))
def test_other_methods_get_405(client, route, method):
    r = client.open(BASE + URLS[route], method=method)
    assert r.status_code == 405
    assert r.headers["Allow"] == "GET, HEAD"
    assert f"method {method} not allowed" in json.loads(r.data)["error"]


@pytest.mark.parametrize("route", sorted(URLS))
def test_head_answers_as_get_without_a_body(client, route):
    get = client.get(BASE + URLS[route])
    head = client.head(BASE + URLS[route])
    assert (head.status_code, head.content_type) == (get.status_code, get.content_type)
    assert get.status_code == STATUS.get(route, 200) and get.data
    assert head.data == b""
