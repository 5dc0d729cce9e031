"""The dispatch chains of every pass stacked in place are the padded copies joined as
before, and a group's steps are named as ``steps_text`` names them."""

from __future__ import annotations

import numpy as np
import pytest

from rules.conftest import TraceBuilder
from tb_diagnostics.rules._util import steps_text
from tb_diagnostics.rules.dispatch_chain import _stacked, _steps_named, _steps_of


def _old_stacked(parts):
    depth = max(p[0].shape[1] for p in parts)

    def padded(m: np.ndarray, fill: float) -> np.ndarray:
        out = np.full((m.shape[0], depth), fill, dtype=m.dtype)
        out[:, :m.shape[1]] = m
        return out

    key = np.concatenate([np.concatenate([padded(p[0], -9), padded(p[1], -9)], axis=1)
                          for p in parts])
    return key, np.concatenate([padded(p[2], np.nan) for p in parts])


@pytest.mark.parametrize("seed", range(8))
def test_stacked_equals_the_padded_copies(seed):
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(int(rng.integers(1, 5))):
        n, width = int(rng.integers(0, 6)), int(rng.integers(2, 7))
        value = rng.random((n, width))
        value[rng.random((n, width)) < 0.3] = np.nan
        parts.append((rng.integers(-9, 9, (n, width)), rng.integers(-9, 30, (n, width)), value))
    want, got = _old_stacked(parts), _stacked(parts)
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


def test_steps_named_as_steps_text(tmp_path):
    b = TraceBuilder(tmp_path / "run")
    b.steady_steps(6)
    a = b.analysis()
    for index in ([0], [1, 2, 3], [0, 2], [3, 2], [1, 2, 4], [5], list(range(6)), []):
        idx = np.asarray(index, dtype=np.int64)
        assert _steps_named(a, idx) == steps_text(_steps_of(a, idx)), index
