"""``/compare?baseline=&candidate=``: two runs of the log dir, compared.

The same compare document as ``tb-diagnostics compare --format json``, built
from the spans' tab summaries (their steps, findings and cold flags), without
ops and kernels (those need both models in memory at once).
"""

from __future__ import annotations

from typing import Any

from tb_diagnostics.report.compare import compare_runs
from tb_diagnostics.server.provider import DataProvider
from tb_diagnostics.server.requests import BadRequest


def compare(provider: DataProvider, baseline: str | None,
            candidate: str | None) -> tuple[int, dict[str, Any]]:
    """200 with the compare document, or 202 while a span of either run loads."""
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if not value:
            raise BadRequest(f"missing parameter {name!r}")
    docs, pending = [], []
    for name in (baseline, candidate):
        doc, waiting = provider.run_document(name)
        docs.append(doc)
        pending += waiting
    if pending:
        return 202, {"status": "loading", "progress": pending[0], "pending": len(pending)}
    doc = compare_runs(docs[0], docs[1], baseline_logdir=provider.logdir,
                       candidate_logdir=provider.logdir)
    return 200, {"status": "ready", **doc}
