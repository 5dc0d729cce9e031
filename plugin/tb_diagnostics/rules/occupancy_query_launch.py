"""Occupancy query before a launch: the heavyweight, adaptively launched kernels.

What it detects
    ``cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags]`` (or the HIP
    twin) followed, in the same op on the same thread, by a kernel launch: the
    launch sizes its grid from the occupancy the kernel can reach. Per span:
    how many launches per step come with the query, from which ops, and which
    kernels, against the launches without one.

Why it matters
    A quick classification of the kernels, from the Hugging Face guide:
    GEMMs and convolutions (cuBLAS/cuDNN) have resource needs (registers,
    shared memory) that depend on the chosen variant, so the library asks how
    many blocks fit per SM before launching — heavyweight, adaptively launched
    kernels. Elementwise and reduction kernels have a fixed, light footprint
    and launch without the query. The query also costs host time on every
    launch.

How to fix
    Nothing to fix; information. Many queried launches per step mean many
    separate GEMMs: batch them (``torch.bmm``, grouped projections) or capture
    the step with CUDA graphs, which replays launches without the query.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import innermost_op
from tb_diagnostics.rules._util import MAX_EVIDENCE, fmt_count, fmt_us, short_name, warm_steps
from tb_diagnostics.rules.base import Finding, Rule, evidence

OCCUPANCY = re.compile(r"^(?:cuda|hip)OccupancyMaxActiveBlocksPerMultiprocessor")
LAUNCH = re.compile(r"^(?:cuda|hip)LaunchKernel|^cuLaunchKernel|^hipExtModuleLaunchKernel"
                    r"|^hipModuleLaunchKernel")


@dataclass(frozen=True)
class Thresholds:
    #: Report when at least this many queried launches are found.
    min_launches: int = 1


def check(analysis: SpanAnalysis, th: Thresholds) -> list[Finding]:
    m = analysis.model
    warm = warm_steps(analysis)
    queries = warm.host_rows(analysis, m.rows_matching(OCCUPANCY))
    if not queries.size:
        return []
    launches = warm.host_rows(analysis, m.rows_matching(LAUNCH))
    inner = innermost_op(analysis)
    paired_launch: list[int] = []
    paired_query: list[int] = []
    for lane in sorted_sets.unique(m.lane[queries]).tolist():
        q = queries[m.lane[queries] == lane]
        ln = launches[m.lane[launches] == lane]
        if not ln.size:
            continue
        j = np.searchsorted(m.start[ln], m.end[q], side="left")
        ok = j < ln.size
        cand = ln[np.minimum(j, ln.size - 1)]
        # The launch must belong to the same op as the query (the library call).
        ok &= m.parent[cand] == m.parent[q]
        paired_launch += cand[ok].tolist()
        paired_query += q[ok].tolist()
    if len(paired_launch) < th.min_launches:
        return []
    pl = np.asarray(paired_launch)
    acts = m.device_activity_rows
    kernels = acts[np.isin(m.launcher[acts], pl)]
    steps_n = warm.n
    ops = Counter(m.name_of(int(o)) for o in inner[pl].tolist() if o >= 0)
    kern = Counter(m.name_of(int(k)) for k in kernels.tolist())
    other = launches.size - pl.size
    op_text = ", ".join(f"{n} ({fmt_count(c / steps_n)})" for n, c in ops.most_common(3))
    k_text = "; ".join(short_name(n, 60) for n, _ in kern.most_common(2))
    q_time = float(m.dur[np.asarray(paired_query)].sum()) / steps_n
    ev = []
    for q, ln in list(zip(paired_query, paired_launch, strict=True))[:3]:
        ev.append(evidence(analysis, q, "occupancy query"))
        ev.append(evidence(analysis, ln, "the launch it sizes"))
    ev += [evidence(analysis, int(k), "a heavyweight kernel") for k in kernels[:2].tolist()]
    return [Finding(
        rule=RULE.id, severity=RULE.severity, title=RULE.title,
        message=(f"{fmt_count(pl.size / steps_n)} launch(es) {warm.per} are preceded by an "
                 f"occupancy query ({fmt_us(q_time)} of host time {warm.per}): heavyweight, "
                 "adaptively "
                 f"launched kernels from {op_text or 'unknown ops'}"
                 f"{', e.g. ' + k_text if k_text else ''}. The other "
                 f"{fmt_count(other / steps_n)} launch(es) {warm.per} have none (light "
                 "elementwise or reduction kernels)."),
        steps=warm.steps(analysis), evidence=ev[:MAX_EVIDENCE], savings_us=None,
        confirm=("expand one of these launches in the trace: the occupancy call sits right "
                 "before cudaLaunchKernel inside the GEMM/conv op"))]


RULE = Rule(id="occupancy-query-launch", title="Occupancy query before launch (heavy kernel)",
            severity="info", check=check, thresholds=Thresholds(), doc=__doc__,
            no_saving=("the query's cost is the driver's, and the replay keeps host time outside "
                       "its changes"))
