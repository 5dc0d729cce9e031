"""The pipeline's layers: engine.py runs load → analyse → present, nothing below imports it,
and the verdicts are decided in analysis/, which imports neither the report nor the rules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "plugin" / "tb_diagnostics"

#: The engine's callers: the command line, the Python API, the tab's server and handler.
ENGINE_CALLERS = ("cli.py", "commands/", "api.py", "server/", "handler.py", "tb_plugin.py",
                  "engine.py")


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            # ``from tb_diagnostics import engine`` imports the module too.
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _modules() -> list[tuple[str, set[str]]]:
    return [(p.relative_to(PACKAGE).as_posix(), _imports(p)) for p in sorted(PACKAGE.rglob("*.py"))]


def test_only_the_engines_callers_import_it():
    importers = [rel for rel, mods in _modules() if "tb_diagnostics.engine" in mods
                 and not rel.startswith(ENGINE_CALLERS)]
    assert importers == []


def test_the_report_and_the_engine_do_not_import_each_other():
    report = [rel for rel, mods in _modules() if rel.startswith("report/")
              and any(m == "tb_diagnostics.engine" or m.startswith("tb_diagnostics.engine.")
                      for m in mods)]
    assert report == []


def test_the_analysis_imports_neither_the_report_nor_the_rules():
    # Verdicts (the steps', the span's) are decided in analysis/; report/ only renders them.
    bad = [(rel, m) for rel, mods in _modules() if rel.startswith("analysis/")
           for m in mods if m.startswith(("tb_diagnostics.report", "tb_diagnostics.rules",
                                          "tb_diagnostics.engine"))]
    assert bad == []

