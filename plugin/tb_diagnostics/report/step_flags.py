"""Each step document's ``flag_why``: why the analysis flags it, in words.

The decision is :mod:`tb_diagnostics.analysis.views.step_flags`'s; this only words it,
once, in the step documents, so the CLI's JSON, the API's step records and the tab's
badge (its tooltip) say the same sentence.

``flag_why`` is ``{flag: sentence}`` (``{"artefact": …}`` today) or None where no flag
has a reason to give. ``flags`` keeps the step's own flags as before (the trailing stub
is already ``artefact`` there); the tab badges each flag of either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.step_flags import ArtefactFinding, ArtefactFlag, artefact_flags
from tb_diagnostics.lazy_rows import dict_column
from tb_diagnostics.report.step_columns import Layer, set_columns, where
from tb_diagnostics.rules._util import fmt_us

#: The reason on the stub step a mid-cycle stop leaves (``views.warmth``).
STUB_WHY = ("the stub the profiler's last step() opened before it stopped: nothing ran in it, "
            "so it is neither warm nor cold and no verdict reads it")
#: How the artefact rules mark their titles; the badge already says "artefact".
_TITLE_TAG = " (profiler artefact)"


def artefact_words(flag: ArtefactFlag) -> str:
    """Why ``flag``'s step is a profiler artefact: the stub's sentence, or ("Profiler
    flush sync: 2.16 ms of this step's 49.38 ms (4.4%) is the profiler's own time; its
    verdict leaves it out")."""
    if flag.stub:
        return STUB_WHY
    titles = "; ".join(dict.fromkeys(t.replace(_TITLE_TAG, "") for t in flag.titles))
    return (f"{titles}: {fmt_us(flag.profiler_us)} of this step's {fmt_us(flag.wall_us)} "
            f"({100 * flag.share:.1f}%) is the profiler's own time; its verdict leaves it out")


def flag_reason_columns(analysis: SpanAnalysis, findings: Iterable[ArtefactFinding],
                        n: int) -> Layer:
    """``flag_why`` of every step of ``n`` (one per window of ``analysis``) as a column:
    the flagged steps' ``{"artefact": words}``, None elsewhere."""
    why: dict[int, str] = {}
    for flag in artefact_flags(analysis, findings):
        why[range(n)[flag.index]] = artefact_words(flag)  # a later flag of a step wins
    at = np.asarray(sorted(why), dtype=np.int64)
    mask = np.zeros(n, dtype=bool)
    mask[at] = True
    words = dict_column(("artefact",), [[why[k] for k in at.tolist()]], at.size)
    return ("flag_why",), [where(mask, words)]


def add_flag_reasons(steps: list[dict[str, Any]], analysis: SpanAnalysis,
                     findings: Iterable[ArtefactFinding]) -> None:
    """Set ``flag_why`` on every step document of ``analysis`` (one per window)."""
    set_columns(steps, flag_reason_columns(analysis, findings, len(steps)))
