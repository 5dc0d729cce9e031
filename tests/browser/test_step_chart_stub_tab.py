"""The step chart in the tab leaves the trailing stub out of its y scale (issue 29 item 1):
on a cycle of a 1 ms and a 5 ms step and the ~27 µs stub the profiler's last ``step()``
opened, the 5 ms bar is drawn whole (counted, the stub pulled the median to 1 ms and the
scale to 4 ms, clipping it). Both themes; screenshots in the artifacts dir."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from rules.conftest import TraceBuilder

from .conftest import READY, open_run
from .test_ops_modules import dark, shot
from .test_step_chart_scale import drawn_bars
from .test_timeline_tooltips import summary_of

RUN = "stub-cycle"
HEAD = 1.08  # static/app/stepchart.js: head room above the scale's top bar


def _real_step(b: TraceBuilder, n: int, t0: float, wall: float) -> None:
    """A step of 30 µs ops every 100 µs, each launching a 20 µs kernel."""
    b.step(n, t0, wall)
    for k in range(int(wall // 100) - 1):
        ts = t0 + 20 + k * 100
        b.op("aten::add", ts, 30)
        b.launch("add_kernel", ts + 5, ts + 12, 20)


@pytest.fixture
def stub_tb(start_tensorboard, tmp_path):
    b = TraceBuilder()
    _real_step(b, 1, 0.0, 1000.0)
    _real_step(b, 2, 1010.0, 5000.0)
    b.step(3, 6020.0, 27.0)  # opened by the last prof.step(); the profiler stops
    b.runtime("cudaDeviceSynchronize", 6100.0, 60.0)  # the profiler's flush, after it
    b.write(tmp_path / "log" / RUN)
    tb = start_tensorboard(tmp_path / "log")
    yield tb
    tb.stop()


def test_the_stub_is_drawn_but_sets_no_part_of_the_scale(page, stub_tb, artifacts):
    frame = open_run(page, stub_tb, RUN)
    steps = summary_of(stub_tb, RUN)["steps"]
    assert [(s["step"], s["stub"], s["cold"]) for s in steps] == \
        [(1, False, False), (2, False, False), (3, True, False)]
    # The step table's badge says the analysis' own reason (the step's flag_why).
    badge = frame.locator('table[aria-label="steps"] tr[data-index="2"] .badge.artefact')
    expect(badge).to_have_attribute("title", steps[2]["flag_why"]["artefact"])
    assert "nothing ran in it" in steps[2]["flag_why"]["artefact"]
    chart = frame.locator("#step-chart")
    for theme in ("light", "dark"):
        if theme == "dark":
            dark(page, frame)
            expect(frame.locator("body")).to_have_attribute("data-ready", "true",
                                                             timeout=READY)
        bars = drawn_bars(frame)
        assert [b["step"] for b in bars] == [1, 2, 3]
        # The real steps set the scale: the tallest of them, with the chart's head room.
        top = max(s["wall_us"] for s in steps if not s["stub"])
        assert float(chart.get_attribute("data-y-max-ms")) == \
            pytest.approx(top * HEAD / 1000, abs=1e-3)
        assert not any(b["clipped"] for b in bars), bars
        # The stub's bar is there, a sliver next to the 5 ms one, with its flag.
        stub = bars[2]
        assert "artefact" in stub["label"]
        assert stub["bottom"] - stub["top"] < 0.1 * (bars[1]["bottom"] - bars[1]["top"])
        shot(page, frame, "steps", artifacts / f"step-chart-stub-{theme}.png")
