"""The step chart's y scale leaves the trailing stub out (issue 29 item 1), as it leaves out
cold steps: the empty ~27 µs step the profiler's last ``step()`` opened (``stub: true`` in
the step JSON) never sets the scale that clips the real steps' bars.

The JavaScript runs in node, on the tab's own module (static/app/stepchart.js ``yScale``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "plugin" / "tb_diagnostics" / "static" / "app"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the tab's JavaScript")

_SCRIPT = """
import { yScale } from %(chart)s;
let raw = "";
process.stdin.on("data", (d) => { raw += d; });
process.stdin.on("end", () => {
  process.stdout.write(JSON.stringify(JSON.parse(raw).map((steps) => yScale(steps))));
});
"""

#: stepchart.js: a warm step this many times the warm median is clipped; head room.
OUTLIER, HEAD = 4, 1.08


def _scales(cases: list[list[dict]]) -> list[dict]:
    script = _SCRIPT % {"chart": json.dumps((APP / "stepchart.js").as_uri())}
    out = subprocess.run([NODE, "--input-type=module", "-e", script], input=json.dumps(cases),
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


def _step(wall_us: float, cold: bool = False, stub: bool = False) -> dict:
    return {"wall_us": wall_us, "cold": cold, "stub": stub, "flags": []}


def test_the_stub_sets_no_part_of_the_scale():
    stub = _step(27.0, stub=True)
    cases = [
        # Warm 1 ms and 5 ms: their median (3 ms) lets 5 ms show whole. Counted, the stub
        # would make the median 1 ms and clip the 5 ms step at 4 ms.
        [_step(1000.0), _step(5000.0), stub],
        [_step(1000.0), _step(5000.0)],
        # The real step is cold and the stub is all that is left: the stub's 27 µs would
        # be the scale and clip the real bar; the real step sets it instead.
        [_step(50_000.0, cold=True), stub],
        # A span of nothing but a stub still gets a scale (its own).
        [stub],
    ]
    with_stub, without, cold_real, only_stub = _scales(cases)
    assert with_stub == without == {"max": pytest.approx(5000 * HEAD / 1000), "clipped": []}
    assert cold_real == {"max": pytest.approx(50_000 * HEAD / 1000), "clipped": []}
    assert only_stub == {"max": pytest.approx(27 * HEAD / 1000), "clipped": []}


def test_a_stub_longer_than_the_scale_is_clipped_like_any_bar():
    # Left out of the scale, not out of the chart: a bar above the scale is clipped.
    (scale,) = _scales([[_step(1000.0), _step(1000.0), _step(9000.0, stub=True)]])
    assert scale == {"max": pytest.approx(1000 * HEAD / 1000), "clipped": [2]}


def test_cold_steps_stay_out_of_the_scale_beside_a_stub():
    steps = [_step(40_000.0, cold=True), *[_step(2000.0)] * 3, _step(30.0, stub=True)]
    (scale,) = _scales([steps])
    assert scale == {"max": pytest.approx(2000 * HEAD / 1000), "clipped": [0]}
    # An outlier among the warm steps is still clipped against their median alone.
    steps = [_step(1000.0), _step(1000.0), _step(1000.0), _step(9000.0), _step(27.0, stub=True)]
    (scale,) = _scales([steps])
    assert scale == {"max": pytest.approx(OUTLIER * 1000 * HEAD / 1000), "clipped": [3]}
