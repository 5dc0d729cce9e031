"""Human renderings of the report document: plain text for terminals, Markdown for PRs."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

from tb_diagnostics.output import displayable
from tb_diagnostics.report.roofline import op_shapes, roofline_summary, top_losses
from tb_diagnostics.report.whatif import whatif_lines

_CAUSE_WORDS = {
    "input": "waiting for the DataLoader",
    "sync": "while the host blocks in syncs",
    "comm": "while the host waits in collectives",
    "launch": "while the CPU launches work",
    "other": "with nothing recorded on the host",
}


def _ms(us: float | None) -> str:
    return "—" if us is None else f"{us / 1000:.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def compute_us(s: dict[str, Any]) -> float:
    """A step's compute busy µs (device activity that is not a collective kernel); a
    document older than the field has only ``device_busy_us``."""
    v = s.get("compute_busy_us")
    return s["device_busy_us"] if v is None else v


def _step_label(s: dict[str, Any]) -> str:
    return "(all)" if s["step"] is None else f"#{s['step']}"


def step_ranges(numbers: list[int]) -> str:
    """``[2, 3, 4, 5, 9]`` → ``"2–5, 9"``."""
    out: list[str] = []
    nums = sorted(set(numbers))
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}–{nums[j]}")
        i = j + 1
    return ", ".join(out)


def _dur(us: float) -> str:
    """A duration as people read it: ``850 µs``, ``3.79 ms``, ``4.24 s``."""
    from tb_diagnostics.rules._util import fmt_us

    return fmt_us(us)


def _warm_and_cold(span: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The span's warm steps and its cold ones (every step is warm when all would be cold)."""
    from tb_diagnostics.report.compare import cold_steps

    cold = cold_steps(span)
    warm = [s for s in span["steps"] if s["step"] not in cold]
    if not warm:
        return span["steps"], []
    return warm, [s for s in span["steps"] if s["step"] in cold]


def headline(span: dict[str, Any]) -> str:
    """One sentence that says what bounds the span and why, e.g. "Steps 2–5 are
    overhead-bound: the GPU is idle 97% of each step, mostly while the CPU launches work
    (99% of the idle time; 1,204 ops per step)."; it judges the warm steps and names a
    cold step apart ("step 0 is cold: 3.79 ms, 53× the warm median"), whose one-time
    costs would otherwise outweigh every warm step in the time-weighted figures."""
    steps = span["steps"]
    if span["errors"] and not steps:
        return "This span could not be analysed."
    if not steps:
        return "This span has no events to analyse."
    warm, cold = _warm_and_cold(span)
    verdict = span["verdict"]
    if not any(s["verdict"] == verdict for s in warm):
        verdict = warm[0]["verdict"]
    same = [s for s in warm if s["verdict"] == verdict]
    numbers = [s["step"] for s in same if s["step"] is not None]
    if not numbers:
        subject = f"The span is {verdict}"
    elif len(numbers) == 1:
        subject = f"Step {numbers[0]} is {verdict}"
    else:
        subject = f"Steps {step_ranges(numbers)} are {verdict}"
    others = [s for s in warm if s["verdict"] != verdict]
    split = _split_text(span, warm)
    if split:
        subject += f" ({split})"
    elif others:
        by_verdict: dict[str, list[int]] = {}
        for s in others:
            by_verdict.setdefault(s["verdict"], []).append(s["step"])
        subject += " (" + "; ".join(
            f"{'step' if len(n) == 1 else 'steps'} {step_ranges(n)}: {v}"
            for v, n in by_verdict.items()) + ")"
    wall = sum(s["wall_us"] for s in same)
    # Compute, as the verdict reads it: collective kernels are communication, said apart.
    busy = sum(compute_us(s) for s in same)
    alone = sum(s.get("exposed_collective_us") or 0.0 for s in same)
    device = "CPU" if span["device"]["kind"] == "cpu" else "GPU"
    each = "of each step" if len(same) > 1 else "of the step" if numbers else "of the span"
    text = f"{subject}: the {device} is busy {_pct(busy / wall if wall else 0)} {each}"
    and_idle = " and idle"
    if alone > 0 and wall > 0:
        text = (f"{subject}: the {device} computes {_pct(busy / wall)} {each}, waits in "
                f"collective kernels no compute overlaps {_pct(alone / wall)}")
        and_idle = " and is idle"
    idle = {c: sum(s["idle"][f"{c}_us"] for s in same) for c in _CAUSE_WORDS}
    total_idle = sum(idle.values())
    if total_idle > 0 and wall > 0:
        cause = max(idle, key=lambda c: idle[c])
        text += (f"{and_idle} {_pct(total_idle / wall)}, mostly {_CAUSE_WORDS[cause]} "
                 f"({_pct(idle[cause] / total_idle)} of the idle time")
        ops = sum(s["ops"] for s in same) / len(same)
        if cause == "launch" and ops >= 1:
            text += (f"; {ops:,.0f} {'op' if round(ops) == 1 else 'ops'} "
                     f"{'per step' if numbers else 'in the span'}")
        text += ")"
    if cold:
        text += "; " + _cold_text(cold, warm)
    return text + "."


def _split_text(span: dict[str, Any], warm: list[dict[str, Any]]) -> str:
    """How the warm time splits between the verdicts, where none holds nearly all of it
    (``analysis.headline``): ``11 input-bound steps take 6.10 s of 8.50 s; 15
    compute-bound, steps 12–26, take 2.40 s``; empty where one verdict holds it."""
    from tb_diagnostics.analysis.headline import ONE_SIDED_SHARE

    split = span.get("verdict_split") or []
    total = sum(x["wall_us"] for x in split)
    if len(split) < 2 or total <= 0 or split[0]["wall_us"] >= ONE_SIDED_SHARE * total:
        return ""
    unit = "iteration" if any("inferred" in s.get("flags", ()) for s in warm) else "step"
    parts = []
    for i, x in enumerate(split):
        n = len(x["steps"])
        verb = "takes" if n == 1 else "take"
        if i == 0:
            parts.append(f"{n} {x['verdict']} {unit}{'' if n == 1 else 's'} {verb} "
                         f"{_dur(x['wall_us'])} of {_dur(total)}")
            continue
        nums = [st for st in x["steps"] if st is not None]
        where = f", {'step' if n == 1 else 'steps'} {step_ranges(nums)}," if nums else ""
        parts.append(f"{n} {x['verdict']}{where} {verb} {_dur(x['wall_us'])}")
    return "; ".join(parts)


def _cold_text(cold: list[dict[str, Any]], warm: list[dict[str, Any]]) -> str:
    """``step 0 is cold: 3.79 ms, 53× the warm median of 71 µs`` (left out of the rest)."""
    walls = sorted(s["wall_us"] for s in warm)
    median = walls[len(walls) // 2] if len(walls) % 2 else \
        (walls[len(walls) // 2 - 1] + walls[len(walls) // 2]) / 2
    parts = []
    for s in cold:
        r = s["wall_us"] / median if median > 0 else 0.0
        ratio = (f", {r:.1f}× the warm median of {_dur(median)}" if 0 < r < 10 else
                 f", {r:.0f}× the warm median of {_dur(median)}" if r else "")
        parts.append(f"step {s['step']} is cold: {_dur(s['wall_us'])}{ratio}")
    return "; ".join(parts)


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
#: Columns of words, left-aligned (the others are figures).
TEXT_COLUMNS = frozenset({"step", "verdict", "main idle cause"})


def _columns(span: dict[str, Any]) -> tuple[str, ...]:
    """The step table's columns; "compute" (the verdict's busy figure) and "collectives ms"
    (collective kernels no compute overlaps) only where a step ran such kernels, "comm ms"
    only where a collective blocked the host, "profiler ms" only where the profiler took
    time of its own."""
    cols = _COLUMNS
    if any((s.get("exposed_collective_us") or 0) > 0 for s in span["steps"]):
        cols = (*cols[:3], "compute", *cols[3:], "collectives ms")
    if any(s["idle"].get("comm_us", 0) > 0 for s in span["steps"]):
        cols = (*cols, "comm ms")
    if any(s["idle"].get("profiler_us", 0) > 0 for s in span["steps"]):
        cols = (*cols, "profiler ms")
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
        roof = _roofline_lines(span, "      ")
        if roof:
            out.append(f"  {roof[0]}; most time lost:" if len(roof) > 1 else f"  {roof[0]}")
            out.extend(roof[1:])
        projections = whatif_lines(span)
        if projections:
            out.append("  what if (replayed; median warm step):")
            out.extend(f"      {line}" for line in projections)
        out.extend(_findings_text(span))
        out.append("")
    for r in doc["runs"]:
        if r.get("findings"):
            out.append(f"run {r['run']} · {len(r.get('ranks', []))} ranks")
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


def _md_finding(f: dict[str, Any], span: dict[str, Any] | None, shown: bool = True) -> str:
    subject = f" · {md_code(f['subject'])}" if shown and f.get("subject") else ""
    save = saving_text(f, span)
    return (f"- **{md(f['severity'])}** {md_code(f['rule'])}{subject}: {md(f['message'])}"
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
        out.append(f"**Verdict:** {md(headline(span))}")
        out.append("")
        for err in span["errors"]:
            out.append(f"> **Error:** {md(err)}")
        for note in span["notes"]:
            out.append(f"> Note: {md(note)}")
        if span["errors"] or span["notes"]:
            out.append("")
        if span["steps"]:
            cols = _columns(span)
            out.append("| " + " | ".join(md(c) for c in cols) + " |")
            out.append("|" + "|".join("---" if c in TEXT_COLUMNS and c != "step" else "--:"
                                       for c in cols) + "|")
            for s in span["steps"]:
                out.append("| " + " | ".join(md(v) for v in _row(s, cols)) + " |")
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
        projections = whatif_lines(span)
        if projections:
            out.append("**What if** (replayed; median warm step)")
            out.append("")
            out.extend(f"- {md(line)}" for line in projections)
            out.append("")
        if span["findings"]:
            out.append("**Findings**")
            out.append("")
            repeated = _repeated(span["findings"])
            out.extend(_md_finding(f, span, f.get("title", f["rule"]) in repeated)
                       for f in span["findings"])
            out.append("")
    for r in doc["runs"]:
        if r.get("findings"):
            out.append(f"## {md_code(r['run'])} · {len(r.get('ranks', []))} ranks")
            out.append("")
            for f in r["findings"]:
                out.append(_md_finding(f, None))
                out.extend(f"  - open {md(_cell_text(c))}" for c in f.get("cells", []))
            out.append("")
    # A file name that is not UTF-8 shows with U+FFFD: the text is valid UTF-8 anywhere.
    return displayable("\n".join(out).rstrip() + "\n")
