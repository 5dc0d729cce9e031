"""The Markdown report carries the critical path (issue 27 item 5): a "critical path" column
of each step's split by kind and the op its end waits on most, and the verdict's path clause
with its quoted names as code, not as escaped backticks."""

from __future__ import annotations

import re

from rules.conftest import TraceBuilder

from tb_diagnostics.engine import open_analysis
from tb_diagnostics.logdir import scan_logdir
from tb_diagnostics.report.document import span_document
from tb_diagnostics.report.text import md_prose, render_markdown

#: A table row's cell separators: a | that no backslash escapes.
_CELL = re.compile(r"(?<!\\)\|")


def _report(b: TraceBuilder, root) -> tuple[dict, dict]:
    b.write()
    f = scan_logdir(str(root)).runs[0].files[0]
    doc = span_document(f, open_analysis(f))
    return doc, {"logdir": "log", "notes": [], "runs": [{"run": "run", "workers": [
        {"worker": "w", "spans": [doc]}]}]}


def _host_steps(b: TraceBuilder, op: str, n: int = 3) -> None:
    """Host-bound steps of 1 ms: inside ``forward``, 20 calls of ``op`` (30 µs every 40 µs),
    each launching a 3 µs kernel: the device never holds the host up, so each step's end
    waits on the host for all of its time."""
    for s in range(n):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation("forward", t0 + 5, 900)
        for i in range(20):
            b.op(op, t0 + 10 + i * 40, 30)
            b.launch("add_kernel", t0 + 30 + i * 40, t0 + 32 + i * 40, 3)


def _table(out: str) -> list[list[str]]:
    """The steps table's rows (header first, the alignment row left out), cells stripped."""
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in _CELL.split(r)[1:-1]] for r in rows]


def test_quoted_names_render_as_code_and_the_rest_is_escaped():
    assert md_prose("mostly in `aten::add_` dispatch inside `forward`.") == \
        "mostly in `aten::add_` dispatch inside `forward`."
    # Outside the quotes, Markdown's specials and HTML stay escaped.
    assert md_prose("a __init__ in <module> | `x_y`'s kernels") == \
        r"a \_\_init\_\_ in &lt;module&gt; \| `x_y`'s kernels"
    # A backtick inside a quoted name does not close it: one span with a longer fence.
    assert md_prose("in `a`b` dispatch") == "in ``a`b`` dispatch"
    # A lone backtick (not a quote) prints as itself.
    assert md_prose("it`s 5 `") == r"it\`s 5 \`"
    assert md_prose("(most in `aten::mm`)") == "(most in `aten::mm`)"


def test_the_steps_table_has_each_steps_critical_path(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    _host_steps(b, "aten::add_")
    doc, report = _report(b, tmp_path / "log")
    out = render_markdown(report)
    head, *rows = _table(out)
    assert head[-1] == "critical path"
    assert len(rows) == len(doc["steps"]) == 3
    for row, s in zip(rows, doc["steps"], strict=True):
        assert row[0] == f"#{s['step']}"
        assert len(row) == len(head)
        # The trace's physics: the kernels never hold the host up, all of the path is host
        # time, most of it in the adds' dispatch.
        assert s["critical_path"]["by_kind"]["host"] == s["critical_path"]["total_us"] > 0
        assert row[-1] == "host 100% · most in `aten::add_` (host)"
    # The alignment row has a column for it too.
    align = next(ln for ln in out.splitlines() if ln.startswith("|--"))
    assert len(_CELL.split(align)) - 2 == len(head)
    verdict = next(ln for ln in out.splitlines() if ln.startswith("**Verdict:**"))
    assert "waits on the host for 100% of its time, mostly in `aten::add_` dispatch inside " \
        "`forward`" in verdict
    assert "\\`" not in verdict


def test_an_op_name_with_a_pipe_and_a_backtick_keeps_the_table_whole(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    _host_steps(b, "my|op`x")
    _, report = _report(b, tmp_path / "log")
    out = render_markdown(report)
    head, *rows = _table(out)
    assert rows and all(len(r) == len(head) for r in rows)
    # In the cell: a code span (its fence longer than the name's backtick), the pipe
    # escaped for GitHub's table.
    assert all(r[-1] == "host 100% · most in ``my\\|op`x`` (host)" for r in rows)


def test_a_document_without_critical_paths_has_no_such_column(tmp_path):
    b = TraceBuilder(tmp_path / "log" / "run")
    _host_steps(b, "aten::add_")
    doc, report = _report(b, tmp_path / "log")
    for s in doc["steps"]:
        del s["critical_path"]
    head, *rows = _table(render_markdown(report))
    assert "critical path" not in head
    assert rows and all(len(r) == len(head) for r in rows)
