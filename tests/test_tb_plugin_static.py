"""What the tab serves: no build step, a pinned vendored chart library, safe DOM code.

The tab is plain ES modules under ``plugin/tb_diagnostics/static/``; the only
third-party code is uPlot, copied from npm by ``frontend/vendor.mjs`` and
pinned in ``frontend/package.json`` / ``package-lock.json``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STATIC = REPO / "plugin" / "tb_diagnostics" / "static"
FRONTEND = REPO / "frontend"
VENDOR = STATIC / "vendor"
OURS = sorted(p for p in STATIC.rglob("*.js") if VENDOR not in p.parents)
MANIFEST = json.loads((FRONTEND / "vendor-manifest.json").read_text())


def test_vendored_uplot_matches_its_manifest_and_pin():
    pinned = json.loads((FRONTEND / "package.json").read_text())["dependencies"]["uplot"]
    lock = json.loads((FRONTEND / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/uplot"]["version"] == pinned
    assert MANIFEST["uplot"]["version"] == pinned
    for rel, digest in MANIFEST["uplot"]["files"].items():
        assert hashlib.sha256((VENDOR / rel).read_bytes()).hexdigest() == digest, rel
    assert "MIT" in (VENDOR / "uplot" / "LICENSE").read_text()


def test_vendored_uplot_is_what_npm_ci_installs():
    installed = FRONTEND / "node_modules" / "uplot"
    if not installed.is_dir():
        pytest.skip("frontend/node_modules absent (run `npm ci` in frontend/ to check)")
    version = json.loads((installed / "package.json").read_text())["version"]
    assert version == MANIFEST["uplot"]["version"]
    sources = {"uplot/uPlot.esm.js": "dist/uPlot.esm.js", "uplot/uPlot.min.css":
               "dist/uPlot.min.css", "uplot/LICENSE": "LICENSE"}
    for rel, src in sources.items():
        assert (VENDOR / rel).read_bytes() == (installed / src).read_bytes(), rel


@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(STATIC)))
def test_modules_never_write_html(path):
    # Event names are untrusted text: only textContent / DOM nodes reach the page.
    text = path.read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function"):
        assert sink not in text, f"{path.name} uses {sink}"


@pytest.mark.parametrize("path", [*OURS, STATIC / "style.css"],
                         ids=lambda p: str(p.relative_to(STATIC)))
def test_nothing_is_fetched_from_elsewhere(path):
    # The iframe's CSP only allows TensorBoard's origin, and users are offline.
    text = path.read_text()
    assert not re.search(r"""(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/""", text, re.I), path.name
    assert "@import" not in text and "url(" not in text.replace("url(#", "")


@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(STATIC)))
def test_modules_are_small_and_imports_resolve(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 400, f"{path.name}: keep each module small"
    for spec in re.findall(r"""(?:from|import)\s*\(?\s*["'](\.{1,2}/[^"']+)["']""", text):
        if path.name == "index.js":
            continue  # its imports are relative to the plugin route, checked below
        assert (path.parent / spec).resolve().is_file(), f"{path.name} imports {spec}"


def test_index_imports_resolve_under_the_plugin_route():
    text = (STATIC / "index.js").read_text()
    specs = re.findall(r"""["'](\./static/[^"']+)["']""", text)
    assert specs
    for spec in specs:
        assert (STATIC / spec.removeprefix("./static/")).is_file(), spec


def test_every_static_file_ships_in_the_wheel():
    # setup.py: package_data={"tb_diagnostics": ["static/*", "static/**/*"]}
    setup = (REPO / "setup.py").read_text()
    patterns = re.findall(r'"(static/[^"]+)"', setup)
    assert patterns
    pkg = STATIC.parent
    for p in STATIC.rglob("*"):
        if p.is_file():
            rel = str(p.relative_to(pkg))
            assert any(fnmatch.fnmatch(rel, pat) for pat in patterns), rel


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(STATIC)))
def test_modules_parse(path):
    r = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
