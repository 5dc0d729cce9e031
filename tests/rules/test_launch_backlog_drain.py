"""launch-backlog-drain and views.backlog: a device that runs on work queued earlier."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.analysis.views.backlog import launch_backlog, union_per_group
from tb_diagnostics.rules.launch_backlog_drain import RULE, backlog_reason


def drain_steps(b, steps: int = 8, period: float = 119.0, kernel_us: float = 30.0,
                backlog: int = 10, backlog_kernel_us: float = 100.0) -> None:
    """The issue's micro-benchmark: a step issued every ``period`` µs launching two
    ``kernel_us`` kernels, behind ``backlog`` kernels launched before the record window
    (no launch call, correlation ids below every launch's), run back to back."""
    for i in range(backlog):
        b.kernel("pre_window_kernel", i * backlog_kernel_us, backlog_kernel_us, corr=1 + i)
    cursor = backlog * backlog_kernel_us
    for s in range(steps):
        t0 = s * period
        b.step(s + 1, t0, period)
        b.op("aten::mm", t0 + 5, 50)
        for at in (10, 40):
            b.launch("gemm_kernel", t0 + at, cursor, kernel_us)
            cursor += kernel_us


def test_backlog_view_counts_the_queue_as_hta_does(builder):
    drain_steps(builder)
    bl = launch_backlog(builder.analysis())
    # Step 2 (host [119, 238)): at 119, backlog kernels 2..9 have not started (8) and
    # step 1's two launches are queued: 10; 881 µs of backlog left plus step 1's 60 µs.
    assert bl.backlog_start[1] == 10 and bl.backlog_start_us[1] == pytest.approx(941.0)
    # At 238: kernels 3..9 (7) and four launches; the device ran 119 µs, 60 were added.
    assert bl.backlog_end[1] == 11 and bl.backlog_end_us[1] == pytest.approx(882.0)
    assert bl.change_us[1] == pytest.approx(-59.0)
    assert bl.host_period_us[1] == pytest.approx(119.0)
    assert bl.device_work_us[1] == pytest.approx(60.0)
    # Step 2's first kernel starts at 1060, 1060 - (129 + 5) after its call returned,
    # and its second at 1090 - (159 + 5): 926 µs each.
    assert bl.launch_queue_us[1] == pytest.approx(926.0)
    assert bl.trend(1) == "draining" and bl.host_limited[1]
    fields = bl.step_fields(1)
    assert fields["backlog_start"] == 10 and fields["host_limited"] is True
    assert fields["backlog_trend"] == "draining" and fields["launch_queue_us"] == 926.0
    assert bl.pre_window.sum() == 10


def test_fires_and_says_the_host_is_the_limit(builder):
    drain_steps(builder)
    a = builder.analysis()
    (f,) = RULE.run(a)
    # Step 1 holds the backlog (a 1060 µs window): cold, left out; steps 2-8 drain.
    assert f.steps == [2, 3, 4, 5, 6, 7, 8]
    assert "the host issues a step every 119 µs for 60 µs of device work" in f.message
    assert "which shrinks by 59 µs a step" in f.message
    assert "100% busy" in f.message and "the host is the limit, not the device" in f.message
    assert "launch → start 926 µs in step 2, 572 µs in step 8" in f.message
    assert backlog_reason(launch_backlog(a), 1) == (
        "the host issues a step every 119 µs for 60 µs of device work; the device ran on a "
        "backlog that shrank by 59 µs (941 µs → 882 µs of queued device time)")
    assert f.evidence[0].name == "cudaLaunchKernel" and f.evidence[1].name == "gemm_kernel"


def test_second_micro_benchmark_shape(builder):
    # 184 µs a step for 29 µs of device work (one kernel per launch, two launches).
    drain_steps(builder, steps=6, period=184.0, kernel_us=14.5)
    (f,) = RULE.run(builder.analysis())
    assert "every 184 µs for 29 µs of device work" in f.message
    assert "shrinks by 155 µs a step" in f.message


def test_silent_when_the_backlog_grows(builder):
    # Each step issues 200 µs of device work in 119 µs: the queue grows, the device is
    # the limit, and the steps are rightly compute-bound.
    drain_steps(builder, backlog=0, kernel_us=100.0)
    a = builder.analysis()
    bl = launch_backlog(a)
    assert bl.change_us[1] == pytest.approx(81.0) and bl.trend(1) == "growing"
    assert not bl.host_limited.any() and bl.device_limited[1:].all()
    assert RULE.run(a) == []


def test_silent_on_steady_steps(builder):
    builder.steady_steps(4)
    a = builder.analysis()
    assert not launch_backlog(a).host_limited.any()
    assert RULE.run(a) == []


def test_union_per_group_is_exact():
    group = np.asarray([1, 0, 1, 1, 0, 2])
    start = np.asarray([0.0, 5.0, 2.0, 10.0, 6.0, 1.0])
    end = np.asarray([3.0, 8.0, 4.0, 11.0, 7.0, 1.5])
    # group 0: [5, 8) ∪ [6, 7) = 3; group 1: [0, 4) ∪ [10, 11) = 5; group 2: 0.5.
    assert union_per_group(group, start, end, 4).tolist() == [3.0, 5.0, 0.5, 0.0]


@pytest.mark.parametrize(("call", "host_limited"), [("cudaDeviceSynchronize", False),
                                                    ("aten::nonzero", True)])
def test_a_host_waiting_in_a_sync_is_not_the_limit(make_builder, call, host_limited):
    # Step 1 launches 200 µs of work behind a 300 µs backlog, then spends 480 µs in
    # ``call``: in a sync it waits for the queue to drain (the device is the limit),
    # in an op it is busy on its own (the host is).
    b = make_builder()
    for i in range(3):
        b.kernel("pre_window_kernel", i * 100, 100, corr=1 + i)
    b.step(1, 0, 505)
    b.launch("gemm_kernel", 5, 300, 100)
    b.launch("gemm_kernel", 10, 400, 100)
    if call.startswith("cuda"):
        b.runtime(call, 20, 480)
    else:
        b.op(call, 20, 480)
    b.step(2, 505, 505)
    b.launch("gemm_kernel", 510, 520, 100)
    bl = launch_backlog(b.analysis())
    assert bl.host_blocked_us[0] == (480.0 if not host_limited else 0.0)
    assert bl.device_work_us[0] == 200.0 and bl.change_us[0] == pytest.approx(-300.0)
    assert bool(bl.host_limited[0]) is host_limited


def test_shared_traces(shared):
    # The first profiled step of the 2021 ResNet-50 run is 83% busy on 733 activities
    # launched before the window; the steps after it are 63-73% busy.
    (f,) = RULE.run(shared("kineto_2021jan_resnet50_profiler_api"))
    assert f.steps == [5]
    assert f.message.startswith("In step 5 the host issues a step every 159.17 ms for "
                                "102.88 ms of device work, yet the device is 83% busy")
    # Rank 1 of the 2022 V100 job drains its queue in steps 1011 and 1014, waiting 91 and
    # 101 ms in syncs: the device is the limit there.
    v100 = shared("hta_2022_v100_rank1_of2")
    bl = launch_backlog(v100)
    assert bl.trend(2) == "draining" and bl.host_blocked_us[2] > 90_000
    assert RULE.run(v100) == []


@pytest.mark.parametrize("gaps", [(), (3,), (1, 2, 5, 6), tuple(range(1, 8))])
def test_chained_steps_take_the_queue_at_the_end_before(builder, monkeypatch, gaps):
    """A step that starts where the one before ends takes that end's queue, not a search
    of its own: bit for bit what every start searched gives (steps after a gap: their
    own)."""
    from tb_diagnostics.analysis.views import backlog

    drain_steps(builder)
    for at in gaps:  # a step that starts 7 µs late: a gap before it
        t0 = at * 119.0 + 7.0
        builder.step(at + 1, t0, 100.0)
    late = {f"ProfilerStep#{at + 1}" for at in gaps}
    for k, e in enumerate(builder.events):  # the on-time steps of those numbers renamed
        if e.get("name") in late and not e["ts"] % 119:
            builder.events[k] = dict(e, name="dropped")
    new = launch_backlog(builder.analysis())
    chained = backlog.chained_starts(new.host_start, new.host_end)
    want = sum(1 for k in range(1, 8) if k not in gaps and k - 1 not in gaps)
    assert (0 if chained is None else int(chained.sum())) == want
    monkeypatch.setattr(backlog, "chained_starts", lambda lo, hi: None)
    old = launch_backlog(builder.analysis())
    assert len(new) == 8
    for name in ("backlog_start", "backlog_end", "backlog_start_us", "backlog_end_us"):
        a, b = getattr(new, name), getattr(old, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name


def _union_per_group_by_add_at(group, start, end, n):
    """``union_per_group`` as it was: the runs' lengths added by ``np.add.at``."""
    out = np.zeros(n)
    if not group.size:
        return out
    order = np.lexsort((start, group))
    g, s, e = group[order].astype(np.int64), start[order], end[order]
    rank_order = np.argsort(e, kind="stable")
    rank = np.empty(e.size, dtype=np.int64)
    rank[rank_order] = np.arange(e.size)
    reach = np.maximum.accumulate(g * e.size + rank)
    reach_end = e[rank_order][reach - g * e.size]
    first = np.r_[True, g[1:] != g[:-1]]
    new = first.copy()
    new[1:] |= s[1:] > reach_end[:-1]
    last = np.r_[np.flatnonzero(new)[1:] - 1, s.size - 1]
    np.add.at(out, g[new], reach_end[last] - s[new])
    return out


@pytest.mark.parametrize("seed", range(4))
def test_union_per_group_adds_as_add_at_did(seed):
    rng = np.random.default_rng(seed)
    k = 400
    group = rng.integers(0, 30, k)
    start = np.round(rng.uniform(0, 1e4, k), 1) * rng.choice([1.0, 1.0 + 1e-9], k)
    end = start + rng.exponential(300.0, k)
    end[rng.random(k) < 0.05] = np.nan
    for n in (30, 45):
        got = union_per_group(group, start, end, n)
        want = _union_per_group_by_add_at(group, start, end, n)
        assert got.tobytes() == want.tobytes()
    # A group outside 0..n-1: add.at's way (an index past the end raises, as before).
    with pytest.raises(IndexError):
        union_per_group(group, start, end, 10)
    neg = union_per_group(group - 1, start, end, 30)
    assert neg.tobytes() == _union_per_group_by_add_at(group - 1, start, end, 30).tobytes()


def test_running_sums_behind_a_zero():
    from tb_diagnostics.analysis.views.backlog import _sums

    rng = np.random.default_rng(9)
    for values in (np.zeros(0), np.asarray([2.5]), rng.normal(size=1000) * 1e6,
                   np.asarray([1.0, np.nan, 3.0])):
        want = np.concatenate(([0.0], np.cumsum(values)))
        assert _sums(values).tobytes() == want.tobytes()
