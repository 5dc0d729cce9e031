"""Savings that hold over the span; bars that match their numbers (issue 25, items 5, 6).

A card's saving is what its warm steps save together, each step's before minus after added
up unclipped, over their number: a step that finishes sooner only to wait longer in the
next gives its saving back, and the card says the saving moves. Its bars are the warm step
whose own saving is nearest that per-step figure (the earlier on a tie), named.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rules.conftest import TraceBuilder

import tb_diagnostics.report.whatif as report_whatif
from tb_diagnostics.analysis.views.whatif import (
    MOVED_NOISE_US,
    Projection,
    saving_over,
    warm_windows,
)
from tb_diagnostics.report.whatif import whatif_lines, whatif_section
from tb_diagnostics.rules._util import fmt_us

APP = Path(__file__).resolve().parents[1] / "plugin" / "tb_diagnostics" / "static" / "app"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


# ---- the statistic -----------------------------------------------------------------------
def test_a_saving_that_moves_into_the_next_steps_wait_saves_nothing():
    """The issue's AMP card on an input-bound span: +499, +907 and -1,406 µs."""
    before = np.array([10_000.0, 10_000.0, 10_000.0])
    after = before - np.array([499.0, 907.0, -1406.0])
    s = saving_over(before, after)
    assert (s.total_us, s.per_step_us, s.gains_us, s.moves_us) == (0.0, 0.0, 1406.0, 1406.0)
    assert s.moves
    assert s.shown == 0  # +499 is the nearest 0


def test_an_even_saving_holds_and_its_first_step_is_shown():
    before = np.array([1000.0, 1000.0, 1000.0, 1000.0])
    s = saving_over(before, before - 400.0)
    assert (s.total_us, s.per_step_us, s.moves_us, s.moves, s.shown) == (
        1600.0, 400.0, 0.0, False, 0)


def test_the_shown_step_is_the_nearest_the_per_step_saving_and_the_earlier_on_a_tie():
    before = np.full(5, 1000.0)
    # 0, 100, 250, 900, 0: 1250 / 5 = 250 per step, window 2 saves exactly that.
    assert saving_over(before, before - np.array([0.0, 100, 250, 900, 0])).shown == 2
    # 100 and 300: 200 per step, both 100 away: the earlier.
    assert saving_over(before[:2], before[:2] - np.array([300.0, 100.0])).shown == 0
    # Windows asked out of order are the same windows, in order.
    assert saving_over(before, before - np.array([0.0, 100, 300, 0, 0]), [2, 1]).shown == 1


def test_replay_noise_in_a_few_steps_is_no_moved_saving():
    before = np.full(4, 1000.0)
    s = saving_over(before, before - np.array([50.0, 50.0, -3.0, 50.0]))
    assert s.total_us == 147.0 and s.moves_us == 3.0 and not s.moves
    # Below MOVED_NOISE_US per step, even a wide share is noise: +4, -3.
    small = saving_over(before[:2], before[:2] - np.array([4.0, -3.0]))
    assert small.moves_us == 3.0 < MOVED_NOISE_US * 2 and not small.moves


# ---- the card: JSON and text -------------------------------------------------------------
def _input_steps(b: TraceBuilder, loads: list[float]) -> None:
    """1 ms steps: a DataLoader wait of ``loads[k]`` µs, then a 100 µs kernel."""
    for s, load in enumerate(loads):
        t0 = s * 1000.0
        b.step(s + 1, t0, 999)
        if load:
            b.annotation(LOADER, t0 + 10, load)
        b.op("aten::mm", t0 + 20 + load, 20)
        b.launch("gemm", t0 + 25 + load, t0 + 40 + load, 100)


def _card(cards: list[dict], cid: str) -> dict:
    (card,) = [w for w in cards if w["id"] == cid]
    return card


def test_an_even_input_saving_names_the_step_its_bars_draw(tmp_path):
    b = TraceBuilder(tmp_path)
    _input_steps(b, [400.0] * 4)
    a = b.analysis()
    assert warm_windows(a) == [0, 1, 2, 3]
    inp = _card(whatif_section(a), "input")
    assert inp["saves_us"] == pytest.approx(400.0)
    assert inp["saves_us_total"] == pytest.approx(1600.0)
    assert inp["saving_moves"] is False and inp["moves_us"] == pytest.approx(0.0, abs=1e-6)
    (first,) = [x for x in inp["per_step"] if x["step"] == inp["shown_step"]]
    assert (inp["shown_before_us"], inp["shown_after_us"]) == (first["before_us"],
                                                               first["after_us"])
    assert first["before_us"] - first["after_us"] == pytest.approx(400.0, abs=0.01)
    assert "wall_us_before" not in inp and "saves_uneven" not in inp
    line = whatif_lines({"whatif": [inp]})[0]  # (its path line under it: test_whatif_path)
    # Every step saves the same: the first is shown.
    assert inp["shown_step"] == 1
    assert line.startswith("input: 1.00 ms → 600 µs in step 1, saves 400 µs per step "
                           "(1.60 ms over the 4 warm steps) — ")


def _fake_projection(a, savings: list[float], pid: str = "amp") -> Projection:
    """A card of the span's windows with the given per-window savings (the replay's part
    is tests/test_replay.py's; this file checks what the card makes of its walls)."""
    before = np.asarray([w.wall_us for w in a.windows])
    return Projection(pid, "c", (), "x", before, before - np.asarray(savings))


def test_a_card_whose_saving_moves_says_so_and_shows_no_median(tmp_path, monkeypatch):
    b = TraceBuilder(tmp_path)
    _input_steps(b, [300.0, 300.0, 300.0])
    a = b.analysis()
    assert warm_windows(a) == [0, 1, 2]
    fake = _fake_projection(a, [499.0, 907.0, -1406.0])
    monkeypatch.setattr(report_whatif, "projections", lambda _a: [fake])
    (card,) = whatif_section(a)
    assert (card["saves_us"], card["saves_us_total"], card["moves_us"]) == (0.0, 0.0, 1406.0)
    assert card["saving_moves"] is True
    assert card["shown_step"] == a.windows[0].step
    assert card["shown_before_us"] - card["shown_after_us"] == pytest.approx(499.0)
    line = whatif_lines({"whatif": [card]})[0]
    assert line == (f"amp: {fmt_us(card['shown_before_us'])} → {fmt_us(card['shown_after_us'])}"
                    f" in step {a.windows[0].step}, no measurable saving (1.41 ms of the "
                    "per-step savings move into other steps' waits) — c")
    assert "median" not in line


def test_a_saving_partly_given_back_gives_what_holds_and_what_moves(tmp_path, monkeypatch):
    b = TraceBuilder(tmp_path)
    _input_steps(b, [300.0, 300.0, 300.0])
    a = b.analysis()
    fake = _fake_projection(a, [600.0, 600.0, -300.0])  # 900 held of 1200 gained
    monkeypatch.setattr(report_whatif, "projections", lambda _a: [fake])
    (card,) = whatif_section(a)
    assert (card["saves_us"], card["saves_us_total"], card["moves_us"]) == (300.0, 900.0, 300.0)
    assert card["saving_moves"] is False  # a quarter given back: MOVED_SHARE, not above it
    # The nearest 300: window 2 (-300) is 600 away, windows 0 and 1 are 300 away: window 0.
    assert card["shown_step"] == a.windows[0].step
    line = whatif_lines({"whatif": [card]})[0]
    assert ", saves 300 µs per step (900 µs over the 3 warm steps) — c" in line


def test_a_span_without_steps_names_no_step(tmp_path):
    b = TraceBuilder(tmp_path)
    b.annotation(LOADER, 10, 400)
    b.op("aten::mm", 420, 20)
    b.launch("gemm", 425, 440, 100)
    a = b.analysis()
    inp = _card(whatif_section(a), "input")
    assert inp["steps"] == [None] and inp["shown_step"] is None
    line = whatif_lines({"whatif": [inp]})[0]
    assert " in step" not in line and "over the span" in line


# ---- the tab -----------------------------------------------------------------------------
def _node(script: str) -> object:
    out = subprocess.run([shutil.which("node"), "--input-type=module", "-e", script],
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the tab's JS")
def test_the_tabs_card_texts():
    moved = {"saves_us": 0.0, "saves_us_total": 0.0, "moves_us": 1406.0, "saving_moves": True,
             "steps": [5, 6, 7]}
    even = {"saves_us": 3807.7, "saves_us_total": 99000.0, "moves_us": 0.0,
            "saving_moves": False, "steps": list(range(1, 27))}
    one = {**even, "steps": [4]}
    script = (f"import {{ savesText, totalText, movesText, stepSavesText, warmText }} from "
              f"{json.dumps((APP / 'whatif.js').as_uri())};"
              f"const ps = {json.dumps([moved, even, one])};"
              "console.log(JSON.stringify([ps.map(savesText), ps.map(totalText),"
              " ps.map(movesText), ps.map(warmText), [stepSavesText(9, 10000, 9090),"
              " stepSavesText(9, 10000, 11406), stepSavesText(null, 5, 5)]]));")
    assert _node(script) == [
        ["no measurable saving", "saves 3.81 ms/step", "saves 3.81 ms/step"],
        ["", "99.0 ms over 26 warm steps", ""],
        ["1.41 ms of the per-step savings move into other steps' waits", "", ""],
        ["warm steps: no measurable saving", "warm steps: 3.81 ms/step",
         "warm steps: 3.81 ms/step"],
        ["step 9 saves 0.91 ms", "step 9: 1.41 ms longer", "the span: no measurable saving"]]
