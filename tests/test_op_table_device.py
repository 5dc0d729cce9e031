"""The op table's device time per op name and per (name, window), summed by bincount,
is bit for bit the ``np.add.at`` sum it replaced (from zero, in the activities' order)."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder, shared_analysis, shared_file_ids

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.hierarchy import launching_op
from tb_diagnostics.analysis.views.tables import op_table


def _old_device(a: SpanAnalysis) -> tuple[np.ndarray, np.ndarray]:
    m = a.model
    t = op_table(a)
    name_ids, n, n_win = t.name_ids, t.name_ids.shape[0], len(a.windows)
    acts = m.device_activity_rows
    op_of = launching_op(a)
    has = op_of >= 0
    pos = np.minimum(np.searchsorted(name_ids, m.name[op_of[has]]), max(n - 1, 0))
    match = n > 0 and name_ids[pos] == m.name[op_of[has]]
    self_dev = np.zeros(n)
    dev_pw = np.zeros((n, n_win))
    if n:
        np.add.at(self_dev, pos[match], m.dur[acts[has]][match])
        act_win = (a.activity_step[has] if len(a.host_steps)
                   else np.zeros(int(has.sum()), dtype=np.int64))
        sel = match & (act_win >= 0)
        np.add.at(dev_pw, (pos[sel], act_win[sel]), m.dur[acts[has]][sel])
    return self_dev, dev_pw


def _same(a: SpanAnalysis) -> None:
    t = op_table(a)
    self_dev, dev_pw = _old_device(a)
    for got, want in ((t.self_device, self_dev), (t.self_device_per_window, dev_pw)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_device_time_of_steps_and_of_a_span_without_steps(tmp_path):
    b = TraceBuilder(tmp_path / "steps")
    b.steady_steps(6)
    _same(b.analysis())
    b = TraceBuilder(tmp_path / "none")
    b.op("aten::mm", 10, 15)
    b.launch("gemm_kernel", 15, 22, 150)
    _same(b.analysis())


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_device_time_of_the_shared_traces(run, index):
    _same(shared_analysis(run, index))
