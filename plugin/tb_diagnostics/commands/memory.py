"""``tb-diagnostics memory LOGDIR``: the Memory view of every span (report/views/memory.py)."""

from tb_diagnostics.commands._view_command import make_view_command

COMMAND = make_view_command(
    "memory", "allocated and reserved memory per device: the peak, the allocations alive "
    "there by op (--group inner: by the op that called the allocator), and what each step "
    "left allocated", order=43)
