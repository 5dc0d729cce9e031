"""Iterations of a trace recorded without ``ProfilerStep#`` (no profiler schedule).

``torch.profiler.profile()`` without a schedule, or the legacy autograd profiler, writes
no step markers, yet the script's loop repeats itself. Iterations are inferred from the
main thread, from the first of these that is found, in this order of trust:

1. graph launches: ``cudaGraphLaunch`` / ``hipGraphLaunch``, one per iteration (a
   replayed graph, a captured decode step);
2. compiled regions: ``Torch-Compiled Region`` (or ``CompiledFunction``) calls, each from
   the ``TorchDynamo Cache Lookup`` before it;
3. the optimizer's annotations: ``Optimizer.step#…`` ends an iteration, else
   ``Optimizer.zero_grad#…`` starts one;
4. the DataLoader's fetches (``enumerate(DataLoader)#…``), which start one;
5. a unit that repeats at the top level (:mod:`.repeats`): a ``record_function`` label
   (the shallowest; among labels at that depth, the repeat count most labels share), the
   outermost ``nn.Module`` forward, else a sequence of top-level ops. A unit counts only
   if no one forward encloses two of its repeats (layers are not iterations) and its
   windows hold nearly all the thread's activity.

Each occurrence is widened to the outermost call that contains it alone (a
``record_function`` wrapping one iteration, an annotation one level up), so a marker deep
inside a per-iteration wrapper still cuts at the wrapper. When the chunks between
occurrences repeat with a period of several occurrences (a label used several times per
iteration, seven compiled graphs per forward), one iteration is that many occurrences.
The windows are contiguous on the host, like ``ProfilerStep#`` windows; an edge window
holds as many calls as the others (a slow last iteration stays whole), and a fragment at
the edges (less than half the calls of the median window) is dropped. Fewer than two
iterations is no inference: the span stays one window, and :func:`search_iterations`
says why.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tb_diagnostics.analysis.iterations import markers, repeats
from tb_diagnostics.analysis.iterations.lane import Lane, main_lane, make_lane
from tb_diagnostics.analysis.iterations.windows import Iterations
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import TraceModel

__all__ = ["Iterations", "infer_iterations", "search_iterations"]

_Source = Callable[[TraceModel, Lane], "Iterations | None"]
#: The sources, in order of trust.
SOURCES: tuple[_Source, ...] = (
    markers.graph_launches, markers.compiled_regions, markers.optimizer, markers.dataloader,
    repeats.label, repeats.module_forward, repeats.signature,
)

NOTHING_REPEATS = ("no graph launch, compiled region, optimizer step or DataLoader fetch "
                   "repeats on the main thread, and no sequence of calls repeats alike at its "
                   "top level")


def infer_iterations(model: TraceModel) -> Iterations | None:
    """Iteration windows of a trace without steps, or None when nothing repeats."""
    return search_iterations(model)[0]


def search_iterations(model: TraceModel) -> tuple[Iterations | None, str]:
    """The iteration windows, or None and why none were inferred (in words)."""
    m = model
    host = np.flatnonzero(m.is_host & (m.kind != Kind.PYTHON))
    if not host.size:
        return None, "the trace has no host calls"
    lane_id = main_lane(m, host)
    if lane_id is None:
        return None, "the trace has no top-level op or label calls"
    lane = make_lane(m, host[m.lane[host] == lane_id], lane_id)
    why: str | None = None
    for find in SOURCES:
        try:
            found = find(m, lane)
        except repeats.Rejected as rejected:
            why = why or str(rejected)
            continue
        if found is not None:
            return found, ""
    if why is not None:
        return None, (f"no graph launch, compiled region, optimizer step or DataLoader fetch "
                      f"repeats on the main thread, and {why}")
    return None, NOTHING_REPEATS
