"""profiler-buffer-request: CUPTI's buffer request and the device gap it opens."""

from __future__ import annotations

import pytest

from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.rules.profiler_buffer_request import RULE


def test_fires_and_labels_the_gap(builder):
    builder.buffer_request_steps()
    a = builder.analysis()
    (f,) = RULE.run(a)
    assert f.artefact and f.steps == [1]
    assert "1 Activity Buffer Request" in f.message
    art = profiler_artefacts(a)
    assert art.buffer_gaps.total == pytest.approx(2520.0)
    assert any(e.name == "add_kernel" for e in f.evidence)


def test_silent_without_requests(builder):
    builder.steady_steps(4)
    assert RULE.run(builder.analysis()) == []
