"""The text, Markdown and HTML renderings show collective kernels that no compute overlaps
apart from compute and from idle time: their own column, bar part, colour and words."""

from __future__ import annotations

import re

from tb_diagnostics.report.html import TAB_CSS, palette, render_html
from tb_diagnostics.report.text import headline, render_markdown, render_text


def _step(n, wall, compute, alone, verdict, cause, **idle):
    idle = {f"{c}_us": idle.get(c, 0.0) for c in ("input", "sync", "comm", "launch", "other",
                                                   "profiler")}
    busy = compute + alone
    return {"step": n, "wall_us": wall, "device_busy_us": busy, "device_busy": busy / wall,
            "compute_busy_us": compute, "compute_busy": compute / wall,
            "exposed_collective_us": alone, "idle": idle, "verdict": verdict,
            "main_idle_cause": cause, "ops": 6, "flags": [], "self_cpu_us": 0.0,
            "self_device_us": 0.0, "kernels": 2}


def _doc(steps):
    span = {"span": "1", "file": "run/rank0.1.pt.trace.json", "steps": steps, "findings": [],
            "errors": [], "notes": [], "verdict": steps[0]["verdict"],
            "device": {"kind": "cuda", "name": None}, "roofline": None, "whatif": []}
    return {"logdir": "x", "runs": [{"run": "r", "workers": [{"worker": "w",
                                                              "spans": [span]}]}]}


def _rccl_steps():
    # Steps of 49 and 19 ms, 32 and 11.9 ms of them collective kernels running alone.
    return [_step(0, 49_000, 15_000, 32_000, "communication-bound", "comm", launch=400,
                  other=1600),
            _step(1, 19_000, 6_000, 11_900, "communication-bound", "comm", launch=400,
                  other=700)]


def test_headline_says_compute_and_lone_collectives_apart():
    span = _doc(_rccl_steps())["runs"][0]["workers"][0]["spans"][0]
    assert headline(span).startswith(
        "Steps 0–1 are communication-bound: the GPU computes 31% of each step, waits in "
        "collective kernels no compute overlaps 65% and is idle 5%, mostly with nothing "
        "recorded on the host (74% of the idle time).")


def test_text_and_markdown_tables_have_compute_and_collective_columns():
    doc = _doc(_rccl_steps())
    lines = render_text(doc).splitlines()
    head = next(x for x in lines if x.strip().startswith("step "))
    assert head.split()[:4] == ["step", "wall", "ms", "busy"]
    assert "compute" in head and head.rstrip().endswith("collectives ms")
    row = next(x for x in lines if x.strip().startswith("#0 "))
    assert row.split() == ["#0", "49.00", "96%", "31%", "communication-bound", "comm", "0.00",
                           "0.00", "0.40", "1.60", "32.00"]
    md = render_markdown(doc)
    assert ("| step | wall ms | busy | compute | verdict | main idle cause | input ms | "
            "sync ms | launch ms | other ms | collectives ms |") in md
    assert "| #1 | 19.00 | 94% | 32% | communication-bound | comm |" in md
    # Verdict and cause stay the left-aligned columns wherever "compute" is inserted.
    assert "|--:|--:|--:|--:|---|---|--:|--:|--:|--:|--:|" in md


def test_without_collective_kernels_the_tables_are_as_before():
    doc = _doc([_step(1, 1000, 400, 0, "mixed", "launch", launch=600)])
    text = render_text(doc)
    assert "collectives ms" not in text and "compute" not in text
    assert "the GPU is busy 40% of the step and idle 60%" in text


def test_html_bar_has_the_collective_part_in_its_own_colour():
    css = TAB_CSS.read_text(encoding="utf-8")
    light = re.search(r":root\s*\{(.*?)\}", css, re.S).group(1)
    dark = re.search(r"html\.dark\s*\{(.*?)\}", css, re.S).group(1)
    colour = re.search(r"--c-collective:\s*(#[0-9a-fA-F]+)", light).group(1)
    # Its own colour in both themes: no other part of the bar shares it.
    for theme in (light, dark):
        parts = dict(re.findall(r"--c-([\w-]+):\s*(#[0-9a-fA-F]+)", theme))
        assert list(parts.values()).count(parts["collective"]) == 1
    assert palette()["collective"] == colour
    page = render_html(_doc(_rccl_steps()))
    bars = re.findall(r'<rect class="bar"[^>]*fill="(#[0-9a-fA-F]+)"><title>step 0: ([^<]*)'
                      r"</title>", page)
    assert bars == [(palette()["busy"], "compute busy 15.00 ms"),
                    (colour, "collectives no compute overlaps 32.00 ms"),
                    (palette()["launch"], "launching work 400 µs"),
                    (palette()["other"], "nothing recorded 1.60 ms")]
    assert f'background:{colour}"></i>collectives no compute overlaps' in page
    assert '<th class="">collectives ms</th>' in page and '<th class="l">verdict</th>' in page
