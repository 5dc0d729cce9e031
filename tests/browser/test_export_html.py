"""``tb-diagnostics export --format html``: opened from disk in headless Chromium, offline.

The context is offline and every request other than the file itself is
aborted and recorded: the page must render its chart, findings with evidence
and the dispatch chain, and ask for nothing.
"""

from __future__ import annotations

import shutil

from tb_diagnostics.cli import main

from .conftest import ARTIFACTS, CPU_RUN, REPO


def test_html_export_renders_offline_without_requests(browser, tmp_path, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path / "cache"))
    shutil.copytree(REPO / "log" / CPU_RUN, tmp_path / "log" / CPU_RUN)
    out = tmp_path / "moved" / "report.html"
    out.parent.mkdir()
    assert main(["export", str(tmp_path / "log"), "--format", "html", "-o", str(out),
                 "--workers", "1"]) == 0

    context = browser.new_context(offline=True, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    url = out.as_uri()
    requests, blocked, problems = [], [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("requestfailed", lambda r: blocked.append(r.url) if r.url != url else None)
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.route("**/*", lambda route: route.continue_() if route.request.url == url
               else route.abort())
    try:
        page.goto(url)
        assert page.locator("h1").inner_text() == "tb-diagnostics report"
        assert "overhead-bound" in page.locator(".headline").inner_text()
        # The step chart: five steps, each at least one visible bar.
        chart = page.locator("svg.stepchart")
        assert chart.is_visible() and chart.bounding_box()["height"] > 100
        assert page.locator("svg.stepchart rect.bar").count() >= 5
        assert page.locator("table.steps tr").count() == 6
        # Findings open to their evidence.
        finding = page.locator("details.finding", has_text="cold-start-step")
        finding.locator("summary").click()
        assert finding.locator("table.evidence").is_visible()
        assert finding.locator("table.evidence tr").count() >= 2
        # The dispatch chain opens down its heaviest path.
        assert page.locator("details.chain[open]").count() >= 2
        assert "aten::" in page.locator("details.chain").first.inner_text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "export-html.png"), full_page=True)
    finally:
        context.close()
    assert requests == [url], requests
    assert not blocked and not problems, (blocked, problems)
