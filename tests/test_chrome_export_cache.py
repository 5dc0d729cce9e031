"""/chrome_trace decodes a span's file once (server/exports.py): a second step of the same
span is cut from the decoded file kept on the loaded span, not read and decoded again; the
bytes are those an uncached export gives; one span holds its decoded file at a time.
"""

from __future__ import annotations

import gzip

import pytest
from test_chrome_export import three_steps

from tb_diagnostics.analysis import SpanAnalysis
from tb_diagnostics.analysis.span_timeline import file_range
from tb_diagnostics.server.exports import PARSED_KEY
from tb_diagnostics.server.provider import DataProvider
from tb_diagnostics.trace import chrome_export, load_trace


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TB_DIAGNOSTICS_CACHE", str(tmp_path_factory.mktemp("cache")))


class _Counting:
    """A decoder that counts its decodes (msgspec's own cannot be patched)."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    def decode(self, data):
        self.calls += 1
        return self.inner.decode(data)


@pytest.fixture
def decodes(monkeypatch):
    """How often the export reads a trace file and decodes its JSON, and its event array."""
    counts = {"read": 0}
    read = chrome_export.read_json_bytes

    def counting_read(url, shown):
        counts["read"] += 1
        return read(url, shown)

    monkeypatch.setattr(chrome_export, "read_json_bytes", counting_read)
    top, events = _Counting(chrome_export._TOP), _Counting(chrome_export._EVENTS_TYPED)
    monkeypatch.setattr(chrome_export, "_TOP", top)
    monkeypatch.setattr(chrome_export, "_EVENTS_TYPED", events)
    return lambda: (counts["read"], top.calls, events.calls)


def _uncached(path, index):
    """The export of step ``index`` (None: the span) as the CLI makes it, from scratch."""
    rng = file_range(SpanAnalysis(load_trace(str(path))), index)
    return chrome_export.chrome_trace(path.read_bytes(), path.name, rng)


def test_two_steps_of_a_span_decode_its_file_once(tmp_path, decodes):
    log = tmp_path / "log"
    path = three_steps().write(log / "run" / "worker0.1.pt.trace.json")
    p = DataProvider(str(log))
    p.loader.wait(p.find("run", "worker0", "1"))
    step1, name1 = p.chrome_trace("run", "worker0", "1", "1")
    assert decodes() == (1, 1, 1)
    step2, name2 = p.chrome_trace("run", "worker0", "1", "2")
    whole, _ = p.chrome_trace("run", "worker0", "1", None)
    assert decodes() == (1, 1, 1)  # read, decoded and its times taken once for all three
    assert (name1, name2) == ("worker0.1.step1.pt.trace.json.gz",
                              "worker0.1.step2.pt.trace.json.gz")
    got = [gzip.decompress(b) for b in (step1, step2, whole)]
    want = [_uncached(path, k) for k in (0, 1, None)]
    assert got == want and got[0] != got[1]


def test_one_span_holds_its_decoded_file_at_a_time(tmp_path, decodes):
    log = tmp_path / "log"
    for span in ("1", "2"):
        three_steps().write(log / "run" / f"worker0.{span}.pt.trace.json")
    p = DataProvider(str(log))
    files = {s: p.find("run", "worker0", s) for s in ("1", "2")}
    entries = {s: p.loader.wait(f) for s, f in files.items()}
    p.chrome_trace("run", "worker0", "1", "2")
    assert PARSED_KEY in entries["1"].details
    p.chrome_trace("run", "worker0", "2", "2")
    assert PARSED_KEY not in entries["1"].details and PARSED_KEY in entries["2"].details
    p.chrome_trace("run", "worker0", "2", "3")
    assert decodes()[0] == 2
    p.chrome_trace("run", "worker0", "1", "1")  # span 1's was dropped: read again
    assert decodes()[0] == 3


def test_a_rewritten_file_is_read_again(tmp_path, decodes):
    log = tmp_path / "log"
    path = three_steps().write(log / "run" / "worker0.1.pt.trace.json")
    p = DataProvider(str(log))
    p.loader.wait(p.find("run", "worker0", "1"))
    p.chrome_trace("run", "worker0", "1", "2")
    t = three_steps()
    t.op("aten::extra", 2100, 5)  # a new version of the file: another size, another key
    t.write(path)
    p.loader.wait(p.find("run", "worker0", "1"))
    body, _ = p.chrome_trace("run", "worker0", "1", "2")
    assert decodes()[0] == 2
    assert b"aten::extra" in gzip.decompress(body)
