"""The notebook fragment (``Report._repr_html_``) rendered in Chromium inside host pages
like a notebook's: light, JupyterLab-dark-like (its CSS variables), VS Code-dark-like
(its variables) and a page whose only hint is ``prefers-color-scheme: dark``.

On each: the fragment paints its own background, the host's where the host names one;
its title, headings, verdicts, legend, chart labels and notes keep a contrast of at least
4.5:1 against what is really behind them; it opens on the summary (every run's details
closed, the top findings and the verdict table's head on the first screen). Screenshots
go to the test artifacts (see conftest).
"""

from __future__ import annotations

import pytest

import tb_diagnostics

from .conftest import ARTIFACTS, REPO

#: A notebook's first screen: the viewport the fold is measured in.
VIEWPORT = {"width": 1280, "height": 800}
#: WCAG AA for body text.
MIN_CONTRAST = 4.5

_JUPYTERLAB_DARK = """:root{--jp-layout-color0:#111111;--jp-layout-color1:#212121;
--jp-layout-color2:#424242;--jp-ui-font-color1:rgba(255,255,255,.87);
--jp-ui-font-color2:rgba(255,255,255,.54);--jp-content-font-color1:rgba(255,255,255,1);
--jp-content-font-color2:rgba(255,255,255,.7);--jp-border-color2:#424242}
body{background:var(--jp-layout-color0);color:var(--jp-ui-font-color1)}"""
_JUPYTERLAB_LIGHT = """:root{--jp-layout-color0:#ffffff;--jp-layout-color1:#ffffff;
--jp-ui-font-color1:rgba(0,0,0,.87);--jp-ui-font-color2:rgba(0,0,0,.54);
--jp-content-font-color1:rgba(0,0,0,.87);--jp-content-font-color2:rgba(0,0,0,.54);
--jp-border-color2:#e0e0e0}body{background:var(--jp-layout-color0)}"""
_VSCODE_DARK = """:root{--vscode-editor-foreground:#cccccc;--vscode-editor-background:#1f1f1f;
--vscode-descriptionForeground:#ccccccb3;--vscode-panel-border:#2b2b2b}
body{background:var(--vscode-editor-background);color:var(--vscode-editor-foreground)}"""
#: A page that follows the scheme itself and names no variable.
_SCHEME_PAGE = """body{background:#fff;color:#000}
@media (prefers-color-scheme:dark){body{background:#181818;color:#ddd}}"""

#: host: (emulated colour scheme, host page CSS, the fragment's expected background, dark?)
HOSTS = {
    "light": ("light", _SCHEME_PAGE, "rgb(255, 255, 255)", False),
    "scheme-dark": ("dark", _SCHEME_PAGE, "rgb(32, 33, 36)", True),
    "jupyterlab-dark": ("light", _JUPYTERLAB_DARK, "rgb(17, 17, 17)", True),
    # JupyterLab's light theme on a machine set to dark: the notebook's theme wins.
    "jupyterlab-light-os-dark": ("dark", _JUPYTERLAB_LIGHT, "rgb(255, 255, 255)", False),
    "vscode-dark": ("light", _VSCODE_DARK, "rgb(31, 31, 31)", True),
}

#: Contrast of each element matching a selector against the colours really behind it
#: (translucent text and backgrounds composited up to the first opaque one).
_CONTRASTS = """(sel) => {
  const parse = (s) => {
    const m = s.match(/rgba?\\(([^)]*)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, bottom) => [0, 1, 2].map(
    (i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const behind = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let base = [255, 255, 255, 1];
    for (const c of layers.reverse()) base = over(c, base);
    return base;
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  return [...document.querySelectorAll(sel)].map((el) => {
    const st = getComputedStyle(el);
    const bg = behind(el);
    const fg = over(parse(el instanceof SVGElement ? st.fill : st.color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    return {text: (el.textContent || "").trim().slice(0, 40), ratio: (a + 0.05) / (b + 0.05)};
  });
}"""

#: What must stay readable on the first screen, and inside an opened run.
_SUMMARY = ("h1", "h2", ".tbd-summary th", ".tbd-summary .verdict", ".tbd-top li",
            "details.run > summary", ".note")
_DETAILS = ("details.run[open] h2", "details.run[open] h3", "details.run[open] .headline",
            "details.run[open] .legend span",
            "details.run[open] svg.stepchart text:not(.clipped)",
            "details.run[open] .sev", "details.run[open] table.steps td",
            "details.run[open] .note")


@pytest.fixture(scope="module")
def fragment() -> str:
    """The fragment of the sample log dir shipped in ./log (analysed here, no cache)."""
    if not any((REPO / "log").glob("*/*.pt.trace.json*")):
        pytest.skip("the sample log dir ./log is not in this checkout")
    return tb_diagnostics.analyze(REPO / "log", cache=False, workers=1)._repr_html_()


def _host_page(css: str, fragment: str) -> str:
    # A notebook's output area: the fragment sits in the page's own element, indented.
    return (f"<!doctype html><html><head><style>{css}</style></head><body>"
            f'<div class="jp-OutputArea-output" style="margin:8px 0 8px 90px">{fragment}'
            "</div></body></html>")


def _low(page, selectors: tuple[str, ...]) -> list[tuple[str, str, float]]:
    """(selector, text, ratio) of every matching element under the minimum contrast;
    each selector must match something."""
    low = []
    for sel in selectors:
        found = page.evaluate(_CONTRASTS, f".tbd-report {sel}")
        assert found, f"nothing matches {sel}"
        low.extend((sel, x["text"], round(x["ratio"], 2)) for x in found
                   if x["ratio"] < MIN_CONTRAST)
    return low


@pytest.mark.parametrize("host", list(HOSTS))
def test_fragment_follows_the_host_theme_and_opens_on_the_summary(browser, fragment, host):
    scheme, css, background, dark = HOSTS[host]
    context = browser.new_context(viewport=VIEWPORT, color_scheme=scheme)
    page = context.new_page()
    try:
        page.set_content(_host_page(css, fragment))
        root = page.locator(".tbd-report")
        # Its own opaque background: the host's where the host names one, else the scheme's.
        assert root.evaluate("e => getComputedStyle(e).backgroundColor") == background
        assert _low(page, _SUMMARY) == []

        # The first screen is the summary: every run folded, the top findings and the
        # verdict table's head above the fold, the runs' details after the table.
        runs = page.locator(".tbd-report details.run")
        assert runs.count() >= 20 and page.locator(".tbd-report details[open]").count() == 0
        assert page.locator(".tbd-report ul.tbd-top li").count() >= 3
        top = page.locator(".tbd-report ul.tbd-top").bounding_box()
        head = page.locator(".tbd-report table.tbd-summary tr").first.bounding_box()
        table = page.locator(".tbd-report table.tbd-summary").bounding_box()
        assert top["y"] + top["height"] <= VIEWPORT["height"]
        assert head["y"] + head["height"] <= VIEWPORT["height"]
        assert runs.first.bounding_box()["y"] >= table["y"] + table["height"]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"notebook-{host}.png"))

        # A run opened: its chart, step table and findings, as readable.
        first = runs.first
        first.locator("xpath=./summary").click()
        assert first.get_attribute("open") is not None
        assert first.locator("svg.stepchart rect.bar").count() >= 5
        assert first.locator("details.finding").count() >= 1
        assert _low(page, _DETAILS) == []
        # A clipped bar's label lies on the bar: its halo is the fragment's background,
        # against which the contrast above holds.
        halo = first.locator("svg.stepchart text.clipped").first.evaluate(
            "e => [getComputedStyle(e).stroke, getComputedStyle(e).paintOrder]")
        assert halo[0] == background and halo[1].startswith("stroke")
        first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"notebook-{host}-open.png"))
        # The fragment's own root only: the host page's body keeps its own colours.
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") != "" and (
            dark == (page.evaluate(
                "parseInt(getComputedStyle(document.querySelector('.tbd-report'))"
                ".backgroundColor.match(/\\d+/)[0])") < 128))
    finally:
        context.close()
