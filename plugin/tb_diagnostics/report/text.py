"""Human renderings of the report document: plain text for terminals, Markdown for PRs."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from typing import Any

from tb_diagnostics.names import short_name
from tb_diagnostics.output import displayable
from tb_diagnostics.report.critical_path import critical_path_lines

# The headline lives in report.headline; html.py and older callers import it from here.
from tb_diagnostics.report.headline import (  # noqa: F401
    _dur,
    _pct,
    compute_us,
    headline,
    step_ranges,
)
from tb_diagnostics.report.roofline import op_shapes, roofline_summary, top_losses
from tb_diagnostics.report.whatif import whatif_items, whatif_lines


def _ms(us: float | None) -> str:
    return "—" if us is None else f"{us / 1000:.2f}"


def _step_label(s: dict[str, Any]) -> str:
    return "(all)" if s["step"] is None else f"#{s['step']}"


def _spans(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for run in doc["runs"]:
        for worker in run["workers"]:
            for span in worker["spans"]:
                yield run["run"], worker["worker"], span


def _device(span: dict[str, Any]) -> str:
    d = span["device"]
    if d["kind"] is None:
        return "unknown device"
    return d["kind"] + (f": {d['name']}" if d["name"] else "")


_COLUMNS = ("step", "wall ms", "busy", "verdict", "main idle cause", "input ms", "sync ms",
            "launch ms", "other ms")
#: The step table's columns of one-time idle time, by idle key.
_ONE_TIME_COLUMNS = (("compile_us", "compile ms"), ("module_load_us", "module load ms"))
#: Columns of words, left-aligned (the others are figures).
TEXT_COLUMNS = frozenset({"step", "verdict", "main idle cause"})


def _columns(span: dict[str, Any]) -> tuple[str, ...]:
    """The step table's columns; "compute" (the verdict's busy figure) and "collectives ms"
    (collective kernels no compute overlaps) only where a step ran such kernels, "comm ms"
    only where a collective blocked the host, "profiler ms" only where the profiler took
    time of its own, "compile ms" and "module load ms" only where a step paid them."""
    cols = _COLUMNS
    if any((s.get("exposed_collective_us") or 0) > 0 for s in span["steps"]):
        cols = (*cols[:3], "compute", *cols[3:], "collectives ms")
    if any(s["idle"].get("comm_us", 0) > 0 for s in span["steps"]):
        cols = (*cols, "comm ms")
    if any(s["idle"].get("profiler_us", 0) > 0 for s in span["steps"]):
        cols = (*cols, "profiler ms")
    # One-time costs, labelled apart from the causes (no verdict is judged on them).
    for key, col in _ONE_TIME_COLUMNS:
        if any(s["idle"].get(key, 0) > 0 for s in span["steps"]):
            cols = (*cols, col)
    if any(s.get("flop_utilisation") is not None for s in span["steps"]):
        cols = (*cols, "TFLOP/s", "flop util")
    return cols


def _row(s: dict[str, Any], columns: tuple[str, ...] = _COLUMNS) -> list[str]:
    i = s["idle"]
    row = [_step_label(s), _ms(s["wall_us"]), _pct(s["device_busy"]), s["verdict"],
           s["main_idle_cause"] or "—", _ms(i["input_us"]), _ms(i["sync_us"]),
           _ms(i["launch_us"]), _ms(i["other_us"])]
    if "compute" in columns:
        row.insert(3, _pct(compute_us(s) / s["wall_us"] if s["wall_us"] > 0 else 0.0))
        row.append(_ms(s.get("exposed_collective_us") or 0.0))
    if "comm ms" in columns:
        row.append(_ms(i.get("comm_us", 0.0)))
    if "profiler ms" in columns:
        row.append(_ms(i.get("profiler_us", 0.0)))
    row.extend(_ms(i.get(key, 0.0)) for key, col in _ONE_TIME_COLUMNS if col in columns)
    if "flop util" in columns:
        util = s.get("flop_utilisation")
        row.append(f"{s.get('achieved_tflops') or 0:.3g}")
        row.append("—" if util is None else f"{100 * util:.1f}%")
    return row


def _roofline_lines(span: dict[str, Any], bullet: str, code: str = "") -> list[str]:
    """The roofline summary and the ops that lose the most time against it."""
    summary = roofline_summary(span)
    if summary is None:
        return []
    lines = [summary]
    for o in top_losses(span):
        pct = "?" if o["roofline_pct"] is None else f"{100 * o['roofline_pct']:.0f}%"
        lines.append(f"{bullet}{code}{o['name']} {op_shapes(o)}{code} ({o['precision'] or '?'}, "
                     f"{o['bound']}-bound): {o['device_us'] / 1000:.2f} ms on the device, "
                     f"{pct} of roofline, {o['loss_us'] / 1000:.2f} ms lost")
    return lines


def render_text(doc: dict[str, Any]) -> str:
    out: list[str] = []
    if not doc["runs"]:
        out.append(f"No PyTorch profiler traces (*.pt.trace.json[.gz]) under {doc['logdir']}.")
    out.extend(f"note: {note}" for note in doc.get("notes", ()))
    for run, worker, span in _spans(doc):
        out.append(f"run {run} · worker {worker} · span {span['span']} ({_device(span)})")
        out.append(f"  file: {span['file']}")
        out.append(f"  verdict: {headline(span)}")
        for err in span["errors"]:
            out.append(f"  error: {err}")
        for note in span["notes"]:
            out.append(f"  note: {note}")
        if span["steps"]:
            cols = _columns(span)
            rows = [list(cols)] + [_row(s, cols) for s in span["steps"]]
            widths = [max(len(r[c]) for r in rows) for c in range(len(cols))]
            for r in rows:
                cells = [r[0].ljust(widths[0])] + [
                    (v.ljust if cols[c] in TEXT_COLUMNS else v.rjust)(widths[c])
                    for c, v in enumerate(r) if c > 0]
                out.append("  " + "  ".join(cells).rstrip())
        out.extend(critical_path_lines(span))
        roof = _roofline_lines(span, "      ")
        if roof:
            out.append(f"  {roof[0]}; most time lost:" if len(roof) > 1 else f"  {roof[0]}")
            out.extend(roof[1:])
        projections = whatif_lines(span)
        if projections:
            out.append("  what if (replayed; saving per warm step, walls of the step named):")
            out.extend(f"      {line}" for line in projections)
        out.extend(_findings_text(span))
        out.append("")
    for r in doc["runs"]:
        if r.get("findings") or r.get("notes"):
            out.append(f"run {r['run']} · {len(r.get('ranks', []))} ranks")
            out.extend(f"  note: {note}" for note in r.get("notes") or ())
            out.extend(_findings_text(r, is_span=False))
            out.append("")
    # A file name that is not UTF-8 shows with U+FFFD: the text is valid UTF-8 anywhere.
    return displayable("\n".join(out).rstrip() + "\n")


def has_steps(span: dict[str, Any]) -> bool:
    """Whether the span has ProfilerStep# windows (else it is analysed as one window)."""
    return any(s.get("step") is not None for s in span.get("steps") or [])


def saving_text(f: dict[str, Any], span: dict[str, Any] | None) -> str:
    """``saves ~13.4 ms/step``, or ``saves ~2.20 s over the span`` for a span without steps
    (``span`` None: a run finding, per step where it names steps); empty without a saving."""
    save = f.get("savings_us")
    if not save:
        return ""
    steps = f.get("steps") or []
    per_step = has_steps(span) if span is not None else bool(steps) and steps != [None]
    return f"saves ~{_dur(save)}{'/step' if per_step else ' over the span'}"


def finding_head(f: dict[str, Any], code: str = "", shown: bool = True) -> str:
    """The rule id and (``shown``) what this finding is about:
    ``host-sync · aten::item → cudaMemcpyAsync``."""
    subject = f.get("subject") if shown else None
    return f"{code}{f['rule']}{code}" + (f" · {subject}" if subject else "")


def _repeated(findings: list[dict[str, Any]]) -> set[str]:
    """Titles that more than one finding of the list has: those show their subject (where
    the message is printed in full, a lone finding's subject only repeats its start)."""
    seen: dict[str, int] = {}
    for f in findings:
        seen[f.get("title", f["rule"])] = seen.get(f.get("title", f["rule"]), 0) + 1
    return {t for t, n in seen.items() if n > 1}


def _findings_text(span: dict[str, Any], is_span: bool = True) -> list[str]:
    if not span["findings"]:
        return []
    lines = ["  findings:"]
    repeated = _repeated(span["findings"])
    for f in span["findings"]:
        save = saving_text(f, span if is_span else None)
        tail = f" ({save})" if save else ""
        head = finding_head(f, shown=f.get("title", f["rule"]) in repeated)
        lines.extend(textwrap.wrap(f"[{f['severity']}] {head}: {f['message']}{tail}",
                                   width=100, initial_indent="    ",
                                   subsequent_indent="        ", break_on_hyphens=False))
        lines.extend(f"        open {_cell_text(c)}" for c in f.get("cells", []))
    return lines


def _cell_text(c: dict[str, Any]) -> str:
    """A run finding's rank step: where to look, and what is there."""
    return f"rank {c['rank']} step {c['step']} ({c['worker']}, span {c['span']}): {c['why']}"


#: Characters Markdown (GitHub's) gives a meaning inside a line: emphasis, code, links,
#: tables, strike-through, escapes.
_MD_SPECIAL = frozenset("\\`*_[]|~")
_MD_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def md(text: Any) -> str:
    """Free text for Markdown: HTML-significant characters as entities (GitHub drops an
    unknown tag such as ``<module>``) and Markdown's own specials backslash-escaped, so
    names like ``a|b`` or ``__init__`` print as they are."""
    out = []
    for c in str(text):
        if c in _MD_HTML:
            out.append(_MD_HTML[c])
        elif c in _MD_SPECIAL:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def md_code(text: Any) -> str:
    """A code span that holds any text: a fence longer than its longest backtick run
    (code spans take no escapes, and HTML inside them is shown, not parsed)."""
    s = str(text).replace("\n", " ")
    run = longest = 0
    for c in s:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"


#: A name the report's sentences quote as code (``in `aten::add_` dispatch``): opened at
#: the start or after a space or bracket, closed before a space, punctuation or the end,
#: so a backtick inside the name does not close it.
_MD_QUOTED = re.compile(r"(?<![^\s(\[])`(.+?)`(?=$|[\s.,;:)\]'’!?…])")


def md_prose(text: Any) -> str:
    """A sentence of the report for Markdown: the names it quotes in backticks as code
    spans (:func:`md` alone would print the backticks), the rest escaped as :func:`md`
    escapes it."""
    s = str(text)
    out, at = [], 0
    for m in _MD_QUOTED.finditer(s):
        out.append(md(s[at:m.start()]))
        out.append(md_code(m.group(1)))
        at = m.end()
    out.append(md(s[at:]))
    return "".join(out)


def _md_path_cell(s: dict[str, Any]) -> str:
    """The steps table's "critical path" cell: what the step's end waits on, by kind (the
    largest first), and the op it waits on most: ``host 72%, device 20% · most in
    `aten::add_` (host)``."""
    cp = s.get("critical_path")
    if not cp or not cp.get("total_us"):
        return "—"
    total = cp["total_us"]
    kinds = sorted(((k, v) for k, v in cp["by_kind"].items() if v > 0), key=lambda kv: -kv[1])
    cell = md(", ".join(f"{k} {_pct(v / total)}" for k, v in kinds))
    top = (cp.get("by_op") or [None])[0]
    if top:
        # GitHub splits a table row at a bare | even inside a code span; \| it keeps.
        name = md_code(short_name(top["op"], 40)).replace("|", "\\|")
        cell += f" · most in {name} ({md(top['kind'])})"
    return cell


def _md_finding(f: dict[str, Any], span: dict[str, Any] | None, shown: bool = True) -> str:
    subject = f" · {md_code(f['subject'])}" if shown and f.get("subject") else ""
    save = saving_text(f, span)
    return (f"- **{md(f['severity'])}** {md_code(f['rule'])}{subject}: {md_prose(f['message'])}"
            + (f" ({md(save)})" if save else ""))


def render_markdown(doc: dict[str, Any]) -> str:
    out = ["# tb-diagnostics report", ""]
    if not doc["runs"]:
        out.append(f"No PyTorch profiler traces under {md_code(doc['logdir'])}.")
    out.extend(f"> **Note:** {md(note)}\n" for note in doc.get("notes", ()))
    for run, worker, span in _spans(doc):
        out.append(f"## {md_code(run)} · {md_code(worker)} · span {md_code(span['span'])}")
        out.append("")
        out.append(f"*{md(_device(span))}* — file {md_code(span['file'])}")
        out.append("")
        out.append(f"**Verdict:** {md_prose(headline(span))}")
        out.append("")
        for err in span["errors"]:
            out.append(f"> **Error:** {md(err)}")
        for note in span["notes"]:
            out.append(f"> Note: {md(note)}")
        if span["errors"] or span["notes"]:
            out.append("")
        if span["steps"]:
            cols = _columns(span)
            # The critical path's split per step (the text report prints it in lines).
            path = any(s.get("critical_path") for s in span["steps"])
            heads = [md(c) for c in cols] + (["critical path"] if path else [])
            out.append("| " + " | ".join(heads) + " |")
            out.append("|" + "|".join("---" if c in TEXT_COLUMNS and c != "step" else "--:"
                                       for c in cols) + ("|---" if path else "") + "|")
            for s in span["steps"]:
                cells = [md(v) for v in _row(s, cols)] + ([_md_path_cell(s)] if path else [])
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        summary = roofline_summary(span)
        if summary is not None:
            losses = top_losses(span)
            out.append(f"**{md(summary[0].upper() + summary[1:])}**"
                       + ("; most time lost:" if losses else ""))
            out.append("")
            for o in losses:
                pct = "?" if o["roofline_pct"] is None else f"{100 * o['roofline_pct']:.0f}%"
                out.append(f"- {md_code(o['name'] + ' ' + op_shapes(o))} "
                           f"({md(o['precision'] or '?')}, {md(o['bound'])}-bound): "
                           f"{o['device_us'] / 1000:.2f} ms on the device, {pct} of roofline, "
                           f"{o['loss_us'] / 1000:.2f} ms lost")
            if losses:
                out.append("")
        projections = whatif_items(span)
        if projections:
            out.append("**What if** (replayed; saving per warm step, walls of the step named)")
            out.append("")
            for line, sub in projections:
                out.append(f"- {md_prose(line)}")
                out.extend(f"  - {md_prose(x)}" for x in sub)
            out.append("")
        if span["findings"]:
            out.append("**Findings**")
            out.append("")
            repeated = _repeated(span["findings"])
            out.extend(_md_finding(f, span, f.get("title", f["rule"]) in repeated)
                       for f in span["findings"])
            out.append("")
    for r in doc["runs"]:
        if r.get("findings") or r.get("notes"):
            out.append(f"## {md_code(r['run'])} · {len(r.get('ranks', []))} ranks")
            out.append("")
            for note in r.get("notes") or ():
                out.append(f"> Note: {md(note)}")
                out.append("")
            for f in r["findings"]:
                out.append(_md_finding(f, None))
                out.extend(f"  - open {md(_cell_text(c))}" for c in f.get("cells", []))
            out.append("")
    # A file name that is not UTF-8 shows with U+FFFD: the text is valid UTF-8 anywhere.
    return displayable("\n".join(out).rstrip() + "\n")
