"""The critical paths cut a block of steps at a time (``walk.BLOCK_STEPS``) and the
report ranks each step's segments and ops a block at a time
(``report.critical_path.BLOCK_STEPS``): blocks of 1, 2, 3 and 7 steps give the very
arrays and columns of one block of all the steps; the third piece of a node, kept apart
from the first two (``PathEdges.third``), is where a dense third row had it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from rules.conftest import TraceBuilder, shared_analysis, shared_file_ids
from test_critical_path import _backward
from test_linearity_steps import analysis_of

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.critpath import walk
from tb_diagnostics.analysis.critpath.edges import DENSE, PIECES, path_edges
from tb_diagnostics.analysis.path_clause import verdict_paths
from tb_diagnostics.report import critical_path as report_cp

BLOCKS = (1, 2, 3, 7)


def _fresh(a: SpanAnalysis) -> SpanAnalysis:
    """A new analysis of the same model: nothing memoized."""
    return SpanAnalysis(a.model)


def _everything(a: SpanAnalysis, monkeypatch: pytest.MonkeyPatch, block: int,
                ) -> tuple[dict[str, object], str, list[dict[str, object]]]:
    monkeypatch.setattr(walk, "BLOCK_STEPS", block)
    monkeypatch.setattr(report_cp, "BLOCK_STEPS", block)
    a = _fresh(a)
    cp = walk.critical_paths(a)
    arrays = {f.name: getattr(cp, f.name) for f in dataclasses.fields(cp)}
    n = len(a.windows)
    (_,), (column,) = report_cp.critical_path_columns(a, n)
    return arrays, json.dumps(column.take(0, n)), [c.to_dict() for c in verdict_paths(a)]


def _same_in_blocks(a: SpanAnalysis, monkeypatch: pytest.MonkeyPatch) -> None:
    whole_arrays, whole_columns, whole_verdicts = _everything(a, monkeypatch, 1 << 30)
    for block in BLOCKS:
        arrays, columns, verdicts = _everything(a, monkeypatch, block)
        for name, want in whole_arrays.items():
            got = arrays[name]
            if isinstance(want, np.ndarray):
                assert got.dtype == want.dtype and got.shape == want.shape, (block, name)
                assert got.tobytes() == want.tobytes(), (block, name)  # NaN and -0.0 too
            else:
                assert got == want, (block, name)
        assert columns == whole_columns, block
        assert verdicts == whole_verdicts, block


def test_tiny_steps_in_blocks_are_all_the_steps_at_once(monkeypatch):
    _same_in_blocks(analysis_of(40), monkeypatch)


def test_threads_joined_in_blocks_are_all_the_steps_at_once(tmp_path, monkeypatch):
    b = TraceBuilder(tmp_path)
    _backward(b)
    _same_in_blocks(b.analysis(), monkeypatch)


def test_no_steps_and_no_events(tmp_path, monkeypatch):
    b = TraceBuilder(tmp_path)
    b.op("aten::mm", 10, 15)
    b.launch("gemm_kernel", 15, 22, 150)
    _same_in_blocks(b.analysis(), monkeypatch)


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_shared_paths_in_blocks_are_all_the_steps_at_once(run, index, monkeypatch):
    _same_in_blocks(shared_analysis(run, index), monkeypatch)


def test_the_third_piece_is_a_joined_calls_and_reach_is_the_earliest(tmp_path):
    b = TraceBuilder(tmp_path)
    _backward(b)
    a = b.analysis()
    e = path_edges(a)
    n = e.pred.shape[0]
    t0, kind, row, lane = e.pieces(np.arange(n))
    assert t0.shape == (n, PIECES) and e.t0.shape == (DENSE, n)
    third = np.flatnonzero(~np.isnan(t0[:, DENSE]))
    assert np.all(lane[third, DENSE] >= 0)
    assert third.size and third.tolist() == e.third[0][~np.isnan(e.third[1])].tolist()
    assert np.all(kind[:, DENSE] == 0) and np.all(row[third, DENSE] >= 0)
    # Every node's reach is the earliest start of its pieces, the third's included.
    want = np.fmin.reduce(t0, axis=1)
    assert np.array_equal(e.reach, want, equal_nan=True)
    # Picked in any order, a node's pieces are its own.
    pick = np.arange(n)[::-1]
    assert np.array_equal(e.pieces(pick)[0], t0[pick], equal_nan=True)
    assert np.array_equal(e.pieces(pick)[2], row[pick])
