"""The "What if" card, in a real browser, against the span route's ``whatif``.

ResNet-50 (V100, DataLoader with no workers): one bar pair per projection,
``all`` first, then by saving; the figures match the route; each card's bars are the step
the route names for its saving, named, till a step is selected, then that step's with its
own saving; a rule's button opens its finding. The CPU matmul run has nothing to replay:
the empty state.
Screenshots of the card in both themes land in the test artifacts directory (see conftest).
"""

from __future__ import annotations

import re
import time
from urllib.parse import unquote

from playwright.sync_api import expect

from .conftest import CPU_RUN, RESNET

READY = 60_000
SPAN = "1623143089861"


def ready(frame) -> None:
    expect(frame.locator("body")).to_have_attribute("data-ready", "true", timeout=READY)


def summary(tb, run: str) -> dict:
    """The span route's summary of the run's first span (asked again while it loads)."""
    deadline = time.monotonic() + READY / 1000
    while True:
        runs = {r["run"]: r for r in tb.json("runs").get("runs") or []}
        if run in runs:
            w = runs[run]["workers"][0]
            assert run != RESNET or w["spans"][0]["span"] == SPAN
            res = tb.json(f"span?run={run}&worker={w['worker']}&span={w['spans'][0]['span']}")
            if "summary" in res:
                return res["summary"]
        assert time.monotonic() < deadline, f"{run} did not load"
        time.sleep(0.3)


def ms(us: float) -> str:
    """format.js ``ms``: 0 decimals from 100 ms, 1 from 10 ms, else 2."""
    v = us / 1000
    return f"{v:.{0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2}f}"


def dur(us: float) -> str:
    """format.js ``dur`` for the durations these tests meet (1 µs … 1 s)."""
    if us < 1000:
        return f"{us:.{2 if us < 10 else 1}f} µs"
    return f"{us / 1000:.{2 if us < 1e4 else 1}f} ms"


def saves(p: dict) -> str:
    if not p["saves_us"] or p["saves_us"] <= 0:
        return "no measurable saving"
    unit = dur(p["saves_us"]) if p["saves_us"] < 10 else f"{ms(p['saves_us'])} ms"
    per = " per span" if all(s is None for s in p["steps"]) else "/step"
    return f"saves {unit}{per}"


def step_saves(step: int, saved_us: float) -> str:
    """whatif.js ``stepSavesText``: one step's own saving, labelled as that step's."""
    def unit(us: float) -> str:
        return dur(us) if us < 10 else f"{ms(us)} ms"

    if saved_us >= 0.05:
        return f"step {step} saves {unit(saved_us)}"
    if saved_us <= -0.05:
        return f"step {step}: {unit(-saved_us)} longer"
    return f"step {step}: no measurable saving"


def ordered(wi: list[dict]) -> list[str]:
    """``all`` first, then by saving, most first (the route's order breaks ties)."""
    return [p["id"] for _, p in sorted(enumerate(wi), key=lambda x: (
        x[1]["id"] != "all", -(x[1]["saves_us"] or 0), x[0]))]


def test_resnet_projections_match_the_route(page, open_tab, tensorboard, resnet, artifacts):
    s = summary(tensorboard, resnet)
    wi = {p["id"]: p for p in s["whatif"]}
    assert {"all", "input"} <= wi.keys()
    frame = open_tab(run=resnet)
    ready(frame)
    card = frame.locator("#whatif")
    expect(card.locator("h2")).to_have_text("What if")
    rows = card.locator(".wi-row")
    expect(rows).to_have_count(len(wi))
    ids = [rows.nth(i).get_attribute("data-id") for i in range(rows.count())]
    assert ids == ordered(s["whatif"])
    assert ids[0] == "all"
    # `all` stands apart and says that the savings overlap
    expect(rows.first).to_have_class(re.compile(r"\bwi-all\b"))
    expect(rows.first.locator(".wi-note")).to_contain_text("do not add up")
    # Before the user picks a step, each card draws the warm step the route names for its
    # saving (shown_step: its own saving the nearest the per-step one), named beside the
    # bars; the saving beside them is the warm steps' per step. Every figure as the route
    # gives it; the title says what is assumed and on which steps.
    assert card.locator(".card-body").get_attribute("data-step") == ""
    expect(card.locator(".wi-basis")).to_contain_text("bars: the step named")
    for pid, p in wi.items():
        row = card.locator(f"#whatif-{pid}")
        before, after = p["shown_before_us"], p["shown_after_us"]
        expect(row.locator(".wi-ba")).to_have_text(
            f"step {p['shown_step']}: {ms(before)} → {ms(after)} ms")
        expect(row.locator(".wi-save")).to_have_text(saves(p))
        assert row.get_attribute("data-step") == str(p["shown_step"])
        assert float(row.get_attribute("data-before")) == before
        assert float(row.get_attribute("data-after")) == after
        assert float(row.get_attribute("data-saves")) == p["saves_us"]
        # The step drawn represents the saving: none of the warm steps' is nearer.
        own = {x["step"]: x["before_us"] - x["after_us"] for x in p["per_step"]
               if x["step"] in p["steps"]}
        nearest = min(abs(v - p["saves_us"]) for v in own.values())
        assert abs(own[p["shown_step"]] - p["saves_us"]) <= nearest + 0.01, pid
        title = row.locator(".wi-bars").get_attribute("title")
        assert p["assumes"] in title
        assert "5–10" in title
        # A saving other steps give back says how much moves (amp here: step 8 replays
        # 6.76 ms longer than recorded).
        moves = row.locator(".wi-moves")
        if p["saving_moves"]:
            expect(moves).to_have_text(
                f"{ms(p['moves_us'])} ms of the per-step savings move into other steps' waits")
        else:
            expect(moves).to_have_count(0)
    assert any(p["saving_moves"] for p in wi.values())
    # one scale for every bar: the longest wall drawn
    scale = max(max(p["shown_before_us"], p["shown_after_us"]) for p in wi.values())
    longest = max(wi.values(), key=lambda p: p["shown_before_us"])["id"]
    full = card.locator(f"#whatif-{longest} .wi-bar.before").bounding_box()["width"]
    for pid, p in wi.items():
        before = card.locator(f"#whatif-{pid} .wi-bar.before").bounding_box()["width"]
        after = card.locator(f"#whatif-{pid} .wi-bar.after").bounding_box()["width"]
        assert abs(before - full * p["shown_before_us"] / scale) < 1.5, pid
        assert abs(after - full * p["shown_after_us"] / scale) < 1.5, pid
    card.scroll_into_view_if_needed()
    page.wait_for_timeout(200)
    card.screenshot(path=str(artifacts / "whatif-resnet-light.png"))
    page.evaluate("document.body.classList.add('dark-mode')")  # what TB's theme switch does
    expect(frame.locator("html")).to_have_class("dark")
    page.wait_for_timeout(200)
    card.screenshot(path=str(artifacts / "whatif-resnet-dark.png"))
    moving = next(pid for pid, p in wi.items() if p["saving_moves"])
    card.locator(f"#whatif-{moving}").screenshot(path=str(artifacts / "whatif-moves-dark.png"))
    # selecting a step redraws the bars for it, with that step's own saving, labelled (a
    # warm step not the input card's, whose "#N" names no other step's row)
    numbers = [str(x["step"]) for x in s["steps"]]
    step = next(x["step"] for x in s["steps"] if x["step"] != wi["input"]["shown_step"]
                and not x.get("cold")
                and sum(n.startswith(str(x["step"])) for n in numbers) == 1)
    frame.locator("#steps tbody tr", has_text=f"#{step}").first.click()
    expect(card.locator(".card-body")).to_have_attribute("data-step", str(step))
    expect(card.locator(".wi-basis")).to_have_text(f"bars and savings: step {step}")
    for pid, p in wi.items():
        row = card.locator(f"#whatif-{pid}")
        (one,) = [x for x in p["per_step"] if x["step"] == step]
        before, after = one["before_us"], one["after_us"]
        expect(row.locator(".wi-ba")).to_have_text(f"step {step}: {ms(before)} → {ms(after)} ms")
        expect(row.locator(".wi-save")).to_have_text(step_saves(step, before - after))
        warm = saves(p).replace("saves ", "") if p["saves_us"] > 0 else saves(p)
        expect(row.locator(".wi-total").first).to_have_text(f"warm steps: {warm}")
    inp = card.locator("#whatif-input")
    assert (inp.locator(".wi-bar.after").bounding_box()["width"]
            < inp.locator(".wi-bar.before").bounding_box()["width"] * 0.8)
    # only the rules whose change the card is (or is part of) that have findings here get a
    # button, then, dashed, the related ones; the parts list each part's own saving
    have = {f["rule"] for f in s["findings"]}
    for pid, p in wi.items():
        for sel, rules in (("button.wi-rule[data-rule]:not(.wi-related)", p["rules"]),
                           ("button.wi-related", p.get("related", []))):
            buttons = card.locator(f"#whatif-{pid} {sel}")
            want = [r for r in rules if r in have]
            assert [buttons.nth(i).get_attribute("data-rule")
                    for i in range(buttons.count())] == want, (pid, sel)
        parts = card.locator(f"#whatif-{pid} li.wi-part")
        assert [float(parts.nth(i).get_attribute("data-saves"))
                for i in range(parts.count())] == [x["saves_us"] for x in p.get("parts", [])]
    card.scroll_into_view_if_needed()
    page.wait_for_timeout(200)
    card.screenshot(path=str(artifacts / "whatif-resnet-step-dark.png"))
    page.screenshot(path=str(artifacts / "whatif-resnet-tab-dark.png"))
    page.evaluate("document.body.classList.remove('dark-mode')")
    expect(frame.locator("html")).not_to_have_class("dark")
    page.wait_for_timeout(200)
    card.screenshot(path=str(artifacts / "whatif-resnet-step-light.png"))


def test_a_rule_button_opens_its_finding(page, open_tab, tensorboard, resnet, artifacts):
    s = summary(tensorboard, resnet)
    loader = next(f for f in s["findings"] if f["rule"] == "dataloader-bottleneck")
    frame = open_tab(run=resnet)
    ready(frame)
    button = frame.locator('#whatif-input button.wi-rule[data-rule="dataloader-bottleneck"]')
    button.click()
    key = button.get_attribute("data-key")
    head = frame.locator(f'#findings button.fhead[data-key="{key}"]')
    expect(head).to_have_attribute("aria-expanded", "true")
    expect(head).to_be_focused()
    expect(head.locator(".ftitle")).to_contain_text(loader["title"])
    # the finding shows the replayed saving, the same as the projection's
    expect(head.locator(".fsave")).to_have_text(f"saves ~{dur(loader['savings_us'])}/step")
    assert loader["savings_us"] == next(p for p in s["whatif"] if p["id"] == "input")["saves_us"]
    assert f"p.diagnostics.finding={key}" in unquote(page.evaluate("location.hash"))
    expect(frame.locator("#findings .finding.open")).to_have_count(1)
    page.screenshot(path=str(artifacts / "whatif-resnet-opened.png"))
    # from the keyboard: Tab reaches the rule buttons, Enter opens another finding
    amp = frame.locator('#whatif-amp button.wi-rule[data-rule="fp32-matmul"]')
    if amp.count():
        amp.focus()
        page.keyboard.press("Enter")
        key = amp.get_attribute("data-key")
        expect(frame.locator(f'#findings button.fhead[data-key="{key}"]')).to_have_attribute(
            "aria-expanded", "true")
        expect(frame.locator("#findings .finding.open")).to_have_count(1)
    first = frame.locator("#whatif button.wi-rule").first
    first.focus()
    page.keyboard.press("Tab")
    expect(frame.locator("#whatif button.wi-rule").nth(1)).to_be_focused()


def test_cpu_run_has_nothing_to_replay(page, open_tab, tensorboard, artifacts):
    s = summary(tensorboard, CPU_RUN)
    assert s["whatif"] == []
    frame = open_tab(run=CPU_RUN)
    ready(frame)
    card = frame.locator("#whatif")
    expect(card.locator(".wi-row")).to_have_count(0)
    empty = card.locator("#whatif-empty")
    expect(empty).to_be_visible()
    expect(empty).to_contain_text("Nothing in this span has a change the replay can model")
    expect(empty).to_contain_text("CPU-only")
    card.screenshot(path=str(artifacts / "whatif-cpu-empty.png"))
