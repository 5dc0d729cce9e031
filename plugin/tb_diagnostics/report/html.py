"""The report as one self-contained HTML file: opens from disk, offline, with no request.

Everything is inline: CSS, an SVG step chart (drawn here, in Python), the
step table, findings with their evidence tables and one dispatch chain per
span as nested ``<details>``. There is no script at all, and a
Content-Security-Policy forbids loading anything, so a copied file can make
no request even if a trace string tried to. Every trace string is escaped.
"""

from __future__ import annotations

import re
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

from tb_diagnostics.names import shorten_name
from tb_diagnostics.output import displayable
from tb_diagnostics.report.roofline import op_shapes, roofline_summary, top_losses
from tb_diagnostics.report.text import (
    TEXT_COLUMNS,
    _columns,
    _device,
    _dur,
    _row,
    _spans,
    compute_us,
    headline,
    saving_text,
)
from tb_diagnostics.report.whatif import whatif_items

#: The tab's stylesheet: its light theme's colours are the export's, so a reader who knows
#: the tab reads the chart the same way (one palette, kept in one place).
TAB_CSS = Path(__file__).resolve().parents[1] / "static" / "style.css"
#: Used only when the stylesheet is missing from an installation.
_FALLBACK = {"busy": "#2e7d32", "collective": "#f9a825", "input": "#1e88e5",
             "sync": "#8e24aa", "comm": "#00897b", "launch": "#f4511e", "other": "#bdbdbd",
             "profiler": "#a1887f", "compile": "#5d4037", "module_load": "#c0ca33",
             "mixed": "#607d8b", "sev-critical": "#c62828", "sev-warning": "#ef6c00",
             "sev-info": "#546e7a"}
#: The stacked parts of a step's bar, bottom up, as the tab stacks them: compute, the
#: collective kernels no compute overlaps, then the device's idle time by cause.
_PART_KEYS = (("busy", "compute_busy_us"), ("collective", "exposed_collective_us"),
              ("input", "input_us"), ("sync", "sync_us"), ("comm", "comm_us"),
              ("launch", "launch_us"), ("other", "other_us"), ("profiler", "profiler_us"),
              ("compile", "compile_us"), ("module_load", "module_load_us"))
_LABEL = {"busy": "compute busy", "collective": "collectives no compute overlaps",
          "input": "waiting for input", "sync": "blocked in sync",
          "comm": "host in collectives", "launch": "launching work", "other": "nothing recorded",
          "profiler": "profiler itself", "compile": "compiling (one-time)",
          "module_load": "loading modules (one-time)"}


@cache
def palette() -> dict[str, str]:
    """The tab's light-theme colours by name (``busy``, ``input``…, ``sev-warning``…)."""
    out = dict(_FALLBACK)
    try:
        css = TAB_CSS.read_text(encoding="utf-8")
    except OSError:
        return out
    root = re.search(r":root\s*\{(.*?)\}", css, re.S)
    if root:
        for name, value in re.findall(r"--(c-[\w-]+|sev-[\w-]+)\s*:\s*(#[0-9a-fA-F]{3,8})",
                                      root.group(1)):
            out[name.removeprefix("c-")] = value
    return out


#: Colours are custom properties with the export's light colours as fallbacks: the export
#: page defines none, the notebook fragment (report/notebook.py) maps them to the host's
#: theme. Every rule that sets a text colour sits on a background set here too.
_CSS_BASE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;
color:var(--tbd-fg,#202124);background:var(--tbd-bg,#fff)}
h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-top:1px solid var(--tbd-line,#ddd);
padding-top:16px}table{border-collapse:collapse;margin:8px 0}td,th{padding:2px 8px;
border-bottom:1px solid var(--tbd-rule,#eee);text-align:right;
font-variant-numeric:tabular-nums}th{background:var(--tbd-head,#f5f5f5)}
td.l,th.l{text-align:left}.sev{font-weight:600;text-transform:uppercase;font-size:11px;
padding:1px 5px;border-radius:3px;color:#fff;
background:%(sev-info)s}.critical{background:%(sev-critical)s}
.warning{background:%(sev-warning)s;color:#202124}.info{background:%(sev-info)s}
details{margin:4px 0}details details{margin-left:18px}summary{cursor:pointer}code{font-size:12px}
.note{color:var(--tbd-muted,#5f6368)}.legend span{margin-right:12px}.sw{display:inline-block;
width:10px;height:10px;margin-right:4px}.mark{font-size:11px;background:#fce8b2;
color:#202124;padding:0 4px;border-radius:3px;margin-left:4px}.subject{font-weight:600}
/* a clipped bar's label sits on the bar: a halo of the page's background keeps it
   readable on any part's colour */
.stepchart text{fill:currentColor}.stepchart text.clipped{stroke:var(--tbd-bg,#fff);
stroke-width:3px;paint-order:stroke;stroke-linejoin:round}
.stepchart line.break{stroke:var(--tbd-bg,#fff)}
"""


def _css() -> str:
    return _CSS_BASE % palette()


_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_MAX_CHILDREN = 12
_MAX_DEPTH = 10


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def step_chart_svg(span: dict[str, Any], width: int = 900, height: int = 220) -> str:
    """Stacked bars of each step's wall time: compute, collectives no compute overlaps,
    then the idle causes."""
    steps = span["steps"]
    if not steps:
        return ""
    from tb_diagnostics.report.compare import cold_steps

    # Scaled to the warm steps: a cold step 50× longer would flatten them to nothing; its
    # bar is clipped with a break and labelled with its real wall time.
    cold = cold_steps(span)
    warm = [s["wall_us"] for s in steps if s["step"] not in cold] or [s["wall_us"] for s in steps]
    top = max(warm) or 1.0
    if max(s["wall_us"] for s in steps) <= 1.5 * top:
        top = max(s["wall_us"] for s in steps) or 1.0
    pad_l, pad_b = 60, 24
    plot_h = height - pad_b - 8
    bw = (width - pad_l) / len(steps)
    colours = palette()
    parts = [(n, k, colours[n]) for n, k in _PART_KEYS
             if n in ("busy", "input", "sync", "launch", "other")
             or any(_part_us(s, k) > 0 for s in steps)]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="step chart" class="stepchart">',
           f'<text x="4" y="14" font-size="11">{_e(_dur(top))}</text>',
           f'<line x1="{pad_l}" y1="8" x2="{pad_l}" y2="{8 + plot_h}" stroke="#999"/>']
    for i, s in enumerate(steps):
        x = pad_l + i * bw + bw * 0.1
        y = 8 + plot_h
        label = "all" if s["step"] is None else s["step"]
        for name, key, colour in parts:
            v = _part_us(s, key)
            h = min(plot_h * v / top, max(y - 8, 0.0))
            if h <= 0:
                continue
            y -= h
            out.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bw * 0.8:.1f}" '
                       f'height="{h:.1f}" fill="{colour}"><title>step {_e(label)}: '
                       f'{_LABEL[name]} {_e(_dur(v))}</title></rect>')
        if s["wall_us"] > top * 1.0001:
            # The break: two light strokes across the clipped bar, and the real value.
            for dy in (14, 20):
                out.append(f'<line class="break" x1="{x - 2:.1f}" y1="{8 + dy + 3}" '
                           f'x2="{x + bw * 0.8 + 2:.1f}" y2="{8 + dy - 3}" stroke="#fff" '
                           'stroke-width="3"/>')
            out.append(f'<text class="clipped" x="{x + bw * 0.4:.1f}" y="{8 + 11}" '
                       f'font-size="11" text-anchor="middle">{_e(_dur(s["wall_us"]))}'
                       f'{" (cold)" if s["step"] in cold else ""}</text>')
        out.append(f'<text x="{x + bw * 0.4:.1f}" y="{height - 6}" font-size="11" '
                   f'text-anchor="middle">{_e(label)}</text>')
    out.append("</svg>")
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{_LABEL[n]}</span>'
                     for n, _, c in parts)
    return "\n".join(out) + f'\n<div class="legend">{legend}</div>'


def _part_us(s: dict[str, Any], key: str) -> float:
    """µs of one stacked part of a step's bar (see ``_PART_KEYS``)."""
    if key == "compute_busy_us":
        return compute_us(s)
    if key == "exposed_collective_us":
        return s.get(key) or 0.0
    return s["idle"].get(key, 0.0)


def _step_table(span: dict[str, Any]) -> str:
    cols = _columns(span)
    left = [n in TEXT_COLUMNS and n != "step" for n in cols]
    head = "".join(f'<th class="{"l" if left[c] else ""}">{_e(n)}</th>'
                   for c, n in enumerate(cols))
    rows = []
    for s in span["steps"]:
        cells = "".join(f'<td class="{"l" if left[c] else ""}">{_e(v)}</td>'
                        for c, v in enumerate(_row(s, cols)))
        rows.append(f"<tr>{cells}</tr>")
    return f'<table class="steps"><tr>{head}</tr>{"".join(rows)}</table>'


def _whatif_item(line: str, sub: list[str]) -> str:
    """A what-if card's line, its parts and related rules in a list under it."""
    inner = "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in sub) + "</ul>" if sub else ""
    return f"<li>{_e(line)}{inner}</li>"


def run_section(run: dict[str, Any], max_evidence: int | None = None) -> str:
    """A run's own notes (a run-level rule that raised…) and findings (stragglers,
    imbalance across ranks), as the text and Markdown reports give them."""
    notes = "".join(f'<p class="note">Note: {_e(x)}</p>' for x in run.get("notes") or ())
    found = "".join(_finding(f, None, max_evidence) for f in run.get("findings") or ())
    return (f'<section class="span run"><h2><code>{_e(run["run"])}</code> · '
            f'{len(run.get("ranks") or [])} ranks</h2>{notes}'
            + (f"<h3>Findings</h3>{found}" if found else "") + "</section>")


def _finding(f: dict[str, Any], span: dict[str, Any] | None,
             max_evidence: int | None = None) -> str:
    save = saving_text(f, span)
    tail = f" — {save}" if save else ""
    every = f.get("evidence") or []
    ev = every if max_evidence is None else every[:max_evidence]
    more = (f'<p class="note">… and {len(every) - len(ev)} more events (the HTML export and '
            'the tab list them all).</p>') if len(ev) < len(every) else ""
    rows = "".join(
        f'<tr><td class="l"><code>{_e(x["name"])}</code></td><td class="l">{_e(x["category"])}'
        f'</td><td>{x["ts"]:.1f}</td><td>{_e(_dur(x["dur"]))}</td><td class="l">'
        f'{_e(x["lane"])}</td><td class="l">{_e(x.get("note") or "")}</td></tr>' for x in ev)
    table = ('<table class="evidence"><tr><th class="l">event</th><th class="l">category</th>'
             '<th>ts µs</th><th>duration</th><th class="l">lane</th><th class="l">note</th></tr>'
             f"{rows}</table>{more}") if ev else ""
    confirm = f'<p class="note">Confirm: {_e(f["confirm"])}</p>' if f.get("confirm") else ""
    subject = (f' <span class="subject">· {_e(f["subject"])}</span>' if f.get("subject")
               else "")
    return (f'<details class="finding"><summary><span class="sev {_e(f["severity"])}">'
            f'{_e(f["severity"])}</span> <code>{_e(f["rule"])}</code> {_e(f.get("title", ""))}'
            f'{subject}{_e(tail)}</summary><p>{_e(f["message"])}</p>{table}{confirm}'
            '</details>')


def _pct_or_unknown(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.0f}%"


def _roofline(span: dict[str, Any]) -> str:
    """The roofline summary and the ops losing the most time against it, as a table."""
    summary = roofline_summary(span)
    if summary is None:
        return ""
    rows = "".join(
        f'<tr><td class="l"><code>{_e(o["name"])}</code> {_e(op_shapes(o))}</td>'
        f'<td class="l">{_e(o["precision"] or "?")}</td><td class="l">{_e(o["bound"])}</td>'
        f'<td>{o["calls"]}</td><td>{o["device_us"] / 1000:.2f}</td>'
        f'<td>{_pct_or_unknown(o["roofline_pct"])}</td>'
        f'<td>{o["loss_us"] / 1000:.2f}</td></tr>' for o in top_losses(span, 8))
    table = ('<table class="steps"><tr><th class="l">op and shapes</th><th class="l">precision'
             '</th><th class="l">bound</th><th>calls</th><th>device ms</th><th>of roofline</th>'
             f'<th>ms lost</th></tr>{rows}</table>') if rows else ""
    return f"<h3>Roofline</h3><p>{_e(summary[0].upper() + summary[1:])}</p>{table}"


def _tree(node: dict[str, Any], depth: int = 0, open_: bool = True) -> str:
    marks = "".join(f'<span class="mark">{_e(m)}</span>' for m in node.get("marks", ()))
    device = f' · device {_e(_dur(node["device_us"]))}' if node["device_us"] else ""
    short = shorten_name(node["name"])
    name = (f'<code title="{_e(node["name"])}">{_e(short)}</code>' if short != node["name"]
            else f'<code>{_e(node["name"])}</code>')
    label = (f'{name} <span class="note">{_e(node["kind"])} ×'
             f'{node["count"]} · total {_e(_dur(node["total_us"]))} · self '
             f'{_e(_dur(node["self_us"]))}{device}</span>{marks}')
    kids = node.get("children") or []
    if not kids or depth >= _MAX_DEPTH:
        return f'<div class="leaf">{label}</div>'
    heaviest = max(range(len(kids)), key=lambda i: (kids[i]["device_us"], kids[i]["total_us"]))
    inner = "".join(_tree(c, depth + 1, open_ and i == heaviest) for i, c in enumerate(kids))
    return (f'<details class="chain"{" open" if open_ else ""}><summary>{label}</summary>'
            f"{inner}</details>")


def scoped_css(scope: str) -> str:
    """The page's style with every selector under ``scope`` (``body`` becomes ``scope``), so
    a fragment inside another page (a notebook) styles itself and nothing around it."""
    def scope_rule(m: re.Match[str]) -> str:
        sels = [x.strip() for x in m.group(1).split(",")]
        return ",".join(scope if x == "body" else f"{scope} {x}" for x in sels) + "{"

    return re.sub(r"([^{}]+)\{", scope_rule, _css().replace("\n", ""))


def span_section(run: str, worker: str, span: dict[str, Any],
                 chain: tuple[Any, dict[str, Any]] | None = None,
                 max_evidence: int | None = None) -> str:
    """One span's section: verdict, notes, step chart and table, roofline, what-if, findings
    (``max_evidence``: at most that many evidence rows each) and its dispatch ``chain``
    (step number, tree from ``present_tree``) where given."""
    body = [f'<section class="span"><h2><code>{_e(run)}</code> · <code>{_e(worker)}'
            f'</code> · span <code>{_e(span["span"])}</code></h2>',
            f'<p class="note">{_e(_device(span))} — file <code>{_e(span["file"])}'
            f'</code></p><p class="headline"><b>Verdict:</b> {_e(headline(span))}</p>']
    body.extend(f'<p class="note">Error: {_e(x)}</p>' for x in span["errors"])
    body.extend(f'<p class="note">Note: {_e(x)}</p>' for x in span["notes"])
    if span["steps"]:
        body.append("<h3>Steps</h3>" + step_chart_svg(span) + _step_table(span))
    body.append(_roofline(span))
    projections = whatif_items(span)
    if projections:
        body.append("<h3>What if</h3><p class=\"note\">Each change replayed on the span "
                    "(saving per warm step, walls of the step named); savings do not "
                    "add up.</p><ul>"
                    + "".join(_whatif_item(line, sub) for line, sub in projections)
                    + "</ul>")
    if span["findings"]:
        body.append("<h3>Findings</h3>" + "".join(_finding(f, span, max_evidence)
                                                   for f in span["findings"]))
    if chain is not None:
        step, tree = chain
        body.append(f'<h3>Dispatch chain of step {_e("(all)" if step is None else step)}'
                    f'</h3>{_tree(tree)}')
    body.append("</section>")
    return "\n".join(body)


def render_html(doc: dict[str, Any], chains: dict[str, tuple[Any, dict[str, Any]]] | None = None,
                extra_markdown: str | None = None) -> str:
    """The report document as one self-contained HTML page, no script (the notebook's
    fragment is report/notebook.py's).

    ``chains`` maps a span's ``file`` to (step number, its dispatch tree from
    ``present_tree``); spans without one show no chain.
    """
    chains = chains or {}
    body = ['<h1>tb-diagnostics report</h1>']
    if not doc["runs"]:
        body.append(f"<p>No PyTorch profiler traces under <code>{_e(doc['logdir'])}</code>.</p>")
    # The log dir's notes (links not followed…), as the text and Markdown reports give them.
    body.extend(f'<p class="note">Note: {_e(x)}</p>' for x in doc.get("notes") or ())
    body.extend(span_section(run, worker, span, chains.get(span["file"]))
                for run, worker, span in _spans(doc))
    body.extend(run_section(r) for r in doc["runs"] if r.get("findings") or r.get("notes"))
    if extra_markdown:
        body.append(f"<h2>Comparison</h2><pre>{_e(extra_markdown)}</pre>")
    # A file name that is not UTF-8 shows with U+FFFD: the page is valid UTF-8.
    return displayable('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
                       f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
                       '<meta name="viewport" content="width=device-width,initial-scale=1">'
                       f"<title>tb-diagnostics report</title><style>{_css()}</style></head>"
                       "<body>" + "\n".join(body) + "</body></html>\n")


def dispatch_chains(logdir: Any, doc: dict[str, Any], thresholds: Any = None,
                    cache: Any = None) -> dict[str, tuple[Any, dict[str, Any]]]:
    """One dispatch tree per span: its first warm step's (what the tab opens on is similar)."""
    from tb_diagnostics.opening import analysed_spans
    from tb_diagnostics.report.compare import cold_steps
    from tb_diagnostics.server.tree import present_tree

    out: dict[str, tuple[Any, dict[str, Any]]] = {}
    span_docs = {span["file"]: span for _, _, span in _spans(doc)}
    for span, analysis in analysed_spans(logdir.files, span_docs, thresholds, cache):
        cold = cold_steps(span)
        index = next((w.index for w in analysis.windows if w.step not in cold), 0)
        tree = present_tree(analysis.call_tree(index).to_dict(), max_children=_MAX_CHILDREN)
        out[span["file"]] = (analysis.windows[index].step, tree)
    return out
