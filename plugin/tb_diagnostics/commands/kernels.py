"""``tb-diagnostics kernels LOGDIR``: the Kernels view of every span (report/views/kernels.py)."""

from tb_diagnostics.commands._view_command import make_view_command

COMMAND = make_view_command(
    "kernels", "every kernel by name (--group op: and launching op): calls, device time, "
    "launch configuration, recorded and theoretical occupancy, precision, Tensor Cores",
    order=42)
