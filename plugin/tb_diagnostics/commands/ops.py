"""``tb-diagnostics ops LOGDIR``: the Operators view of every span (report/views/ops.py)."""

from tb_diagnostics.commands._view_command import make_view_command

COMMAND = make_view_command(
    "ops", "every op by name (--group shapes: and input shapes): calls, host and device "
    "total/self time", order=41)
