"""The critical path of every step, from the replay graph (issue 27).

:mod:`.edges` finds each event's binding edge, :mod:`.labels` names the host time that
is the DataLoader's or a collective's, :mod:`.walk` walks every step back from the event
that ends it. The report's section is :mod:`tb_diagnostics.report.critical_path`.
"""

from tb_diagnostics.analysis.critpath.edges import KIND_NAMES
from tb_diagnostics.analysis.critpath.walk import CriticalPaths, critical_paths

__all__ = ["KIND_NAMES", "CriticalPaths", "critical_paths"]
