"""The replay of a span's dependency graph: unchanged it reproduces the recording; with a
change it predicts the steps, checked on hand-made traces and on a real fix."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder, shared_analysis, shared_file_ids

from tb_diagnostics.analysis.replay.capture import GRAPH_LAUNCH_US
from tb_diagnostics.analysis.replay.changes import combine, input_change, sync_change
from tb_diagnostics.analysis.replay.engine import replay


def recorded_walls(a) -> np.ndarray:
    """The windows' recorded wall times, to set beside a replay's."""
    return np.asarray([w.wall_us for w in a.windows])


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_unchanged_replay_reproduces_every_shared_step_within_2_percent(run, index):
    a = shared_analysis(run, index)
    recorded = recorded_walls(a)
    replayed = replay(a).wall_us
    assert np.all(np.abs(replayed - recorded) <= 0.02 * np.maximum(recorded, 1.0))


def _input_steps(b: TraceBuilder, n: int = 3, load_us: float = 400.0) -> None:
    """Host-bound steps: a DataLoader wait, then one launch of a 100 µs kernel."""
    for s in range(n):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 10,
                     load_us)
        b.op("aten::mm", t0 + 20 + load_us, 20)
        b.launch("gemm", t0 + 25 + load_us, t0 + 40 + load_us, 100)


def test_removing_the_input_wait_shortens_each_step_by_it(tmp_path):
    b = TraceBuilder(tmp_path)
    _input_steps(b)
    a = b.analysis()
    before = recorded_walls(a)
    after = replay(a, input_change(a)).wall_us
    # Steps 1 and 2 lose the 400 µs wait; the last one ends at its host end, which moves too.
    assert after[:2] == pytest.approx(before[:2] - 400.0)
    assert after[2] == pytest.approx(before[2] - 400.0)


def test_a_busy_device_keeps_the_step_as_long_as_its_work(tmp_path):
    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 10, 300)
        b.op("aten::mm", t0 + 320, 20)
        b.launch("gemm", t0 + 325, max(t0 + 330, s * 1000 + 1), 990)  # back to back
    a = b.analysis()
    after = replay(a, input_change(a)).wall_us
    # Each step's kernel still takes 990 µs of the device: no step gets shorter than that.
    assert np.all(after[:2] >= 990.0 - 1e-6)


def test_a_freed_sync_lets_the_host_run_ahead(tmp_path):
    b = TraceBuilder(tmp_path)
    for s in range(3):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm", t0 + 12, t0 + 30, 800)
        b.runtime("cudaDeviceSynchronize", t0 + 40, 795)  # waits for the kernel (ends 830)
        b.op("aten::add", t0 + 850, 20)
        b.launch("add_kernel", t0 + 852, t0 + 870, 10)
        b.op("aten::relu", t0 + 900, 1000)  # host work that overlaps nothing without the sync
    a = b.analysis()
    syncs = a.sync_rows
    before = recorded_walls(a)
    after = replay(a, sync_change(a, syncs)).wall_us
    # Without the wait the host's own 835 → 1900 µs part starts 790 µs earlier.
    assert after[0] == pytest.approx(before[0] - 790.0, abs=1.0)
    both = replay(a, combine([sync_change(a, syncs)])).wall_us
    assert both == pytest.approx(after)


@pytest.mark.shared
@pytest.mark.parametrize("cycle", [0, 1])
def test_resnet50_num_workers_fix_is_predicted_within_20_percent(cycle):
    """The real fix in ../shared/traces: the same ResNet-50 with num_workers=4."""
    a = shared_analysis("kineto_resnet50_v100_dataloader_workers0", cycle)
    fixed = shared_analysis("kineto_resnet50_v100_dataloader_workers4", cycle)
    before = np.median([w.wall_us for w in a.windows[1:]])
    measured = before - np.median([w.wall_us for w in fixed.windows[1:]])
    predicted = before - np.median(replay(a, input_change(a)).wall_us[1:])
    assert abs(predicted - measured) <= 0.2 * measured, (predicted, measured)


@pytest.mark.shared
@pytest.mark.parametrize(("run", "index"), shared_file_ids())
def test_all_changes_never_beat_the_device_work_they_leave(run, index):
    """A step replayed with every change still holds each stream's remaining work."""
    from tb_diagnostics.analysis.replay.changes import combine
    from tb_diagnostics.analysis.views.whatif import CARDS, projection

    a = shared_analysis(run, index)
    p = projection(a, "all")
    if p is None:
        pytest.skip("fewer than two changes apply")
    m = a.model
    acts = m.device_activity_rows
    every = combine([c for c in (card.build(a) for card in CARDS) if c is not None])
    scale = np.ones(acts.shape[0]) if every.device_scale is None else every.device_scale
    if not acts.size or not len(a.host_steps):
        return
    step = a.activity_step
    lane = m.lane[acts]
    for k in range(len(a.windows)):
        on = step == k
        if not on.any():
            continue
        per_stream = np.bincount(lane[on], weights=(m.dur[acts] * scale)[on])
        # Work a step's launches put on one stream runs one kernel after another.
        assert p.after_us[k] + 1e-6 >= per_stream.max() * 0.999 or k == len(a.windows) - 1


def test_the_report_lists_projections_and_findings_use_them(tmp_path):
    from tb_diagnostics.logdir import scan_logdir
    from tb_diagnostics.report.document import span_document

    b = TraceBuilder(tmp_path / "log" / "run")
    _input_steps(b, n=4)
    b.write()
    f = scan_logdir(str(tmp_path / "log")).runs[0].files[0]
    from tb_diagnostics.engine import open_analysis

    doc = span_document(f, open_analysis(f))
    (inp,) = [w for w in doc["whatif"] if w["id"] == "input"]
    assert inp["saves_us"] == pytest.approx(400.0)
    assert inp["shown_after_us"] == pytest.approx(inp["shown_before_us"] - 400.0)
    assert inp["rules"] == ["dataloader-bottleneck"] and inp["related"] == ["gpu-idle-gap"]
    (dl,) = [x for x in doc["findings"] if x["rule"] == "dataloader-bottleneck"]
    assert dl["savings_us"] == pytest.approx(400.0)


def _launch_bound_steps(b: TraceBuilder, n: int = 3, ops: int = 50) -> None:
    """Each step: ``ops`` calls of 20 µs on the host, each launching one 2 µs kernel."""
    for s in range(n):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        for k in range(ops):
            ts = t0 + 100 + 20 * k
            b.op("aten::add", ts, 20)
            b.launch("add_kernel", ts + 10, ts + 18, 2, api_dur=5)


def test_cheaper_launches_and_cuda_graphs_shorten_a_launch_bound_step(tmp_path):
    from tb_diagnostics.analysis.replay.changes import graphs_change, launch_change

    b = TraceBuilder(tmp_path)
    _launch_bound_steps(b)
    a = b.analysis()
    before = recorded_walls(a)
    cheap = replay(a, launch_change(a)).wall_us
    graphs = replay(a, graphs_change(a)).wall_us
    # 50 calls of 20 µs become 50 × 5 µs: 750 µs less host time per step; as graphs, the
    # calls' 1000 µs become one cudaGraphLaunch. The steps' other host time stays.
    assert cheap[:2] == pytest.approx(before[:2] - 750.0, abs=1.0)
    assert graphs[:2] == pytest.approx(before[:2] - 1000.0 + GRAPH_LAUNCH_US, abs=1.0)
