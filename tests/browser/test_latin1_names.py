"""Issue 22, case 3: a run whose directory name is not UTF-8 (Latin-1 ``caf\\xe9``) is
listed with U+FFFD, opens, and its shared link opens it again; nothing throws (the page
fixture fails on any console error or uncaught exception)."""

from __future__ import annotations

import json
import os

from playwright.sync_api import expect

from .conftest import FRAME
from .test_tab import ready


def _write_run(logdir: bytes, run: bytes, steps: int) -> None:
    """A CPU-only run of ``steps`` steps, its one file named ``w\\xf6rker0.1.pt.trace.json``."""
    events = []
    for n in range(1, steps + 1):
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                    "pid": 1, "tid": 1, "ts": n * 1000, "dur": 900},
                   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                    "ts": n * 1000 + 10, "dur": 500}]
    os.makedirs(logdir + b"/" + run)
    with open(logdir + b"/" + run + b"/w\xf6rker0.1.pt.trace.json", "wb") as fh:
        fh.write(json.dumps({"schemaVersion": 1, "traceEvents": events}).encode())


def _run_value(frame) -> list[int]:
    # The select's value as code units: Playwright's own transport would mangle a lone
    # surrogate, the page's numbers cannot be.
    return frame.locator('select[aria-label="run"]').evaluate(
        "(s) => Array.from({length: s.value.length}, (_, i) => s.value.charCodeAt(i))")


def test_a_latin1_run_opens_and_its_link_opens_it_again(page, start_tensorboard, tmp_path):
    logdir = os.fsencode(tmp_path / "log")
    _write_run(logdir, b"a-plain-run", steps=2)  # opens first; its 2 rows tell the runs apart
    _write_run(logdir, b"caf\xe9", steps=3)
    tb = start_tensorboard(os.fsdecode(logdir))
    try:
        page.goto(f"{tb.url}/#diagnostics")
        frame = page.frame_locator(FRAME)
        ready(frame)
        expect(frame.locator("#steps tbody tr")).to_have_count(2)
        run_select = frame.locator('select[aria-label="run"]')
        expect(run_select.locator("option")).to_have_text(["a-plain-run", "caf\ufffd"])
        run_select.select_option(label="caf\ufffd")
        ready(frame)
        expect(frame.locator("#steps tbody tr")).to_have_count(3)
        expect(frame.locator('select[aria-label="worker"] option')).to_have_text(["w\ufffdrker0"])
        assert _run_value(frame) == [ord(c) for c in "caf\udce9"]
        page.wait_for_function("location.hash.includes('p.diagnostics.run.bytes=caf%25E9')")

        other = page.context.new_page()
        other.on("pageerror", lambda e: page.problems.append(f"shared link: pageerror: {e}"))
        try:
            other.goto(page.url)
            frame2 = other.frame_locator(FRAME)
            ready(frame2)
            assert _run_value(frame2) == [ord(c) for c in "caf\udce9"]
            expect(frame2.locator("#steps tbody tr")).to_have_count(3)
        finally:
            other.close()
    finally:
        tb.stop()
