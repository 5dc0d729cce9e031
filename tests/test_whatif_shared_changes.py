"""Cards whose changes are the same, bit for bit, are replayed and cut once (issue 28: a
replay and a path cut of a million steps each): the figures are those of each card's
change replayed and cut on its own, the old way."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from rules.conftest import TraceBuilder
from test_replay_vectorised import _busy_steps, _changes, busy_analysis

from tb_diagnostics.analysis.intervals import Intervals
from tb_diagnostics.analysis.replay.engine import Change, same_change
from tb_diagnostics.analysis.views import whatif
from tb_diagnostics.analysis.views.whatif import CARDS, replayed, warm_index
from tb_diagnostics.analysis.views.whatif_path import path_cut
from tb_diagnostics.report.rounding import rounded_array
from tb_diagnostics.report.whatif import whatif_section
from tb_diagnostics.trace.columns import bitwise_equal


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_bitwise_equal():
    a = np.asarray([0.0, 1.5, np.nan])
    assert bitwise_equal(None, None)
    assert not bitwise_equal(a, None) and not bitwise_equal(None, a)
    assert bitwise_equal(a, a.copy())  # NaN of the same bits: the same replay
    assert not bitwise_equal(a, np.asarray([-0.0, 1.5, np.nan]))  # 0.0 and -0.0 differ
    assert not bitwise_equal(a, a.astype(np.float32))
    assert not bitwise_equal(a, a[:2])
    assert bitwise_equal(np.zeros(0), np.zeros(0))
    assert bitwise_equal(a[::2], np.asarray([0.0, np.nan]))  # a strided view
    assert bitwise_equal(np.asarray([1, 2]), np.asarray([1, 2]))
    assert not bitwise_equal(np.asarray([True]), np.asarray([False]))


def _copy(c: Change) -> Change:
    return Change(removed_host={k: Intervals(iv.start.copy(), iv.end.copy())
                                for k, iv in c.removed_host.items()},
                  no_wait=frozenset(set(c.no_wait)),
                  device_scale=None if c.device_scale is None else c.device_scale.copy(),
                  stream_gap=None if c.stream_gap is None else c.stream_gap.copy())


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    return busy_analysis(tmp_path_factory)


def test_same_change(busy):
    changes = _changes(busy)
    for a_name, a in changes.items():
        for b_name, b in changes.items():
            assert same_change(a, b) == (a_name == b_name), (a_name, b_name)
        assert same_change(a, _copy(a))
    every = changes["all"]
    lanes = list(every.removed_host)
    flipped = Change(removed_host={k: every.removed_host[k] for k in reversed(lanes)},
                     no_wait=every.no_wait, device_scale=every.device_scale,
                     stream_gap=every.stream_gap)
    assert not same_change(every, flipped)  # the lanes are taken in turn: order counts
    gap = every.stream_gap.copy()
    gap[np.flatnonzero(~np.isnan(gap))[0]] = -0.0
    assert not same_change(every, Change(removed_host=every.removed_host,
                                         no_wait=every.no_wait,
                                         device_scale=every.device_scale, stream_gap=gap))
    assert not same_change(every, Change(removed_host=every.removed_host,
                                         device_scale=every.device_scale,
                                         stream_gap=every.stream_gap))


@pytest.fixture()
def twice(tmp_path, monkeypatch):
    """A span whose cards are four changes, two of them one change twice (a copy)."""
    b = TraceBuilder(tmp_path)
    _busy_steps(b)
    a = b.analysis()
    ch = _changes(a)
    cards = CARDS[:4]
    built = [ch["removed host time"], ch["stream gaps"], _copy(ch["stream gaps"]),
             ch["faster gemm"]]
    listed = [(card, whatif.warm_change(a, c)) for card, c in zip(cards, built, strict=True)]
    monkeypatch.setattr(whatif, "card_changes", lambda analysis: listed)
    return a, listed


def test_a_change_twice_is_replayed_once(twice):
    a, listed = twice
    ps = whatif.projections(a)
    assert [p.id for p in ps] == [c.id for c, _ in listed] + ["all"]
    assert ps[2].after_us is ps[1].after_us and ps[2].applied is ps[1].applied
    for p, (_, change) in zip(ps, listed, strict=False):
        before, after = replayed(a, change)  # each change on its own, as before
        assert _same(p.before_us, before) and _same(p.after_us, after), p.id


def test_the_section_is_each_card_on_its_own(twice):
    a, listed = twice
    section = whatif_section(a)
    warm = warm_index(a)
    n = len(a.windows)
    every = whatif.combine([c for _, c in listed])
    for doc, change in zip(section, [c for _, c in listed] + [every], strict=True):
        before, after = replayed(a, change)
        want = path_cut(a, change, warm).to_dict(
            np.asarray(before, dtype=float)[warm] - np.asarray(after, dtype=float)[warm])
        assert doc["path_segments"] == want, doc["id"]
        rows = list(doc["per_step"])
        assert [r["before_us"] for r in rows] == rounded_array(before[:n], 3).tolist()
        assert [r["after_us"] for r in rows] == rounded_array(after[:n], 3).tolist()
    # One card's dict is not another's: a later change to one leaves the other as it is.
    assert section[2]["path_segments"] == section[1]["path_segments"]
    assert section[2]["path_segments"] is not section[1]["path_segments"]
    snapshot = copy.deepcopy(section[1]["path_segments"])
    section[2]["path_segments"]["by_kind"]["host"] = -1.0
    assert section[1]["path_segments"] == snapshot
