"""The seed table's totals per step window: self CPU, self device, op and kernel counts.

Apart from :mod:`.span` so that module stays about the views; ``SpanAnalysis.windows``
calls it with the windows' device bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tb_diagnostics.analysis.steps import per_window_sum
from tb_diagnostics.trace.categories import Kind
from tb_diagnostics.trace.model import row_indices

if TYPE_CHECKING:
    from tb_diagnostics.analysis.span import SpanAnalysis


def per_window_totals(analysis: SpanAnalysis, lo: np.ndarray,
                      hi: np.ndarray) -> dict[str, np.ndarray]:
    """Per window ``[lo[k], hi[k])`` (the host windows where there are steps): self CPU µs
    of ops and annotations, op calls, self device µs and kernels of its activities."""
    m = analysis.model
    n = lo.shape[0]
    hs = analysis.host_steps
    host_lo = hs.host_start if len(hs) else lo
    host_hi = hs.host_end if len(hs) else hi

    ops = analysis.op_rows
    # Ops and the annotations that are not DataLoader waits, as a mask: linear, where
    # union1d/setdiff1d sort (a fifth of the analysis on a large trace).
    mask = m.kind == Kind.USER_ANNOTATION  # (a mask: no row list made for it)
    mask[analysis.input_rows] = False
    mask[ops] = True
    cpu_rows = row_indices(mask)
    del mask
    # The self times once (the rules, later, keep theirs): not held through the sections
    # between.
    self_cpu = per_window_sum(host_lo, host_hi, m.start, cpu_rows, m.self_time_once())
    del cpu_rows
    op_count = per_window_sum(host_lo, host_hi, m.start, ops)

    acts = m.device_activity_rows
    act_w = analysis.activity_step if len(hs) else np.zeros(acts.shape[0], dtype=np.int32)
    ok = act_w >= 0
    self_dev = np.bincount(act_w[ok], weights=m.dur[acts][ok], minlength=n)
    is_kernel = m.kind[acts] == Kind.KERNEL
    kernels = np.bincount(act_w[ok & is_kernel], minlength=n)
    return {"self_cpu": self_cpu, "ops": op_count, "self_device": self_dev,
            "kernels": kernels}
