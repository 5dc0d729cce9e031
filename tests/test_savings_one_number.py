"""A rule's saving and its what-if card are the same number (issue 23, item 7).

One statistic for both (``views.whatif.saving_over``): each warm window's replayed saving,
signed, added up and never below zero at the end (``saves_us_total``), and that total over
the windows' number (``saves_us``; issue 25 item 5). A card reads
the span's warm windows; a finding the warm ones among its steps. A finding whose change
is its card's (``claims``) gives the card's number; one whose change is part of it
(``parts``: a sync site, the pageable copies) gives its own, which the card lists as a part.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rules.conftest import SHARED_TRACES, TraceBuilder

from tb_diagnostics.analysis.views.whatif import (
    CARDS,
    part_windows,
    saving_over,
    warm_windows,
)
from tb_diagnostics.report.whatif import (
    PARTS_NOTE,
    whatif_items,
    whatif_lines,
    whatif_section,
)
from tb_diagnostics.rules import run_rules

APP = Path(__file__).resolve().parents[1] / "plugin" / "tb_diagnostics" / "static" / "app"
CLAIMS = {r: c.id for c in CARDS for r in c.claims}
PARTS = {r: c.id for c in CARDS for r in c.parts}


@pytest.fixture
def builder(tmp_path: Path) -> TraceBuilder:
    return TraceBuilder(tmp_path)


def _span(analysis) -> dict:
    """The parts of a span document this file reads: findings and cards."""
    findings = run_rules(analysis)
    return {"findings": [f.to_dict() for f in findings],
            "whatif": whatif_section(analysis, findings)}


def _card(span: dict, cid: str) -> dict:
    (card,) = [w for w in span["whatif"] if w["id"] == cid]
    return card


def _of(span: dict, rule: str) -> list[dict]:
    return [f for f in span["findings"] if f["rule"] == rule]


# ---- the statistic -----------------------------------------------------------------------
def test_saving_over_adds_the_steps_savings_unclipped_then_divides_by_their_number():
    before = np.array([100.0, 100.0, 100.0, 100.0])
    after = np.array([110.0, 60.0, 20.0, 100.0])  # -10 (replay noise), 40, 80, 0
    every = saving_over(before, after)
    assert (every.total_us, every.per_step_us, every.gains_us) == (110.0, 27.5, 120.0)
    assert every.moves_us == 10.0 and not every.moves  # 10 of 120 given back: it holds
    two = saving_over(before, after, [1, 2])
    assert (two.total_us, two.per_step_us, two.windows) == (120.0, 60.0, (1, 2))
    assert two.index.dtype == np.int64 and two.index.tolist() == [1, 2]
    assert saving_over(before, after, np.asarray([2, 1], dtype=np.int32)).windows == (1, 2)
    assert every.windows == (0, 1, 2, 3) and every.index.dtype == np.int64
    none = saving_over(before, after, [])
    assert (none.total_us, none.per_step_us, none.shown) == (0.0, 0.0, None)
    assert none.windows == () and not none.moves
    # Equal where the figures and the windows are; hashed alike then.
    assert saving_over(before, after, np.asarray([1, 2])) == two
    assert hash(saving_over(before, after, (2, 1))) == hash(two)
    assert saving_over(before, after, [1, 3]) != two and two != "two"
    assert none == saving_over(before, after, np.zeros(0, dtype=np.int32))
    # A change that lengthens the span saves nothing, not less than nothing.
    assert saving_over(before, before + 5.0).per_step_us == 0.0


def _item_step(b: TraceBuilder, n: int, t0: float, wall: float = 1000.0) -> None:
    """tests/rules/test_host_sync.py's step: a 400 µs kernel, ``.item()`` waiting for it
    from t0+45 to its end at t0+430; replayed without the wait the host reaches its next
    launch 385 µs sooner."""
    b.step(n, t0, wall)
    b.op("aten::mm", t0 + 10, 20)
    b.launch("gemm_kernel", t0 + 15, t0 + 30, 400)
    b.op("aten::item", t0 + 40, 420)
    b.op("aten::_local_scalar_dense", t0 + 42, 416)
    b.runtime("cudaStreamSynchronize", t0 + 45, 410)
    b.op("aten::add", t0 + 600, 10)
    b.launch("add_kernel", t0 + 602, t0 + 620, 50)


def _cold_then_warm(b: TraceBuilder) -> None:
    """Step 1 is cold (3 ms, the warm step 1 ms) and its ``.item()`` waits on an idle
    device (nothing to save); step 2 is :func:`_item_step`. Before the fix the host-sync
    finding took the median over both steps, (0 + 385) / 2, half the card's 385: the
    alexnet trace's 438 µs against 876 µs."""
    b.step(1, 0, 3000)
    b.op("aten::mm", 10, 20)
    b.launch("gemm_kernel", 15, 30, 400)
    b.op("aten::item", 1000, 30)
    b.op("aten::_local_scalar_dense", 1002, 26)
    b.runtime("cudaStreamSynchronize", 1005, 20)
    b.op("aten::add", 2600, 10)
    b.launch("add_kernel", 2602, 2620, 50)
    _item_step(b, 2, 3000)


def test_a_finding_whose_change_is_the_cards_gives_the_cards_number(builder):
    _cold_then_warm(builder)
    a = builder.analysis()
    assert warm_windows(a) == [1]  # step 1 is cold, decided once
    span = _span(a)
    (f,) = _of(span, "host-sync")
    assert f["steps"] == [1, 2]
    card = _card(span, "syncs")
    assert card["steps"] == [2]
    assert f["savings_us"] == pytest.approx(385.0) and card["saves_us"] == f["savings_us"]
    assert f["savings_total_us"] == card["saves_us_total"] == pytest.approx(385.0)
    assert card["rules"] == ["host-sync", "pageable-memcpy"]
    (part,) = card["parts"]
    assert part == {"rule": "host-sync", "subject": f["subject"], "steps": [1, 2],
                    "saves_us": f["savings_us"], "saves_us_total": f["savings_total_us"]}


def test_part_windows_are_the_warm_steps_among_the_findings(builder):
    _cold_then_warm(builder)
    a = builder.analysis()
    assert part_windows(a, [1, 2]) == [1]
    assert part_windows(a, [1]) == [0]  # only a cold step: that step
    assert part_windows(a, None) == part_windows(a, [99]) == [1]  # the card's windows


def _two_sites(b: TraceBuilder, steps: int = 3) -> None:
    """Each 2 ms step: ``.item()`` waits for a 400 µs kernel, then
    ``torch.cuda.synchronize()`` (a bare cudaDeviceSynchronize) waits for another."""
    for s in range(steps):
        t0 = s * 2000.0
        b.step(s + 1, t0, 2000)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm_kernel", t0 + 15, t0 + 30, 400)
        b.op("aten::item", t0 + 40, 420)
        b.op("aten::_local_scalar_dense", t0 + 42, 416)
        b.runtime("cudaStreamSynchronize", t0 + 45, 410)
        b.op("aten::mul", t0 + 470, 20)
        b.launch("mul_kernel", t0 + 475, t0 + 490, 400)
        b.runtime("cudaDeviceSynchronize", t0 + 500, 400)
        b.op("aten::add", t0 + 1200, 10)
        b.launch("add_kernel", t0 + 1202, t0 + 1220, 50)


def test_a_card_of_several_findings_lists_each_as_a_part_with_its_number(builder):
    _two_sites(builder)
    span = _span(builder.analysis())
    found = _of(span, "host-sync")
    assert len(found) == 2
    card = _card(span, "syncs")
    parts = card["parts"]
    assert sorted((p["subject"], p["saves_us"], p["saves_us_total"]) for p in parts) == sorted(
        (f["subject"], f["savings_us"], f["savings_total_us"]) for f in found)
    assert [p["saves_us"] for p in parts] == sorted((p["saves_us"] for p in parts), reverse=True)
    for p in parts:
        assert p["saves_us"] > 0 and p["saves_us_total"] == pytest.approx(3 * p["saves_us"])
    # Both syncs gone together save at least what either saves alone.
    assert card["saves_us"] >= max(p["saves_us"] for p in parts) - 1e-9
    (line, sub) = next((line, sub) for line, sub in whatif_items(span)
                       if line.startswith("syncs:"))
    # (First the path's line: tests/test_whatif_path.py.)
    assert sub[0].startswith("on the critical path: ")
    sub = sub[1:]
    assert len(sub) == 3 and sub[-1] == PARTS_NOTE
    assert all(x.startswith("part: host-sync (") and "of steps 1–3" in x for x in sub[:2])
    lines = whatif_lines(span)
    assert lines[lines.index(line) + 2] == f"  {sub[0]}"


def _pageable_copies(b: TraceBuilder) -> None:
    """tests/rules/test_pageable_memcpy.py's two steps: a 210 µs pageable copy call."""
    for s in range(2):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::to", t0 + 10, 220)
        b.op("aten::copy_", t0 + 12, 215)
        b.launch("Memcpy HtoD (Pageable -> Device)", t0 + 15, t0 + 30, 190,
                 api="cudaMemcpyAsync", api_dur=210, cat="gpu_memcpy", bytes=19_267_584)


def test_pageable_copies_are_the_syncs_cards_change_when_alone(builder):
    """The syncs card makes pageable copies pinned too: with no other blocking call in the
    span, the pageable-memcpy finding's change is the card's, and so is its number."""
    _pageable_copies(builder)
    span = _span(builder.analysis())
    (f,) = _of(span, "pageable-memcpy")
    card = _card(span, "syncs")
    assert abs(f["savings_us"] - 205.0) < 1.0
    assert (card["saves_us"], card["saves_us_total"]) == (f["savings_us"],
                                                         f["savings_total_us"])
    assert [p["rule"] for p in card["parts"]] == ["pageable-memcpy"]
    assert "pinned memory" in card["assumes"]


def test_tiny_kernels_claim_graphs_and_the_launch_card_claims_no_rule(builder):
    for s in range(3):
        t0 = s * 2000
        builder.step(s + 1, t0, 1999)
        for k in range(60):
            ts = t0 + 10 + k * 30
            builder.op("aten::add", ts, 25)
            builder.launch("add_kernel", ts + 2, ts + 20, 2, api_dur=10)
    span = _span(builder.analysis())
    (tiny,) = _of(span, "tiny-kernels")
    graphs, launch = _card(span, "graphs"), _card(span, "launch")
    assert tiny["savings_us"] == graphs["saves_us"] > 0
    assert graphs["rules"] == ["tiny-kernels"] and graphs["parts"] == []
    assert launch["rules"] == [] and launch["parts"] == []
    assert {"tiny-kernels", "high-call-count", "launch-delay"} <= set(launch["related"])
    for f in _of(span, "high-call-count"):
        assert f["savings_us"] is None
    # `all` is no rule's change: it claims no finding's number.
    assert _card(span, "all")["rules"] == []


# ---- every shared trace ------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_spans() -> list[tuple[str, dict]]:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is absent")
    from tb_diagnostics.engine import build_document
    from tb_diagnostics.logdir import scan_logdir

    doc = build_document(scan_logdir(str(SHARED_TRACES)))
    return [(r["run"], s) for r in doc["runs"] for w in r["workers"] for s in w["spans"]]


@pytest.mark.shared
def test_every_finding_with_a_saving_is_its_cards_number_or_one_of_its_parts(shared_spans):
    linked = 0
    for run, span in shared_spans:
        cards = {w["id"]: w for w in span["whatif"]}
        for f in span["findings"]:
            on = [c for c in cards.values() if f["rule"] in c["rules"]]
            if f["savings_us"] is None:
                assert not on or f["rule"] in CLAIMS, (run, f["rule"])
                continue
            for c in on:
                linked += 1
                if f["rule"] in CLAIMS:
                    assert f["savings_us"] == c["saves_us"], (run, f["rule"], c["id"])
                else:
                    (part,) = [p for p in c["parts"] if p["rule"] == f["rule"]
                               and p["subject"] == f["subject"]]
                    assert (part["saves_us"], part["saves_us_total"]) == (
                        f["savings_us"], f["savings_total_us"]), (run, f["rule"])
        for c in cards.values():
            # A card's parts are its findings, no more.
            keys = {(f["rule"], f["subject"]) for f in span["findings"]}
            assert all((p["rule"], p["subject"]) in keys for p in c["parts"]), run
    assert linked > 20  # the shared traces have host-sync, input, graphs, amp… findings


@pytest.mark.shared
def test_alexnets_one_host_sync_finding_is_its_card(shared_spans):
    """The finding counted the cold step 0 (saving 0) with step 1 (876 µs): 438."""
    ((_, span),) = [(r, s) for r, s in shared_spans if r == "hta_a100_alexnet_cuda_sync"]
    (f,) = _of(span, "host-sync")
    card = _card(span, "syncs")
    assert card["steps"] == [1] and f["steps"] == [0, 1]
    assert f["savings_us"] == card["saves_us"] == pytest.approx(876.0)


# ---- the tab -----------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the tab's JS")
def test_the_tabs_part_text():
    parts = [{"rule": "host-sync", "subject": "aten::item → cudaMemcpyAsync", "steps": [3, 4],
              "saves_us": 154.0, "saves_us_total": 2580.0},
             {"rule": "pageable-memcpy", "subject": None, "steps": [None],
              "saves_us": 0.0, "saves_us_total": 0.0}]
    script = (f"import {{ partText }} from {json.dumps((APP / 'whatif.js').as_uri())};"
              f"console.log(JSON.stringify({json.dumps(parts)}.map(partText)));")
    out = subprocess.run([shutil.which("node"), "--input-type=module", "-e", script],
                         capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == [
        "host-sync · aten::item → cudaMemcpyAsync: alone saves 0.15 ms/step (2.58 ms in all)",
        "pageable-memcpy: alone: no measurable saving"]


def test_the_tabs_bounded_document_bounds_the_parts_steps():
    from tb_diagnostics.server.bounded import bound_steps

    n = 3000
    steps = [{"step": k, "wall_us": 1000.0 + (k % 7), "device_busy": 0.5,
              "verdict": "mixed"} for k in range(n)]
    part = {"rule": "host-sync", "subject": "x", "steps": list(range(n)), "saves_us": 5.0,
            "saves_us_total": 5.0 * n}
    card = {"id": "syncs", "steps": list(range(n)), "parts": [part],
            "per_step": [{"step": k, "before_us": 1.0, "after_us": 1.0} for k in range(n)]}
    out = bound_steps({"steps": steps, "findings": [], "whatif": [card], "notes": []})
    (bounded,) = out["whatif"][0]["parts"]
    assert len(bounded["steps"]) == len(out["steps"]) < n
    assert (bounded["steps_total"], bounded["steps_range"]) == (n, [0, n - 1])
    assert bounded["saves_us"] == 5.0 and bounded["saves_us_total"] == 5.0 * n
