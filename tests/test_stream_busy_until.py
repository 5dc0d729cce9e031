"""The launch delays' stream backlog, kept per device activity, is the per-row column it
replaced read at the activities."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder, shared_analysis, shared_file_ids

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.views.launch import _stream_busy_until


def _old_busy_until(analysis: SpanAnalysis) -> np.ndarray:
    m = analysis.model
    out = np.full(len(m), -np.inf)
    acts = m.device_activity_rows
    if not acts.size:
        return out
    key = m.device[acts].astype(np.int64) * (1 << 32) + m.stream[acts]
    order = np.lexsort((m.start[acts], key))
    rows, key, ends = acts[order], key[order], m.end[acts][order]
    bounds = np.append(np.flatnonzero(np.r_[True, key[1:] != key[:-1]]), rows.size)
    prev = np.full(rows.size, -np.inf)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        prev[a + 1:b] = np.maximum.accumulate(ends[a:b])[:-1]
    out[rows] = prev
    return out


def _same(a: SpanAnalysis) -> None:
    want = _old_busy_until(a)[a.model.device_activity_rows]
    got = _stream_busy_until(a)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_backlog_of_steps_and_of_no_device_work(tmp_path):
    b = TraceBuilder(tmp_path / "steps")
    b.steady_steps(6)
    _same(b.analysis())
    b = TraceBuilder(tmp_path / "cpu")
    b.op("aten::mm", 10, 15)
    _same(b.analysis())


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_backlog_of_the_shared_traces(run, index):
    _same(shared_analysis(run, index))
