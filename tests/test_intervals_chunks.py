"""``intervals.length_before`` and ``covered`` over a long array of times run in chunks
(CUMULATIVE_CHUNK) and give, float for float, what one pass gives."""

from __future__ import annotations

import numpy as np

from tb_diagnostics.analysis import intervals
from tb_diagnostics.analysis.intervals import covered, length_before, union


def test_chunks_give_the_floats_of_one_pass(monkeypatch):
    rng = np.random.default_rng(7)
    start = np.sort(rng.uniform(0, 1e6, 5_000))
    iv = union(start, start + rng.uniform(0.1, 400.0, start.size))
    t = rng.uniform(-10.0, 1.1e6, 10_001)
    lo, hi = np.sort(t)[:-1], np.sort(t)[1:]
    whole = length_before(iv, t), covered(iv, lo, hi)
    for chunk in (1, 7, 4096):
        monkeypatch.setattr(intervals, "CUMULATIVE_CHUNK", chunk)
        got = length_before(iv, t), covered(iv, lo, hi)
        for a, b in zip(got, whole, strict=True):
            assert a.tobytes() == b.tobytes()
    assert whole[0][0] >= 0.0 and whole[1].sum() > 0.0
