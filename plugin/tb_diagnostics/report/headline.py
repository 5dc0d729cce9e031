"""The span's headline: one sentence saying what bounds it and why, in words.

It renders what the analysis decided (the span's verdict and its split by warm time,
``analysis.headline``; each step's verdict, ``verdict_reason`` and ``cold`` field;
``activity_complete``) and decides nothing. The text report, the Markdown and HTML
exports and the tab all print this sentence.
"""

from __future__ import annotations

import statistics
from typing import Any

from tb_diagnostics.report.host_work_words import (
    HOST_WORK_MENTION,
    HOST_WORK_MOSTLY,
    host_work_share,
    launch_words,
    longest_host_work,
)

_CAUSE_WORDS = {
    "input": "waiting for the DataLoader",
    "sync": "while the host blocks in syncs",
    "comm": "while the host waits in collectives",
    "launch": "while the CPU launches work",
    "other": "with nothing recorded on the host",
}
#: On a CPU-only trace the "device" is the CPU itself: its busy time is the heavy op
#: calls' own compute (``analysis.span.busy_intervals``), and "launch" time is the CPU in
#: short op calls and dispatch, not a CPU feeding an idle device.
_CPU_CAUSE_WORDS = {**_CAUSE_WORDS, "launch": "in short op calls and their dispatch"}
#: Idle time that no verdict is judged on, and its words (``analysis.verdict.UNJUDGED``).
_UNJUDGED_WORDS = {"profiler": "the profiler's own time", "compile": "compilation",
                   "module_load": "module loading"}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def compute_us(s: dict[str, Any]) -> float:
    """A step's compute busy µs (device activity that is not a collective kernel); a
    document older than the field has only ``device_busy_us``."""
    v = s.get("compute_busy_us")
    return s["device_busy_us"] if v is None else v


def unjudged_us(s: dict[str, Any]) -> float:
    """The step's labelled idle time that its verdict is not judged on: the profiler's own
    time and one-time costs (compilation, module loads)."""
    return sum(s["idle"].get(f"{c}_us", 0.0) for c in _UNJUDGED_WORDS)


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
    """The span's warm steps and its cold ones (every step is warm when all would be cold);
    the profiler's empty trailing stub (its ``stub`` field) is neither."""
    from tb_diagnostics.report.compare import cold_steps

    cold = cold_steps(span)
    steps = [s for s in span["steps"] if not s.get("stub")] or span["steps"]
    warm = [s for s in steps if s["step"] not in cold]
    if not warm:
        return steps, []
    return warm, [s for s in steps if s["step"] in cold]


def _unit(steps: list[dict[str, Any]]) -> str:
    """``iteration`` where the steps were inferred (no ProfilerStep#), else ``step``."""
    return "iteration" if any("inferred" in s.get("flags", ()) for s in steps) else "step"


def headline(span: dict[str, Any]) -> str:
    """One sentence that says what bounds the span and why, e.g. "Steps 2–5 are
    overhead-bound: the GPU is idle 97% of each step, mostly while the CPU launches work
    (99% of the idle time; 1,204 ops per step)."; it judges the warm steps and names a
    cold step apart ("step 0 is cold: 3.79 ms, 53× the warm median"), whose one-time
    costs would otherwise outweigh every warm step in the time-weighted figures. Steps
    whose device drained a launch backlog say so (their ``verdict_reason``), a span whose
    trace lacks device activity says its utilisation is a lower bound."""
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
    unit = _unit(steps)
    if not numbers:
        subject = f"The span is {verdict}"
    elif len(numbers) == 1:
        subject = f"{unit.capitalize()} {numbers[0]} is {verdict}"
    else:
        subject = f"{unit.capitalize()}s {step_ranges(numbers)} are {verdict}"
    others = [s for s in warm if s["verdict"] != verdict]
    split = _split_text(span, warm)
    if split:
        subject += f" ({split})"
    elif others:
        by_verdict: dict[str, list[int]] = {}
        for s in others:
            by_verdict.setdefault(s["verdict"], []).append(s["step"])
        subject += " (" + "; ".join(
            f"{unit if len(n) == 1 else unit + 's'} {step_ranges(n)}: {v}"
            for v, n in by_verdict.items()) + ")"
    drained = [s for s in same if s.get("verdict_reason")]
    if verdict == "compile-bound":
        # Compilation bounds these steps: how much of them it took says why.
        text = f"{subject}: {_compile_text(span, same, numbers, unit)}"
    elif drained and len(drained) == len(same):
        # The backlog decided the verdict: the device looked busy, the host is the limit.
        text = f"{subject}: {_backlog_text(drained, unit)}"
    else:
        text = f"{subject}: {_time_text(span, same, numbers, unit)}"
        if drained:
            text += f"; in {_steps_words(drained, unit)} {_backlog_text(drained, unit)}"
    path = _path_text(span, verdict, same, numbers, unit)
    if path:
        text += f"; {path}"
    if cold:
        text += "; " + _cold_text(cold, warm, unit)
    text += "."
    lower = _lower_bound_text(span)
    return f"{text} {lower}" if lower else text


#: What a step's end waits on, by the path's kind (``steps[].critical_path``).
_PATH_KIND_WORDS = {"host": "the host", "input": "the DataLoader", "device": "the device",
                    "comm": "communication", "latency": "launch latency and queueing"}


def _where_words(top: dict[str, Any]) -> str:
    """Where the main kind's time goes: ``in `aten::add_` dispatch``, ``in `aten::mm`'s
    kernels``, ``outside any op``, ``before `aten::add_`'s kernels start``."""
    from tb_diagnostics.names import short_name

    name = short_name(top["name"], 60)
    if top["what"] == "step":
        return "outside any op"
    if top["kind"] == "host" and top["what"] == "op":
        return f"in `{name}` dispatch"
    if top["kind"] == "device" and top["what"] == "op":
        return f"in `{name}`'s kernels"
    if top["kind"] == "latency":
        return f"before `{name}`'s kernels start" if top["what"] == "op" else \
            f"before `{name}` starts"
    return f"in `{name}`"


def _path_text(span: dict[str, Any], verdict: str, same: list[dict[str, Any]],
               numbers: list[int], unit: str) -> str:
    """``each step's end waits on the host for 72% of its time, mostly in `aten::add_`
    dispatch inside `forward```: the critical path of the verdict's warm steps as the
    analysis summed it (``verdict_split[].critical_path``, ``analysis.path_clause``);
    empty where the document has none for exactly these steps."""
    entry = next((x for x in span.get("verdict_split") or [] if x["verdict"] == verdict),
                 None)
    cp = (entry or {}).get("critical_path")
    if not cp or not cp.get("main_kind") or \
            list(entry["steps"]) != [s["step"] for s in same]:
        return ""
    whose = (f"each {unit}'s end" if len(same) > 1 else
             f"the {unit}'s end" if numbers else "the span's end")
    text = (f"{whose} waits on {_PATH_KIND_WORDS[cp['main_kind']]} for "
            f"{_pct(cp['main_share'])} of its time")
    top = cp.get("top")
    kind_us = cp["by_kind"][cp["main_kind"]]
    if not top or kind_us <= 0:
        return text
    where = _where_words(top)
    if top.get("inside") and top["inside"] != top["name"]:
        from tb_diagnostics.names import short_name

        where += f" inside `{short_name(top['inside'], 60)}`"
    share = top["us"] / kind_us
    if share >= 0.5:
        return f"{text}, mostly {where}"
    return f"{text}, the largest part {where} ({_pct(share)} of it)"


def _time_text(span: dict[str, Any], same: list[dict[str, Any]], numbers: list[int],
               unit: str) -> str:
    """``the GPU is busy 12% of each step and idle 88%, mostly while the CPU launches work
    (…)``: the time the verdict was judged on, and what it left out (one-time costs)."""
    wall = sum(s["wall_us"] for s in same)
    # What the verdict judged: the wall without the profiler's own time and one-time costs.
    judged = wall - sum(unjudged_us(s) for s in same)
    # Compute, as the verdict reads it: collective kernels are communication, said apart.
    busy = sum(compute_us(s) for s in same)
    alone = sum(s.get("exposed_collective_us") or 0.0 for s in same)
    cpu = span["device"]["kind"] == "cpu"
    device = "CPU" if cpu else "GPU"
    each = f"of each {unit}" if len(same) > 1 else f"of the {unit}" if numbers else "of the span"
    share = busy / judged if judged > 0 else 0.0
    # Where activity is missing from the trace, the busy share is a floor (see the end);
    # a floor of 100% says nothing more.
    least = "at least " if span.get("activity_complete") is False and share < 0.995 else ""
    # A CPU-only trace: the CPU is never idle while it "launches" — it computes in its
    # heavy ops, and spends the rest in short calls, dispatch or waits.
    text = (f"the CPU computes in heavy ops {least}{_pct(share)} {each}" if cpu
            else f"the {device} is busy {least}{_pct(share)} {each}")
    and_idle = " and spends" if cpu else " and idle"
    words = _CPU_CAUSE_WORDS if cpu else _CAUSE_WORDS
    if alone > 0 and judged > 0:
        text = (f"the {device} computes {least}{_pct(busy / judged)} {each}, waits in "
                f"collective kernels no compute overlaps {_pct(alone / judged)}")
        and_idle = " and is idle"
    idle = {c: sum(s["idle"][f"{c}_us"] for s in same) for c in _CAUSE_WORDS}
    total_idle = sum(idle.values())
    if total_idle > 0 and judged > 0:
        cause = max(idle, key=lambda c: idle[c])
        rest = " outside them" if cpu else ""
        # The launch cause holds dispatch and the host's own code (views.host_work).
        own = host_work_share(same, idle["launch"]) if cause == "launch" else 0.0
        if own < HOST_WORK_MOSTLY and same[0]["verdict"] == "compute-bound":
            own = 0.0  # a compute-bound step's little idle time needs no split
        said = launch_words(own, cpu) or words[cause]
        text += (f"{and_idle} {_pct(total_idle / judged)}{rest}, mostly {said} "
                 f"({_pct(idle[cause] / total_idle)} of {'that' if cpu else 'the idle'} time")
        ops = sum(s["ops"] for s in same) / len(same)
        if own >= HOST_WORK_MOSTLY:
            # The host ran its own code, not dispatch: its op count would mislead.
            text += longest_host_work(same)
        elif own >= HOST_WORK_MENTION:
            text += (f": {_pct(1 - own)} {'in op calls' if cpu else 'launching'}, "
                     f"{_pct(own)} in code that {'calls no op' if cpu else 'launches none'}"
                     f"{longest_host_work(same)}")
        if cause == "launch" and ops >= 1 and own < HOST_WORK_MOSTLY:
            text += (f"; {ops:,.0f} {'op' if round(ops) == 1 else 'ops'} "
                     f"{'per ' + unit if numbers else 'in the span'}")
        text += ")"
    return text + _left_out_text(same)


#: What compiles inside a window (``views.compiled``), in words.
_COMPILERS = "Dynamo, AOTAutograd, Inductor"


def compile_reason(idle_compile_us: float, wall_us: float, unit: str = "step") -> str:
    """A compile-bound step's ``verdict_reason``: ``the device sits idle 49.99 ms of the
    step's 51.00 ms (98%) while the host compiles (Dynamo, AOTAutograd, Inductor), a
    one-time cost``."""
    share = idle_compile_us / wall_us if wall_us > 0 else 0.0
    return (f"the device sits idle {_dur(idle_compile_us)} of the {unit}'s {_dur(wall_us)} "
            f"({_pct(share)}) while the host compiles ({_COMPILERS}), a one-time cost")


def _compile_text(span: dict[str, Any], same: list[dict[str, Any]], numbers: list[int],
                  unit: str) -> str:
    """Compile-bound steps: the share of their wall the device idled while the host
    compiled (one step: its ``verdict_reason``)."""
    wall = sum(s["wall_us"] for s in same)
    idle = sum(s["idle"].get("compile_us", 0.0) for s in same)
    if len(same) == 1:
        return compile_reason(idle, wall, unit if numbers else "span")
    device = "CPU" if span["device"]["kind"] == "cpu" else "GPU"
    return (f"the {device} sits idle {_pct(idle / wall if wall > 0 else 0.0)} of their wall "
            f"({_dur(idle)} of {_dur(wall)}) while the host compiles ({_COMPILERS}), "
            "a one-time cost")


def _left_out_text(same: list[dict[str, Any]]) -> str:
    """``, not counting 4.99 ms of compilation`` (one-time costs the verdict left out; the
    profiler's own time is said by its findings)."""
    parts = []
    for c in ("compile", "module_load"):
        us = sum(s["idle"].get(f"{c}_us", 0.0) for s in same)
        if us > 0:
            parts.append(f"{_dur(us)} of {_UNJUDGED_WORDS[c]}")
    if not parts:
        return ""
    return f", not counting {' and '.join(parts)} (one-time)"


def _steps_words(steps: list[dict[str, Any]], unit: str) -> str:
    nums = [s["step"] for s in steps if s["step"] is not None]
    if not nums:
        return "the span"
    return f"{unit if len(nums) == 1 else unit + 's'} {step_ranges(nums)}"


def _backlog_text(steps: list[dict[str, Any]], unit: str) -> str:
    """Why host-limited steps are so: one step's own ``verdict_reason``; for several, the
    medians of their host period and device work, and the queue from the first to the last
    (``views.backlog``, in the words of ``rules.launch_backlog_drain.backlog_reason``)."""
    if len(steps) == 1:
        return steps[0]["verdict_reason"]
    period = statistics.median(s["host_period_us"] for s in steps)
    work = statistics.median(s["device_work_us"] for s in steps)
    shrink = statistics.median(s["backlog_start_us"] - s["backlog_end_us"] for s in steps)
    return (f"the host issues a {unit} every {_dur(period)} for {_dur(work)} of device work "
            f"(medians); the device ran on a backlog that shrank by {_dur(shrink)} a {unit} "
            f"({_dur(steps[0]['backlog_start_us'])} → {_dur(steps[-1]['backlog_end_us'])} "
            "of queued device time)")


def _lower_bound_text(span: dict[str, Any]) -> str:
    """``Device utilisation is a lower bound: 923 of 1,556 kernel launches and copies have
    no device activity in the trace.`` where the trace lacks device activity
    (``activity_complete`` false, ``views.activity_coverage``); empty otherwise."""
    if span.get("activity_complete") is not False:
        return ""
    c = span.get("activity_coverage") or {}
    parts = []
    if c.get("launches_missing"):
        parts.append(f"{c['launches_missing']:,} of {c['launches']:,} kernel launches and "
                     "copies have no device activity in the trace")
    if c.get("no_launch"):
        parts.append(f"{c['no_launch']:,} of {c['activities']:,} device activities have no "
                     "launch")
    why = f": {'; '.join(parts)}" if parts else ""
    return f"Device utilisation is a lower bound{why}."


def _split_text(span: dict[str, Any], warm: list[dict[str, Any]]) -> str:
    """How the warm time splits between the verdicts, where none holds nearly all of it
    (``analysis.headline``): ``11 input-bound steps take 6.10 s of 8.50 s; 15
    compute-bound, steps 12–26, take 2.40 s``; empty where one verdict holds it."""
    from tb_diagnostics.analysis.headline import ONE_SIDED_SHARE

    split = span.get("verdict_split") or []

    def judged(x: dict[str, Any]) -> float:  # a document older than the key: the wall
        return x.get("judged_us", x["wall_us"])

    total = sum(judged(x) for x in split)
    if len(split) < 2 or total <= 0 or judged(split[0]) >= ONE_SIDED_SHARE * total:
        return ""
    unit = _unit(warm)
    # The time judged leaves one-time costs out; where it does, the figures say so.
    of = " judged" if total < sum(x["wall_us"] for x in split) - 0.5 else ""
    parts = []
    for i, x in enumerate(split):
        n = len(x["steps"])
        verb = "takes" if n == 1 else "take"
        # Steps whose wall holds one-time costs give it too: "1.00 ms (6.00 ms with …)".
        full = (f" ({_dur(x['wall_us'])} with one-time costs)"
                if x["wall_us"] - judged(x) > 0.5 else "")
        if i == 0:
            parts.append(f"{n} {x['verdict']} {unit}{'' if n == 1 else 's'} {verb} "
                         f"{_dur(judged(x))}{full} of {_dur(total)}{of}")
            continue
        nums = [st for st in x["steps"] if st is not None]
        where = f", {unit if n == 1 else unit + 's'} {step_ranges(nums)}," if nums else ""
        parts.append(f"{n} {x['verdict']}{where} {verb} {_dur(judged(x))}{full}")
    return "; ".join(parts)


def _cold_text(cold: list[dict[str, Any]], warm: list[dict[str, Any]],
               unit: str = "step") -> str:
    """``step 0 is cold: 3.79 ms, 53× the warm median of 71 µs`` (left out of the rest)."""
    walls = sorted(s["wall_us"] for s in warm)
    median = walls[len(walls) // 2] if len(walls) % 2 else \
        (walls[len(walls) // 2 - 1] + walls[len(walls) // 2]) / 2
    parts = []
    for s in cold:
        r = s["wall_us"] / median if median > 0 else 0.0
        ratio = (f", {r:.1f}× the warm median of {_dur(median)}" if 0 < r < 10 else
                 f", {r:.0f}× the warm median of {_dur(median)}" if r else "")
        parts.append(f"{unit} {s['step']} is cold: {_dur(s['wall_us'])}{ratio}")
    return "; ".join(parts)
