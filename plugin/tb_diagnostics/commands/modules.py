"""``tb-diagnostics modules LOGDIR``: the nn.Module tree of every span
(report/views/modules.py)."""

from tb_diagnostics.commands._view_command import make_view_command

COMMAND = make_view_command(
    "modules", "the nn.Module tree: calls, host and device time per module", order=44)
