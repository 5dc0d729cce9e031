"""Too few active steps: not enough warm steps to trust the figures.

What it detects
    A span with fewer than ``min_warm_steps`` warm profiled steps: no
    ``ProfilerStep#`` at all, fewer than three steps, or steps of which only the
    cold first one would remain (see ``cold-start-step``). The empty stub a
    profiler stopped mid-cycle opens with its last ``prof.step()`` is no warm
    step either.

Why it matters
    One step cannot tell a one-time cost from a steady one: a profiler buffer
    request, a cold kernel selection or a stray sync look exactly like a real
    bottleneck. xprof warns on incomplete steps and on "no step marker
    observed"; HTA drops the last step and tells you to skip the first. With
    three or more warm steps, a gap that appears once is an artefact and one
    that recurs is yours.

How to fix
    Profile more steps and call ``prof.step()`` once per iteration: give
    ``torch.profiler.profile`` a ``schedule=torch.profiler.schedule(wait=1,
    warmup=2, active=5)`` and
    ``on_trace_ready=torch.profiler.tensorboard_trace_handler(logdir)``, and end
    every loop iteration with ``prof.step()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.warmth import step_walls
from tb_diagnostics.rules._util import all_steps, evidence_rows, steps_text
from tb_diagnostics.rules.base import Finding, Rule


@dataclass(frozen=True)
class Thresholds:
    #: Fewer warm (not cold) steps than this fires the rule.
    min_warm_steps: int = 3


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    windows = analysis.windows
    confirm = "profile at least 5 active steps after 1-2 warm-up steps and compare them"
    if not len(analysis.host_steps):
        return [Finding(
            rule=RULE.id, severity=RULE.severity, title=RULE.title,
            message=("No ProfilerStep# events: the span is one window, so one-time costs "
                     "cannot be told from steady ones. Use a schedule and call prof.step() "
                     "every iteration."),
            steps=[None], evidence=[], savings_us=None, confirm=confirm)]
    sw = step_walls(analysis)
    warm = int(sw.warm.sum())
    if warm >= th.min_warm_steps:
        return []
    steps = all_steps(analysis)
    # Which steps are not warm, and why: the cold first one, the profiler's empty stub.
    why = ["the first is cold"] if sw.cold.any() else []
    why += [f"step {w.step} is the profiler's empty stub"
            for w, stub in zip(windows, sw.stub.tolist(), strict=True) if stub]
    count = f"{len(windows)} profiled step(s) ({steps_text(steps)})"
    if why:
        count += f", of which {' and '.join(why)}: {warm} warm"
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"Only {count}, fewer than {th.min_warm_steps}: a one-off event cannot be "
                 "told from a recurring one."),
        steps=steps, evidence=evidence_rows(analysis, [w.row for w in windows], "a step"),
        savings_us=None, confirm=confirm)]


RULE = Rule(id="too-few-active-steps", title="Too few active steps", severity="warning",
            check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving="it is a recording setting, not a cost")
