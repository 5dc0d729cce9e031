"""Releasing views a report no longer reads (report/lifetimes.py, SpanAnalysis.release):
the report the engine builds for an analysis it owns is the same, byte for byte, as the
one built keeping every view; no section reads a view after its release; and a view read
after its release is computed again, the same, and named."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
import pytest
from rules.conftest import SHARED_TRACES, TraceBuilder

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.engine import span_summary
from tb_diagnostics.logdir import SpanFile, scan_logdir
from tb_diagnostics.opening import open_analysis
from tb_diagnostics.output import encode_json
from tb_diagnostics.report.document import span_document
from tb_diagnostics.report.lifetimes import AFTER_PROJECTIONS, AFTER_RULES, BEFORE_WHATIF


def _files(root: Path) -> list[SpanFile]:
    return [s for r in scan_logdir(str(root)).runs for s in r.files]


def _both(f: SpanFile) -> tuple[bytes, bytes, list[str]]:
    """The document kept whole and released on the way, and what the latter recomputed."""
    kept = encode_json(span_document(f, open_analysis(f)))
    owned = open_analysis(f)
    released = encode_json(span_document(f, owned, owned=True))
    return kept, released, owned.recomputed


def _gpu_trace(tmp_path: Path) -> Path:
    """Steady steps with a device gap, a memory series and a collective: every card."""
    b = TraceBuilder(tmp_path / "run", profile_memory=1)
    b.steady_steps(6, kernels=5)
    b.op("aten::add", 6_000, 900)
    b.launch("add_kernel", 6_850, 6_890, 40)
    b.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 6_870, 6_940, 300)
    for k in range(12):
        b.memory(100.0 * k, 1 << 20, allocated=(k + 1) << 20, reserved=32 << 20)
    b.write()
    return tmp_path


def test_a_released_report_is_the_kept_one_on_a_hand_made_trace(tmp_path):
    [f] = _files(_gpu_trace(tmp_path))
    kept, released, recomputed = _both(f)
    assert released == kept
    assert recomputed == []


def test_the_engine_releases_the_analysis_it_opens_and_keeps_the_one_it_is_given(tmp_path):
    [f] = _files(_gpu_trace(tmp_path))
    given = open_analysis(f)
    doc = span_summary(f, analysis=given)
    # The caller's analysis (the tab's) keeps every view the report computed.
    from tb_diagnostics.analysis.replay.graph import replay_graph
    from tb_diagnostics.analysis.views.tables import op_table

    assert given._released == set() and given.recomputed == []
    assert {op_table.__wrapped__, replay_graph.__wrapped__} <= set(given._computed)
    assert encode_json(span_summary(f)) == encode_json(doc)


def test_a_view_read_after_its_release_is_computed_again_the_same_and_named(tmp_path):
    from tb_diagnostics.analysis.replay.graph import replay_graph
    from tb_diagnostics.analysis.views.tables import op_table

    [f] = _files(_gpu_trace(tmp_path))
    a = open_analysis(f)
    table, graph = op_table(a), replay_graph(a)
    a.release([op_table, replay_graph])
    assert op_table.__wrapped__ not in a._computed
    again, graph_again = op_table(a), replay_graph(a)
    assert again is not table and graph_again is not graph
    for old, new in ((table, again), (graph, graph_again)):
        arrays = {k: v for k, v in vars(old).items() if isinstance(v, np.ndarray)}
        assert arrays, type(old)
        for name, x in arrays.items():
            assert np.array_equal(x, getattr(new, name)), name
    assert a.recomputed == [op_table.__wrapped__.__qualname__,
                            replay_graph.__wrapped__.__qualname__]
    op_table(a)  # memoized again: counted once
    assert len(a.recomputed) == 2


def test_every_released_artifact_is_a_computed_view():
    from tb_diagnostics.trace.model import TraceModel

    for a in (*AFTER_RULES, *BEFORE_WHATIF, *AFTER_PROJECTIONS):
        if isinstance(a, str):  # a cached property of the model or of the analysis
            owner = TraceModel if a.startswith("model.") else SpanAnalysis
            assert isinstance(vars(owner).get(a.removeprefix("model.")), cached_property), a
            continue
        assert callable(getattr(a, "__wrapped__", None)), a


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces is not present")
def test_released_reports_are_the_kept_ones_on_every_shared_trace():
    files = _files(SHARED_TRACES)
    assert len(files) >= 21
    differ, recomputed = [], {}
    for f in files:
        kept, released, again = _both(f)
        if released != kept:
            differ.append(f.relpath)
        if again:
            recomputed[f.relpath] = again
    assert differ == []
    assert recomputed == {}


def test_a_released_model_cache_is_dropped_and_named_when_made_again(tmp_path):
    [f] = _files(_gpu_trace(tmp_path))
    a = open_analysis(f)
    m = a.model
    before = m.self_time().copy()
    assert "_self_time_all" in vars(m)
    bounds = a.bounds
    a.release(["model._self_time_all", "bounds"])
    assert "_self_time_all" not in vars(m) and "bounds" not in vars(a)
    assert a.recomputed == []
    # Read once without keeping it: not made again.
    assert (m.self_time_once() == before).all() and a.recomputed == []
    assert (m.self_time() == before).all()
    assert a.recomputed == ["model._self_time_all"]
    assert all((x == y).all() for x, y in zip(a.bounds, bounds, strict=True))
    assert a.recomputed == ["bounds", "model._self_time_all"]
    assert "model._self_time_all" in AFTER_RULES
