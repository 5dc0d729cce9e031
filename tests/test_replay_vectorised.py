"""The replay a stretch at a time (``replay/stretches.py``, issue 28): numpy's stretches give
the loop's floats bit for bit, on hand-made traces with syncs, another thread's bursts
(anchors and joins), waits across streams, scaled devices, removed host time and new
stream gaps; and the pieces (in-order segmented sums, the fewest cuts, a chain's resets
where prefix sums guess them wrong) on small exact inputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.intervals import Intervals
from tb_diagnostics.analysis.replay import stretches
from tb_diagnostics.analysis.replay.engine import Change, replay
from tb_diagnostics.analysis.replay.graph import replay_graph
from tb_diagnostics.analysis.replay.stretches import (
    _chain_scan,
    segmented_accumulate,
    stretch_cuts,
)
from tb_diagnostics.analysis.span import SpanAnalysis

EVERY = 1  # every stretch with numpy
NONE = 10**12  # every node in the loop


def _busy_steps(b: TraceBuilder, n: int = 12, step_us: float = 3000.0) -> None:
    """Per step: a 300 µs GEMM on stream 7, a kernel on stream 8 that waits for it (starts
    2 µs after it ends); ``## backward ##`` on the main thread while the autograd thread
    (tid 200) runs two bursts that launch onto stream 7; 20 small queued launches; every
    other step a sync that returns 10 µs after the last kernel."""
    for s in range(n):
        t0 = s * step_us
        b.step(s + 1, t0, step_us - 1)
        b.op("aten::mm", t0 + 8, 10)
        b.launch("gemm_a", t0 + 10, t0 + 20, 300)
        b.op("aten::index", t0 + 28, 6)
        b.launch("side", t0 + 30, t0 + 322, 100, stream=8)
        b.annotation("## backward ##", t0 + 100, 800)
        b.op("aten::ones_like", t0 + 105, 10)
        b.launch("fill", t0 + 110, t0 + 422.5, 2)
        for name, t1, dur in (("evaluate_function: AddmmBackward0", t0 + 150, 250),
                              ("evaluate_function: MmBackward0", t0 + 410, 440)):
            b.op(name, t1, dur, tid=200)
            b.op("aten::mm", t1 + 10, 30, tid=200)
            corr = b.runtime("cudaLaunchKernel", t1 + 20, 5, tid=200)
            b.kernel("bwd", t1 + 30 + 300, 40, corr)
        b.op("aten::add_", t0 + 905, 20)
        b.launch("add", t0 + 910, t0 + 918, 2)
        end = t0 + 918
        for k in range(20):
            t = t0 + 930 + 7.25 * k
            b.op("aten::mul", t, 6.5)
            end = max(end + 1.5, t + 9.0)
            b.launch("mul", t + 0.5, end, 3.0 + 0.1 * k)
            end += 3.0 + 0.1 * k
        if s % 2:
            b.runtime("cudaDeviceSynchronize", t0 + 1070, end + 10 - (t0 + 1070))


def _changes(a) -> dict[str, Change]:
    m = a.model
    acts = m.device_activity_rows
    name = m.name[acts]
    g = replay_graph(a)
    main = int(m.lane[a.host_steps.rows[0]])
    other = int(next(x for x in np.unique(g.h_lane).tolist() if x != main))
    t0 = np.arange(len(a.host_steps)) * 3000.0
    removed = {main: Intervals(t0 + 930.0, t0 + 990.0),
               other: Intervals(t0 + 160.0, t0 + 170.0)}
    gemm = name == m.strings.index("gemm_a")
    on7 = m.lane[acts] == m.lane[acts[gemm][0]]
    gap = np.where(on7, 0.5, np.nan)
    scale = np.where(gemm, 0.5, 0.8)
    return {
        "none": Change(),
        "faster gemm": Change(device_scale=np.where(gemm, 0.5, 1.0)),
        "slower device": Change(device_scale=np.full(acts.shape[0], 2.0)),
        "removed host time": Change(removed_host=removed),
        "syncs freed": Change(no_wait=frozenset(a.sync_rows.tolist())),
        "stream gaps": Change(stream_gap=gap),
        "all": Change(removed_host=removed, no_wait=frozenset(a.sync_rows.tolist()),
                      device_scale=scale, stream_gap=gap),
    }


def busy_analysis(tmp_path_factory) -> SpanAnalysis:
    """The analysis of :func:`_busy_steps`' trace, in a directory of its own (the modules
    that share the trace build it through this)."""
    b = TraceBuilder(tmp_path_factory.mktemp("busy"))
    _busy_steps(b)
    return b.analysis()


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    return busy_analysis(tmp_path_factory)


def test_the_hand_made_trace_has_every_kind_of_edge(busy):
    g = replay_graph(busy)
    assert (g.h_anchor >= 0).sum() >= 12  # the autograd thread's bursts
    assert (g.h_release >= 0).sum() >= 6  # the syncs that wait
    assert (g.a_cross >= 0).any() and (g.a_dev >= 0).any()
    assert np.unique(busy.model.lane[busy.model.device_activity_rows]).size == 2


@pytest.mark.parametrize("which", ["none", "faster gemm", "slower device", "removed host time",
                                   "syncs freed", "stream gaps", "all"])
@pytest.mark.parametrize("min_vector", [EVERY, 24])
def test_numpy_stretches_give_the_loops_floats(busy, which, min_vector, monkeypatch):
    """Every stretch with numpy, or the long ones with numpy and the rest node by node
    between them: the same floats as the loop over every node."""
    change = _changes(busy)[which]
    used: list[bool] = []
    looped: list[int] = []
    vector, loop_block = stretches._vector_stretch, stretches._loop_block

    def counted(st, b0, b1):
        ok = vector(st, b0, b1)
        used.append(ok)
        return ok

    def counted_loop(st, b0, b1):
        looped.append(b1 - b0)
        loop_block(st, b0, b1)

    monkeypatch.setattr(stretches, "_vector_stretch", counted)
    monkeypatch.setattr(stretches, "_loop_block", counted_loop)
    loop = replay(busy, change, min_vector=NONE)
    assert not used and sum(looped) == stretches_total(busy)
    looped.clear()
    vec = replay(busy, change, min_vector=min_vector)
    assert sum(used) >= 10  # the order was cut, and numpy replayed the stretches
    assert bool(looped) == (min_vector > 1)
    for field in ("lo", "hi", "a_end", "h_time"):
        assert getattr(vec, field).tobytes() == getattr(loop, field).tobytes(), field


@pytest.mark.parametrize("which", ["none", "removed host time", "syncs freed", "all"])
@pytest.mark.parametrize("piece", [1, 7, 61])
def test_a_stretch_replayed_in_pieces_gives_the_same_floats(busy, which, piece, monkeypatch):
    """A long stretch is replayed in pieces of at most MAX_VECTOR_NODES (its temporaries
    stay small): cut anywhere, even between a launch and its kernel or inside a chain, the
    floats are the loop's."""
    change = _changes(busy)[which]
    loop = replay(busy, change, min_vector=NONE)
    pieces: list[int] = []
    vector = stretches._vector_stretch

    def counted(st, b0, b1):
        pieces.append(b1 - b0)
        return vector(st, b0, b1)

    monkeypatch.setattr(stretches, "MAX_VECTOR_NODES", piece)
    monkeypatch.setattr(stretches, "_vector_stretch", counted)
    vec = replay(busy, change, min_vector=EVERY)
    assert max(pieces) <= piece
    assert len(pieces) >= stretches_total(busy) // piece
    for field in ("lo", "hi", "a_end", "h_time"):
        assert getattr(vec, field).tobytes() == getattr(loop, field).tobytes(), field


def stretches_total(a) -> int:
    g = replay_graph(a)
    return g.h_time.shape[0] + g.a_start.shape[0]


def test_the_change_moves_the_replay(busy):
    """The changes are not all no-ops: the check above compares replays that move."""
    c = _changes(busy)
    base = replay(busy, c["none"]).a_end
    for which in ("faster gemm", "removed host time", "syncs freed", "stream gaps", "all"):
        assert not np.array_equal(replay(busy, c[which]).a_end, base), which


def _loop_accumulate(ufunc, x, first):
    out, acc = [], 0.0
    for v, f in zip(x.tolist(), first.tolist(), strict=True):
        acc = v if f else float(ufunc(acc, v))
        out.append(acc)
    return np.asarray(out)


def test_segmented_sums_are_added_in_order():
    rng = np.random.default_rng(7)
    lens = np.asarray([1, 1, 2, 3, 7, 8, 9, 1, 300, 17, 16, 1, 5])
    x = rng.standard_normal(lens.sum()) * 10.0 ** rng.uniform(-6, 7, lens.sum())
    first = np.zeros(x.size, dtype=bool)
    first[np.cumsum(lens) - lens] = True
    for ufunc in (np.add, np.maximum):
        got = segmented_accumulate(ufunc, x, first)
        assert got.tobytes() == _loop_accumulate(ufunc, x, first).tobytes()
    one = np.zeros(x.size, dtype=bool)
    one[0] = True
    assert segmented_accumulate(np.add, x, one).tobytes() == np.add.accumulate(x).tobytes()


def test_prefix_sums_differ_from_the_loops_sums():
    """Why the runs are added in order: the same terms summed another way differ."""
    x = np.asarray([1e16, 1.0, -1e16, 1.0])
    assert np.add.accumulate(x)[-1] == 1.0
    assert (x[0] + x[2]) + (x[1] + x[3]) == 2.0


def _min_cuts(targets, sources):
    for k in range(len(targets) + 1):
        for cuts in itertools.combinations(range(max(targets) + 1), k):
            if all(any(s < c <= t for c in cuts) for s, t in zip(sources, targets, strict=True)):
                return k
    raise AssertionError


def test_the_fewest_cuts():
    got = stretch_cuts(np.asarray([3, 4, 5, 9]), np.asarray([0, 1, 3, 5]))
    assert got.tolist() == [3, 5, 9]
    assert stretch_cuts(np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0
    rng = np.random.default_rng(3)
    for _ in range(40):
        t = np.unique(rng.integers(1, 12, 6))
        s = np.asarray([rng.integers(0, x) for x in t.tolist()])
        cuts = stretch_cuts(t, s).tolist()
        assert all(any(a < c <= b for c in cuts) for a, b in zip(s.tolist(), t.tolist(),
                                                                 strict=True))
        assert len(cuts) == _min_cuts(t.tolist(), s.tolist())


def _loop_chain(first, has_init, init, x, a, b):
    s_out, v_out, v = [], [], 0.0
    for k in range(x.size):
        if first[k] and not has_init[k]:
            s = x[k]
        else:
            prev = init[k] if first[k] else v
            s = max(x[k], prev + a[k])
        v = s if b is None else s + b[k]
        s_out.append(s)
        v_out.append(v)
    return np.asarray(s_out), np.asarray(v_out)


@pytest.mark.parametrize("with_b", [False, True])
def test_a_chains_resets_where_prefix_sums_guess_them_wrong(with_b):
    """Waits that tie the chain's value in exact arithmetic (0.1 µs steps, a wait at each
    k x 0.1): the float sums land an ulp either side, the guessed resets are wrong, and
    the rounds put them right."""
    m = 400
    a = np.full(m, 0.1)
    b = np.full(m, 0.0) if with_b else None
    x = np.full(m, -np.inf)
    x[7::3] = 1000.0 + 0.1 * np.arange(7, m, 3)
    first = np.zeros(m, dtype=bool)
    first[[0, 150]] = True
    has_init = np.zeros(m, dtype=bool)
    has_init[150] = True
    init = np.zeros(m)
    init[150] = 1015.0
    x[0] = 1000.0
    got = _chain_scan(first, has_init, init, x, a, b)
    assert got is not None
    want = _loop_chain(first, has_init, init, x, a, b)
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()


def test_random_chains_match_the_loop():
    rng = np.random.default_rng(11)
    for _ in range(30):
        m = int(rng.integers(1, 300))
        first = rng.random(m) < 0.05
        first[0] = True
        has_init = first & (rng.random(m) < 0.5)
        init = rng.uniform(0, 1e6, m)
        a = rng.uniform(-5, 20, m)
        b = rng.uniform(0, 30, m)
        x = np.where(rng.random(m) < 0.3, rng.uniform(0, 1e6, m), -np.inf)
        x[first & ~has_init] = rng.uniform(0, 1e6, (first & ~has_init).sum())
        for bb in (None, b):
            got = _chain_scan(first, has_init, init, x, a, bb)
            assert got is not None
            want = _loop_chain(first, has_init, init, x, a, bb)
            assert got[1].tobytes() == want[1].tobytes()


def test_a_stretch_whose_resets_do_not_settle_is_replayed_node_by_node(busy, monkeypatch):
    """No round to check the guess in: every stretch falls back to the loop, same floats."""
    change = _changes(busy)["all"]
    loop = replay(busy, change, min_vector=NONE)
    monkeypatch.setattr(stretches, "MAX_ROUNDS", 0)
    vec = replay(busy, change, min_vector=EVERY)
    for field in ("lo", "hi", "a_end", "h_time"):
        assert getattr(vec, field).tobytes() == getattr(loop, field).tobytes(), field


def test_a_saving_reads_its_windows_however_they_are_given():
    """``saving_over``'s windows as a list, a set, a generator or an index array, with
    repeats and out of order: the same windows, sorted, each once."""
    from tb_diagnostics.analysis.views.whatif import saving_over, step_savings

    before = np.asarray([10.0, 20.0, 30.0, 40.0])
    after = np.asarray([9.0, 15.0, 31.0, 30.0])
    want = saving_over(before, after, [1, 3])
    assert want.windows == (1, 3) and want.total_us == 15.0 and want.shown == 1
    assert type(want.windows[0]) is int and type(want.shown) is int
    for given in ([3, 1, 3], {1, 3}, (k for k in (3, 1)), np.asarray([3, 1])):
        assert saving_over(before, after, given) == want
    assert step_savings(before, after, [3, 0]).tolist() == [10.0, 1.0]
    assert saving_over(before, after).windows == (0, 1, 2, 3)


def test_a_findings_windows_are_read_off_the_step_column(busy, monkeypatch):
    """``part_windows`` without a window view per window: the warm windows among the
    finding's steps, its steps' windows where none is warm, the card's where none is."""
    from tb_diagnostics.analysis.views import whatif

    warm = [0, 2, 4, 5, 9]  # windows 1, 3, 6-8, 10 and 11 taken as cold
    monkeypatch.setattr(whatif, "warm_windows", lambda a: list(warm))

    def by_view(steps):
        if steps is None:
            return warm
        wanted = set(steps)
        picked = [k for k, w in enumerate(busy.windows) if w.step in wanted]
        return [k for k in picked if k in set(warm)] or picked or warm

    for steps in ([2, 3], [2], [99], None, [5, 5, None, 1], [2, 4, 7], [4.0], [4.5, 6]):
        assert whatif.part_windows(busy, steps) == by_view(steps), steps
    assert whatif.part_windows(busy, [2, 4, 7]) == [1, 3, 6]  # steps 2, 4, 7: all cold
    assert whatif.part_windows(busy, [1, 2, 3]) == [0, 2]
