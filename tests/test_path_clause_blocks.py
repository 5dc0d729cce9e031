"""path_clause.charge finds owners and regions a block of segments at a time
(``SEGMENT_BLOCK``) and sums by (name, kind) through ``_sums``: blocks of 1, 2, 3 and 7
segments charge as one block of all of them, and ``_sums`` is ``np.unique`` and
``np.bincount`` over its inverse, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder, shared_analysis, shared_file_ids
from test_critical_path import _backward
from test_linearity_steps import analysis_of

from tb_diagnostics.analysis import SpanAnalysis, path_clause
from tb_diagnostics.analysis.critpath import critical_paths


@pytest.mark.parametrize(("n", "high"), [(0, 1), (1, 1), (50, 3), (400, 10**6), (3000, 40)])
def test_sums_are_unique_and_bincount(n, high):
    rng = np.random.default_rng(n + high)
    key = rng.integers(0, high, n).astype(np.int64)
    weight = rng.uniform(0, 100, n)
    weight[rng.random(n) < 0.1] = 0.0
    uniq, total, count, labels = path_clause._sums(key, weight)
    want_u, inv = np.unique(key, return_inverse=True)
    assert uniq.tolist() == want_u.tolist()
    assert labels.tolist() == inv.reshape(-1).tolist()
    assert np.bincount(inv.reshape(-1), weights=weight).tobytes() == total.tobytes()
    assert np.bincount(inv.reshape(-1)).tolist() == count.tolist()


def _charged(a: SpanAnalysis, monkeypatch: pytest.MonkeyPatch, block: int,
             limit: int | None) -> list:
    monkeypatch.setattr(path_clause, "SEGMENT_BLOCK", block)
    cp = critical_paths(a)
    idx = np.arange(cp.dur.shape[0])
    every = [c.to_dict() for c in path_clause.charge(a, idx, cp.dur, limit=limit)]
    return [every, [c.to_dict() for c in path_clause.verdict_paths(a)]]


def _same_in_blocks(a: SpanAnalysis, monkeypatch: pytest.MonkeyPatch,
                    blocks: tuple[int, ...] = (1, 2, 3, 7), limit: int | None = None) -> None:
    whole = _charged(a, monkeypatch, 1 << 30, limit)
    for block in blocks:
        assert _charged(a, monkeypatch, block, limit) == whole, block


def test_tiny_steps_charge_in_blocks(monkeypatch):
    _same_in_blocks(analysis_of(30), monkeypatch)


def test_threads_joined_charge_in_blocks(tmp_path, monkeypatch):
    b = TraceBuilder(tmp_path)
    _backward(b)
    _same_in_blocks(b.analysis(), monkeypatch)


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_shared_charge_in_blocks(run, index, monkeypatch):
    # (blocks of a few segments: a pass per block over every name's segments is slow)
    _same_in_blocks(shared_analysis(run, index), monkeypatch, (7, 61), limit=8)
