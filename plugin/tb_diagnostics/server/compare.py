"""``/compare?baseline=&candidate=``: two runs of the log dir, compared.

The same compare document as ``tb-diagnostics compare --format json``, built
from the spans' tab summaries (their steps, findings and cold flags), without
ops and kernels (those need both models in memory at once).
"""

from __future__ import annotations

from typing import Any

from tb_diagnostics.report.compare import compare_runs
from tb_diagnostics.server.loader import Progress
from tb_diagnostics.server.provider import BadRequest, DataProvider, NotFound


def compare(provider: DataProvider, baseline: str | None,
            candidate: str | None) -> tuple[int, dict[str, Any]]:
    """200 with the compare document, or 202 while a span of either run loads."""
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if not value:
            raise BadRequest(f"missing parameter {name!r}")
    if provider._scan is None:
        raise NotFound(provider.problem or "TensorBoard has no --logdir")
    result = provider._scan.peek() or provider._scan.get(max_age_s=0.0)
    docs, pending = [], []
    for name in (baseline, candidate):
        found = result.logdir.run(name) if result and result.logdir else None
        if found is None:
            raise NotFound(f"no run {name!r} in {provider.logdir}")
        workers = []
        for w in found.workers:
            spans = []
            for f in w.spans:
                got = provider.loader.get(f)
                if isinstance(got, Progress):
                    pending.append(got.to_dict())
                elif not got.error:
                    spans.append(got.summary)
            workers.append({"worker": w.name, "spans": spans})
        docs.append({"run": name, "workers": workers})
    if pending:
        return 202, {"status": "loading", "progress": pending[0], "pending": len(pending)}
    doc = compare_runs(docs[0], docs[1], baseline_logdir=provider.logdir,
                       candidate_logdir=provider.logdir)
    return 200, {"status": "ready", **doc}
