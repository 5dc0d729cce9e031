"""The report as one HTML fragment for a notebook cell (``Report._repr_html_``).

It lives inside someone else's page, so:

- every rule is scoped to the fragment's root (``.tbd-report``), and there is no script;
- its colours follow the host's theme: JupyterLab's CSS variables where they exist
  (``--jp-content-font-color1``, ``--jp-layout-color0``…), then VS Code's
  (``--vscode-editor-foreground``, ``--vscode-editor-background``), then
  ``prefers-color-scheme``; the root always paints its own background, so its text
  colour never lands on a background it did not choose;
- it opens with the answer: one row per span (run × verdict) and the findings that matter
  most with their savings; each run's full report (chart, step table, roofline, what-if,
  findings) is folded in a closed ``<details>``, so the first screen is the summary.
"""

from __future__ import annotations

from html import escape
from typing import Any

from tb_diagnostics.output import displayable
from tb_diagnostics.report.headline import _dur, _pct, _warm_and_cold
from tb_diagnostics.report.html import palette, run_section, scoped_css, span_section
from tb_diagnostics.report.text import finding_head, saving_text

#: The fragment's root class: every selector of its style starts with it.
ROOT = "tbd-report"
#: How many findings the summary lists (the rest are in each run's details).
TOP_FINDINGS = 6
#: Evidence rows per finding in the fragment (the export and the tab have them all): a
#: notebook keeps its outputs in the .ipynb, and ten rows per finding over a log dir's
#: hundred findings is most of the fragment's size.
MAX_EVIDENCE = 5
_SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
#: The verdict's swatch: the chart's colour of the cause that leads to it (as the tab).
_VERDICT_COLOUR = {"compute-bound": "busy", "input-bound": "input", "sync-bound": "sync",
                   "communication-bound": "comm", "overhead-bound": "launch",
                   "compile-bound": "compile", "mixed": "mixed"}


def _theme(dark: bool) -> str:
    """The ``--tbd-*`` colours the shared stylesheet reads: the host's own where it names
    them, else this scheme's. The translucent greys (header, rules) work on either."""
    fg, bg, muted, line = (("#e8eaed", "#202124", "#a8adb3", "#5f6368") if dark
                           else ("#202124", "#ffffff", "#5f6368", "#dddddd"))
    return (f"--tbd-fg:var(--jp-content-font-color1,var(--jp-ui-font-color1,"
            f"var(--vscode-editor-foreground,{fg})));"
            f"--tbd-bg:var(--jp-layout-color0,var(--jp-layout-color1,"
            f"var(--vscode-editor-background,{bg})));"
            f"--tbd-muted:var(--jp-content-font-color2,var(--jp-ui-font-color2,"
            f"var(--vscode-descriptionForeground,{muted})));"
            f"--tbd-line:var(--jp-border-color2,var(--vscode-panel-border,{line}));"
            "--tbd-rule:rgba(127,127,127,.22);--tbd-head:rgba(127,127,127,.14);"
            f"color-scheme:{'dark' if dark else 'light'}")


def fragment_css() -> str:
    """The fragment's style: the export's rules under ``.tbd-report``, the theme's colours,
    and the summary's own layout; all scoped to the root."""
    r = f".{ROOT}"
    own = (f"{r}{{{_theme(False)};margin:0;padding:12px 16px;border-radius:4px;"
           "overflow-x:auto}"
           f"@media (prefers-color-scheme:dark){{{r}{{{_theme(True)}}}}}"
           f"{r} h1{{margin:0 0 4px}}{r} h2.tbd-part{{margin-top:16px;padding-top:10px}}"
           f"{r} table.tbd-summary td,{r} table.tbd-summary th{{padding:1px 10px 1px 0;"
           "white-space:nowrap}"
           f"{r} ul.tbd-top{{margin:4px 0;padding-left:18px}}{r} ul.tbd-top li{{margin:2px 0}}"
           f"{r} details.run{{margin:2px 0}}{r} details.run>summary{{padding:2px 0}}"
           f"{r} details.run>section h2{{font-size:15px;margin-top:16px}}"
           f"{r} .tbd-run-verdicts{{color:var(--tbd-muted)}}")
    return scoped_css(r) + own


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _verdict(verdict: str | None) -> str:
    """The verdict's word after a swatch of its colour (the word carries the meaning, so
    its contrast is the text's, whatever the swatch)."""
    if not verdict:
        return '<span class="verdict">—</span>'
    colour = palette().get(_VERDICT_COLOUR.get(verdict, "mixed"), palette()["mixed"])
    return (f'<span class="verdict"><i class="sw" style="background:{colour}"></i>'
            f'{_e(verdict)}</span>')


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _device_name(span: dict[str, Any]) -> str:
    """The device's name alone (``NVIDIA H100 80GB HBM3``), else its kind (``cpu``)."""
    d = span["device"]
    return d.get("name") or d.get("kind") or "unknown device"


def _span_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One summary row per span: where it is, its verdict and its warm steps' medians."""
    rows = []
    for run in doc["runs"]:
        for worker in run["workers"]:
            for span in worker["spans"]:
                warm, _ = _warm_and_cold(span)
                counts = {sev: sum(f["severity"] == sev for f in span["findings"])
                          for sev in ("critical", "warning")}
                rows.append({
                    "run": run["run"], "worker": worker["worker"],
                    "several": len(run["workers"]) > 1 or len(worker["spans"]) > 1,
                    "span": span, "verdict": span.get("verdict"),
                    "wall_us": _median([s["wall_us"] for s in warm]) if warm else None,
                    "busy": _median([s["device_busy"] for s in warm]) if warm else None,
                    "n_steps": len(span["steps"]), "counts": counts})
    return rows


def _summary_table(rows: list[dict[str, Any]]) -> str:
    """Run × verdict: one line per span (its worker and span where the run has several)."""
    out = ['<table class="tbd-summary"><tr><th class="l">run</th><th class="l">device</th>'
           '<th>steps</th><th>warm step</th><th>busy</th><th class="l">verdict</th>'
           '<th class="l">findings</th></tr>']
    for r in rows:
        where = (f' <span class="note">· {_e(r["worker"])}</span>' if r["several"] else "")
        span = r["span"]
        # Counts as severity chips (the chip's word is in its title and the header).
        counts = " ".join(f'<span class="sev {sev}" title="{n} {sev}">{n}</span>'
                          for sev, n in r["counts"].items() if n)
        errors = ' <span class="note">· error</span>' if span["errors"] else ""
        out.append(
            f'<tr><td class="l"><code>{_e(r["run"])}</code>{where}</td>'
            f'<td class="l">{_e(_device_name(span))}</td><td>{r["n_steps"]}</td>'
            f'<td>{"—" if r["wall_us"] is None else _e(_dur(r["wall_us"]))}</td>'
            f'<td>{"—" if r["busy"] is None else _pct(r["busy"])}</td>'
            f'<td class="l">{_verdict(r["verdict"])}</td>'
            f'<td class="l">{counts or "—"}{errors}</td></tr>')
    out.append("</table>")
    return "".join(out)


def _all_findings(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str, str | None,
                                                    dict[str, Any] | None]]:
    """(finding, run, worker or None for a run-level one, span or None) for every finding."""
    out: list[tuple[dict[str, Any], str, str | None, dict[str, Any] | None]] = []
    for run in doc["runs"]:
        for worker in run["workers"]:
            for span in worker["spans"]:
                out.extend((f, run["run"], worker["worker"], span) for f in span["findings"])
        out.extend((f, run["run"], None, None) for f in run.get("findings") or ())
    return out


def top_findings(doc: dict[str, Any], limit: int = TOP_FINDINGS
                 ) -> list[tuple[dict[str, Any], str, list[str | None], dict[str, Any] | None]]:
    """The findings worth the first screen: critical, then warnings (info notes never),
    the largest saving first; one line for a rule that several ranks of a run raise about
    the same subject (its workers listed). Each: (finding, run, workers, span)."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for f, run, worker, span in _all_findings(doc):
        if f["severity"] not in ("critical", "warning"):
            continue
        key = (run, f["rule"], f.get("subject"), worker is None)
        if key in groups:
            groups[key][2].append(worker)
            kept = groups[key][0]
            if (f.get("savings_us") or 0) > (kept.get("savings_us") or 0):
                groups[key][0], groups[key][3] = f, span
        else:
            groups[key] = [f, run, [worker], span]
    ranked = sorted(groups.values(), key=lambda g: (_SEVERITY_RANK[g[0]["severity"]],
                                                    -(g[0].get("savings_us") or 0.0)))
    return [(f, run, workers, span) for f, run, workers, span in ranked[:limit]]


def _top_list(doc: dict[str, Any]) -> str:
    found = _all_findings(doc)
    top = top_findings(doc)
    if not found:
        return '<p class="note">No findings.</p>'
    if not top:
        return (f'<p class="note">No critical finding and no warning; {len(found)} info '
                "note(s) in the runs' details.</p>")
    items = []
    for f, run, workers, span in top:
        where = ("run-level" if workers == [None] else
                 ", ".join(w for w in workers if w) if len(workers) > 1 else "")
        where_html = f' <span class="note">({_e(where)})</span>' if where else ""
        save = saving_text(f, span)
        items.append(f'<li><span class="sev {_e(f["severity"])}">{_e(f["severity"])}</span> '
                     f'<code>{_e(run)}</code>{where_html}: <code>{_e(finding_head(f))}</code> '
                     f'{_e(f.get("title", ""))}'
                     f'{" — <b>" + _e(save) + "</b>" if save else ""}</li>')
    rest = len(found) - sum(len(w) for _, _, w, _ in top)
    tail = (f'<p class="note">{rest} more finding(s) in the runs below.</p>' if rest > 0
            else "")
    return f'<ul class="tbd-top">{"".join(items)}</ul>{tail}'


def _run_details(run: dict[str, Any]) -> str:
    """A run's full report, folded: its summary line names the verdicts of its spans."""
    spans = [(w["worker"], s) for w in run["workers"] for s in w["spans"]]
    verdicts = sorted({s.get("verdict") or "—" for _, s in spans})
    n_found = sum(len(s["findings"]) for _, s in spans) + len(run.get("findings") or ())
    parts = [span_section(run["run"], worker, span, None, MAX_EVIDENCE)
             for worker, span in spans]
    if run.get("findings") or run.get("notes"):
        parts.append(run_section(run, MAX_EVIDENCE))
    return (f'<details class="run"><summary><code>{_e(run["run"])}</code> '
            f'<span class="tbd-run-verdicts">· {_e(", ".join(verdicts))} · {len(spans)} '
            f'span(s) · {n_found} finding(s)</span></summary>{"".join(parts)}</details>')


def render_fragment(doc: dict[str, Any]) -> str:
    """The report document as one ``<div class="tbd-report">`` with its own scoped style:
    the summary first, each run's details folded (no dispatch chains: those need each span
    analysed again, which a cell's display must not cost)."""
    body = ['<h1>tb-diagnostics report</h1>',
            f'<p class="note">{_e(doc["logdir"])}</p>']
    body.extend(f'<p class="note">Note: {_e(x)}</p>' for x in doc.get("notes") or ())
    if not doc["runs"]:
        body.append(f"<p>No PyTorch profiler traces under <code>{_e(doc['logdir'])}</code>.</p>")
    else:
        # The top findings first: at most TOP_FINDINGS lines, so they stay on the first
        # screen however many runs the table below lists.
        body.append('<h2 class="tbd-part">Top findings</h2>' + _top_list(doc))
        body.append('<h2 class="tbd-part">Verdicts</h2>' + _summary_table(_span_rows(doc)))
        body.append('<h2 class="tbd-part">Runs</h2><p class="note">Open a run for its step '
                    "chart, step table, what-if replay and every finding (up to "
                    f"{MAX_EVIDENCE} evidence events each; to_html() has them all).</p>"
                    + "".join(_run_details(r) for r in doc["runs"]))
    # A file name that is not UTF-8 shows with U+FFFD: the fragment is valid UTF-8.
    return displayable(f'<div class="{ROOT}"><style>{fragment_css()}</style>'
                       + "\n".join(body) + "</div>\n")
