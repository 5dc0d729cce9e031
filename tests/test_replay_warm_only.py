"""A change acts on the warm steps only (``analysis.replay.restrict``): a cold step's
removed wait does not spill into the steps a saving is read off."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.intervals import Intervals
from tb_diagnostics.analysis.replay.engine import Change, replay
from tb_diagnostics.analysis.replay.restrict import within_windows
from tb_diagnostics.analysis.views.whatif import projection, warm_windows


def _cold_sync_then_warm(b: TraceBuilder) -> None:
    """Step 1 (cold, 0-20,000 µs): a 15 ms kernel the host then waits for in a
    synchronize. Steps 2 and 3 (300 µs each): one op launching a 200 µs kernel."""
    b.step(1, 0, 20_000)
    b.op("aten::mm", 5, 10)
    b.launch("cold_kernel", 8, 20, 15_000)
    b.runtime("cudaDeviceSynchronize", 30, 14_995)
    for k, t0 in enumerate((20_000.0, 20_300.0)):
        b.step(k + 2, t0, 300)
        b.op("aten::add", t0 + 10, 10)
        b.launch("k", t0 + 12, t0 + 20, 200)


def test_the_change_keeps_out_of_cold_steps(tmp_path):
    b = TraceBuilder(tmp_path)
    _cold_sync_then_warm(b)
    a = b.analysis()
    assert warm_windows(a) == [1, 2]
    m = a.model
    lane = int(m.lane[a.host_steps.rows[0]])
    syncs = frozenset(int(r) for r in a.sync_rows)
    change = Change(removed_host={lane: Intervals(np.array([40.0, 20_011.0]),
                                                  np.array([60.0, 20_012.0]))},
                    no_wait=syncs, device_scale=np.full(m.device_activity_rows.size, 0.5))
    warm = within_windows(a, change, warm_windows(a))
    # The cold step's host time, sync and kernel are left as recorded; the warm ones not.
    assert warm.removed_host[lane].start.tolist() == [20_011.0]
    assert warm.no_wait == frozenset()
    assert warm.device_scale.tolist() == [1.0, 0.5, 0.5]
    assert within_windows(a, change, [0, 1, 2]) is change


def test_a_cold_steps_freed_sync_saves_no_warm_step_anything(tmp_path):
    """Freed in step 1, the synchronize lets the host reach step 2 ahead of the device:
    replayed over every step, step 2 runs its kernel off a queue the cold step left and
    comes out ~100 µs shorter, a saving no step of a long run would see (step 2 holds no
    sync). On the warm steps only, nothing changes: the syncs card has nothing to give."""
    b = TraceBuilder(tmp_path)
    _cold_sync_then_warm(b)
    a = b.analysis()
    walls = np.asarray([w.wall_us for w in a.windows])
    everywhere = Change(no_wait=frozenset(int(r) for r in a.sync_rows))
    spilled = replay(a, everywhere).wall_us
    assert spilled[1] < walls[1] - 50
    kept = replay(a, within_windows(a, everywhere, warm_windows(a))).wall_us
    assert kept[1:] == pytest.approx(walls[1:])
    card = projection(a, "syncs")
    assert card is None or card.saving(warm_windows(a)) == pytest.approx(0.0, abs=1.0)
