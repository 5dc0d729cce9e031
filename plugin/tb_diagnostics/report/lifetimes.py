"""Which computed artifacts a span's report no longer reads, section by section.

A span's analysis memoizes every view it computes (``analysis.span.computed``), so that
the sections share them. When the engine opened the analysis for the report alone
(``engine.span_summary``), nothing reads it afterwards, and the views the remaining
sections do not read are only memory: on a span of 10⁶ steps the replay's graph and
positions alone are 440 MB, held through the what-if cards' path cuts, where the report's
peak is. :meth:`SpanAnalysis.release` drops them at the point given here.

The lists follow the order of ``report.document.span_document``. They are a plan, not a
condition of correctness: an artifact read again after its release is computed again,
the same, and named in ``analysis.recomputed`` (the tests check that no report does so).
"""

from __future__ import annotations

from collections.abc import Callable

from tb_diagnostics.analysis.dispatch_flat import _host_starts
from tb_diagnostics.analysis.headline import span_verdict
from tb_diagnostics.analysis.replay.capture import capture_regions
from tb_diagnostics.analysis.replay.compile_regions import compile_regions
from tb_diagnostics.analysis.replay.engine import replay_positions
from tb_diagnostics.analysis.replay.graph import replay_graph
from tb_diagnostics.analysis.views.backlog import launch_backlog
from tb_diagnostics.analysis.views.comm import step_comm
from tb_diagnostics.analysis.views.gaps import device_gaps
from tb_diagnostics.analysis.views.hierarchy import launching_op, op_parent, outermost_op
from tb_diagnostics.analysis.views.host_work import host_work
from tb_diagnostics.analysis.views.launch import launch_delays
from tb_diagnostics.analysis.views.memory import memory_series
from tb_diagnostics.analysis.views.op_costs import op_costs
from tb_diagnostics.analysis.views.roofline import roofline
from tb_diagnostics.analysis.views.tables import kernel_instances, op_table
from tb_diagnostics.analysis.views.warmth import step_walls
from tb_diagnostics.analysis.views.whatif import card_changes
from tb_diagnostics.rules._util import warm_steps

#: Read by the step columns and the rules, not by the verdict's path clauses nor the
#: what-if cards (a string: a cached property, ``model.`` the model's: the self times the
#: rules read; else the analysis's own: the host's launch time the windows and gaps read,
#: the activities grouped by window the dispatch rules read). Released before the path
#: clauses: held through them, they were ~250 MB of a 10⁶-step span's peak there.
AFTER_RULES: tuple[Callable | str, ...] = (
    op_table, kernel_instances, launch_delays, step_comm, _host_starts,
    op_costs, warm_steps, op_parent, memory_series, device_gaps, launch_backlog,
    "model._self_time_all", "launch_intervals", "_activities_by_window",
)

#: Read by the verdict and its path clauses, not by the what-if cards.
BEFORE_WHATIF: tuple[Callable | str, ...] = (span_verdict,)

#: Read by the cards' builders (``views.whatif.card_changes``), not by the replays after
#: them: held through every replay, they were about 200 MB of a 10⁶-step span's peak.
AFTER_CHANGES: tuple[Callable, ...] = (
    capture_regions, compile_regions, roofline, host_work, outermost_op, launching_op,
)

#: Read by the replays that project the cards, not by the cards' path cuts after them.
AFTER_PROJECTIONS: tuple[Callable, ...] = (
    replay_graph, replay_positions, step_walls, card_changes,
)
