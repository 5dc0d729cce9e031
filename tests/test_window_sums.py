"""``steps.per_window_sum`` adds each chunk's rows into the windows they fall in only: the
floats of the old form, a count of every window per chunk added to all of them."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.analysis import steps
from tb_diagnostics.analysis.steps import per_window_sum, window_index


def _old(lo, hi, start, rows, values=None):
    n = lo.shape[0]
    out = np.zeros(n)
    for a in range(0, rows.shape[0], steps.ROW_CHUNK):
        chunk = rows[a:a + steps.ROW_CHUNK]
        w = window_index(lo, hi, start, chunk)
        ok = w >= 0
        weights = None if values is None else values[chunk[ok]]
        out += np.bincount(w[ok], weights=weights, minlength=n)
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 15])
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_per_window_sum_is_the_old_form(monkeypatch, chunk, order):
    monkeypatch.setattr(steps, "ROW_CHUNK", chunk)
    rng = np.random.default_rng(5)
    lo = np.arange(0, 1000, 10, dtype=np.float64)
    hi = lo + rng.choice([7.0, 10.0], lo.shape[0])  # some windows chained, some gaps
    t = np.sort(rng.uniform(-20, 1020, 2000))
    rows = np.sort(rng.choice(t.shape[0], 1500, replace=False)).astype(np.int32)
    if order == "shuffled":
        rows = rng.permutation(rows)
    values = rng.normal(size=t.shape[0]) * 1e3
    values[rng.random(t.shape[0]) < 0.05] = -0.0
    values[rng.random(t.shape[0]) < 0.01] = np.nan
    values[rng.random(t.shape[0]) < 0.01] = np.inf
    for v in (values, None, np.full(t.shape[0], -0.0)):
        assert _same(per_window_sum(lo, hi, t, rows, v), _old(lo, hi, t, rows, v))


def test_per_window_sum_of_nothing():
    lo, hi = np.asarray([0.0, 5.0]), np.asarray([5.0, 9.0])
    t = np.asarray([-3.0, 20.0])
    for rows in (np.zeros(0, dtype=np.int32), np.asarray([0, 1], dtype=np.int32)):
        assert _same(per_window_sum(lo, hi, t, rows, t), _old(lo, hi, t, rows, t))
        assert _same(per_window_sum(lo, hi, t, rows), _old(lo, hi, t, rows))
    empty = np.zeros(0)
    assert _same(per_window_sum(empty, empty, t, np.asarray([0, 1])),
                 _old(empty, empty, t, np.asarray([0, 1])))
