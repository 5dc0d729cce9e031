"""The rule contract: what a rule is and what a finding carries.

A rule is a small pure function of a :class:`SpanAnalysis` that returns
findings. Each rule lives in its own module of this package, exposes one
module-level ``RULE = Rule(...)`` and is picked up by the registry in
:mod:`tb_diagnostics.rules` without touching any other file.

The rule's docstring (the ``check`` function's module docstring) has three
parts, each introduced by a line of its own: ``What it detects``, ``Why it
matters`` and ``How to fix`` (with the PyTorch change where there is one);
``tb-diagnostics rules`` and ``docs/rules.md`` are generated from them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tb_diagnostics.analysis.dispatch import KIND_LABEL
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.categories import Kind

SEVERITIES = ("critical", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}
RULE_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Evidence:
    """One exact event behind a finding, enough to find it in the timeline."""

    row: int  # model row (the tab's timeline highlights it)
    name: str
    category: str  # op, annotation, runtime, driver, python, kernel, memcpy, memset…
    ts: float  # µs since the trace origin
    dur: float  # µs
    lane: str  # host thread or device stream, as labelled in the timeline
    correlation: int | None
    external_id: int | None
    note: str | None = None  # why this event is evidence (e.g. "launched by …")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ts"] = round(self.ts, 3)
        d["dur"] = round(self.dur, 3)
        return d


def evidence(analysis: SpanAnalysis, row: int, note: str | None = None) -> Evidence:
    """The :class:`Evidence` for model ``row``."""
    m = analysis.model
    corr = int(m.correlation[row])
    ext = int(m.external_id[row])
    return Evidence(
        row=int(row),
        name=m.name_of(row),
        category=KIND_LABEL[Kind(int(m.kind[row]))],
        ts=float(m.start[row]),
        dur=float(m.dur[row]),
        lane=m.lanes[int(m.lane[row])].label,
        correlation=corr if corr >= 0 else None,
        external_id=ext if ext >= 0 else None,
        note=note,
    )


@dataclass(frozen=True)
class Finding:
    """What a rule found, with the numbers, the events and what fixing it is worth."""

    rule: str
    severity: str
    title: str
    message: str  # the numbers that triggered it, in a sentence
    steps: list[int | None]  # step numbers concerned (None: a span without steps)
    evidence: list[Evidence]
    savings_us: float | None  # honest per-step estimate, None where none is honest
    confirm: str  # how to check it is real
    artefact: bool = False  # a profiler artefact, not the user's code
    #: What this finding is about, in a few words (the op, the sync call, the kernel):
    #: it tells apart findings of one rule in one span, so renderers show it with the title.
    subject: str | None = None
    #: The steps' savings added up, beside ``savings_us`` (that total per step) where the finding
    #: replays a change of its own that is part of a what-if card (``views.whatif``).
    savings_total_us: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "message": self.message,
            "steps": list(self.steps),
            "evidence": [e.to_dict() for e in self.evidence],
            "savings_us": None if self.savings_us is None else round(self.savings_us, 3),
            "confirm": self.confirm,
            "artefact": self.artefact,
            "subject": self.subject,
            "savings_total_us": (None if self.savings_total_us is None
                                 else round(self.savings_total_us, 3)),
        }

    @property
    def sort_key(self) -> tuple[int, float]:
        return SEVERITY_RANK[self.severity], -(self.savings_us or 0.0)


@dataclass(frozen=True)
class Rule:
    """A registered rule: identity, default thresholds and its check function."""

    id: str
    title: str
    severity: str  # the default severity of its findings
    check: Callable[[SpanAnalysis, Any], list[Finding]]
    thresholds: Any = None  # a frozen dataclass of named thresholds, or None
    doc: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: Why its findings carry no saving when they carry none (the replay cannot model the
    #: change, or there is nothing to remove): said at the end of their message.
    no_saving: str = ""
    #: When its findings take another severity than ``severity``, in words
    #: (``critical when …``): ``tb-diagnostics rules`` and docs/rules.md say it beside the
    #: default, so the list and the reports never disagree.
    escalation: str = ""

    @property
    def severity_text(self) -> str:
        """``warning`` or ``warning, critical when the device waits for input …``."""
        return self.severity + (f", {self.escalation}" if self.escalation else "")

    def __post_init__(self) -> None:
        if not RULE_ID.match(self.id):
            raise ValueError(f"rule id {self.id!r} is not kebab-case")
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.id}: unknown severity {self.severity!r}")

    def run(self, analysis: SpanAnalysis) -> list[Finding]:
        findings = self.check(analysis, self.thresholds)
        if not self.no_saving:
            return findings
        tail = f" No saving is given: {self.no_saving}."
        return [replace(f, message=f.message + tail) if f.savings_us is None else f
                for f in findings]

    def doc_sections(self) -> dict[str, str]:
        """The docstring split into its three parts (and any preamble)."""
        sections: dict[str, list[str]] = {"summary": []}
        current = "summary"
        for line in (self.doc or "").strip().splitlines():
            head = line.strip().rstrip(":").lower()
            if head in ("what it detects", "why it matters", "how to fix"):
                current = head
                sections[current] = []
                continue
            sections[current].append(line)
        return {k: "\n".join(v).strip() for k, v in sections.items()}
