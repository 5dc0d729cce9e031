"""The ``host-work`` what-if card: the host's own code off the thread that feeds the device,
never the time an earlier cause names (a DataLoader call's own work is ``input``'s); and
the interval algebra it uses."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.intervals import Intervals, holds, intersect, subtract
from tb_diagnostics.analysis.views.whatif import CARDS, projection

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def iv(*pairs: tuple[float, float]) -> Intervals:
    return Intervals(np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float))


def test_intersect_and_subtract():
    a, b = iv((0, 10), (20, 30)), iv((5, 25))
    got = intersect(a, b)
    assert list(zip(got.start, got.end, strict=True)) == [(5, 10), (20, 25)]
    got = subtract(a, b)
    assert list(zip(got.start, got.end, strict=True)) == [(0, 5), (25, 30)]
    assert len(intersect(a, iv((10, 20)))) == 0  # half-open: touching is not covering
    assert subtract(a, Intervals.empty()) is a
    assert holds(a, np.array([0.0, 10.0, 15.0, 29.9])).tolist() == [True, False, False, True]


def _steps(b: TraceBuilder, python: str) -> None:
    """Three 5 ms steps: 3 ms of one frame (``python``) that starts no op, then one op
    launching a 500 µs kernel."""
    for s in range(3):
        t0 = 5000.0 * s
        b.step(s + 1, t0, 4999)
        if python == LOADER:
            b.annotation(LOADER, t0 + 10, 3000)
        else:
            b.python(python, t0 + 10, 3000)
        b.op("aten::mm", t0 + 3100, 10)
        b.launch("gemm", t0 + 3105, t0 + 3115, 500)


def test_the_card_claims_the_host_work_stall_finding():
    card = next(c for c in CARDS if c.id == "host-work")
    assert card.claims == ("host-work-stall",)


def test_the_hosts_own_code_off_the_thread_saves_its_idle(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b, "prep.py(3): decode")
    a = b.analysis()
    p = projection(a, "host-work")
    assert p is not None
    assert p.saving([1, 2]) == pytest.approx(3000.0, abs=5.0)


def test_a_dataloader_wait_is_inputs_not_host_work(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b, LOADER)
    a = b.analysis()
    p = projection(a, "host-work")
    assert p is None or p.saving([1, 2]) == pytest.approx(0.0, abs=1.0)
    assert projection(a, "input") is not None
