"""A damaged cache entry is a miss that is rewritten, never a traceback and never served."""

from __future__ import annotations

import json
import os
import re
import time
import zlib

import msgspec
import pytest
from test_cache import write_run

from tb_diagnostics import cache as cache_module
from tb_diagnostics import engine
from tb_diagnostics.cache import CACHE_FORMAT, STALE_TMP_S, TMP_PREFIX, TraceCache


@pytest.fixture
def cached(tmp_path):
    """(span file, cache, its model file, the cold summary) of one cached small run."""
    cache = TraceCache(tmp_path / "cache", min_model_rows=0)  # a small model kept too
    (f,) = write_run(tmp_path / "logs").files
    doc = engine.span_summary(f, cache=cache)
    engine.open_model(f, cache)
    m = cache.model_path(f)
    assert m is not None and m.is_file()
    return f, cache, m, doc


def _rewrite_header(path, change) -> None:
    """Edit the model file's JSON header and write it back with a correct CRC, so that the
    checks behind the CRC are what must catch the edit."""
    raw = path.read_bytes()
    line, _, rest = raw.partition(b"\n")
    magic, fmt, head_len, _ = line.split(b" ")
    header = json.loads(rest[: int(head_len)])
    start = len(line) + 1 + int(head_len)
    columns = raw[start + (-start % 64):]
    new = json.dumps(change(header)).encode()
    line_len = len(b"%s %s %d %08x\n" % (magic, fmt, len(new), 0))
    body = new + b"\0" * (-(line_len + len(new)) % 64) + columns
    path.write_bytes(b"%s %s %d %08x\n" % (magic, fmt, len(new), zlib.crc32(body)) + body)


def _one_row_short(h):
    spec = next(c for c in h["columns"] if c[0] == "start")
    spec[2] = [spec[2][0] - 1]
    return h


def _objects(h):
    h["columns"][0][1] = "|O"  # a pickle's dtype: never loaded
    return h


def _flip_last_byte(m):
    raw = bytearray(m.read_bytes())
    raw[-1] ^= 0xFF
    m.write_bytes(bytes(raw))


DAMAGE = {
    "truncated": lambda m: m.write_bytes(m.read_bytes()[:100]),
    "empty": lambda m: m.write_bytes(b""),
    "cut in the columns": lambda m: m.write_bytes(m.read_bytes()[:-8]),
    "a flipped byte": _flip_last_byte,
    "a column one row short": lambda m: _rewrite_header(m, _one_row_short),
    "a column of objects": lambda m: _rewrite_header(m, _objects),
    "header {}": lambda m: _rewrite_header(m, lambda h: {}),
    "header with wrong types": lambda m: _rewrite_header(
        m, lambda h: {**h, "strings": 5, "lanes": "x"}),
    "another format": lambda m: m.write_bytes(m.read_bytes().replace(
        b"model %d " % CACHE_FORMAT, b"model %d " % (CACHE_FORMAT - 1), 1)),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_model_is_a_miss_and_is_written_again(cached, damage):
    f, cache, m, _ = cached
    before = m.read_bytes()
    DAMAGE[damage](m)
    assert m.read_bytes() != before, "the damage changed nothing: the test proves nothing"
    assert cache.get_model(f) is None  # no exception, a miss
    model = engine.open_model(f, cache)  # parsed again, and cached again
    assert len(model) > 0
    again = cache.get_model(f)
    assert again is not None and len(again) == len(model)


RESULT_DAMAGE = {
    "{}": lambda b: b"{}",
    "[]": lambda b: b"[]",
    "an edited verdict": lambda b: re.sub(rb'"verdict":"[a-z-]+"', b'"verdict":"edited"', b,
                                          count=1),
    "steps null": lambda b: b.replace(b'"steps":[', b'"steps":null,"x":[', 1),
    "truncated": lambda b: b[: len(b) // 2],
}


@pytest.mark.parametrize("damage", list(RESULT_DAMAGE))
def test_a_damaged_or_edited_results_file_is_never_served(cached, damage):
    f, cache, _, doc = cached
    (p,) = cache.store.glob(f"{cache.key(f)}.*.results")
    raw = p.read_bytes()
    changed = RESULT_DAMAGE[damage](raw)
    assert changed != raw
    p.write_bytes(changed)
    variant = p.name.split(".")[1]
    assert cache.get_results(f, variant) is None
    assert not p.exists()  # dropped, and written anew by the next analysis
    assert engine.span_summary(f, cache=cache) == doc
    assert msgspec.json.decode(p.read_bytes().partition(b"\n")[2]) == doc


def test_what_a_killed_writer_left_is_swept(cached, monkeypatch):
    f, cache, _, _ = cached
    stale = cache.store / f"{TMP_PREFIX}killed.tmp"
    stale.write_bytes(b"half a model")
    young = cache.store / f"{TMP_PREFIX}writing.tmp"
    young.write_bytes(b"being written")
    old = time.time() - STALE_TMP_S - 10
    os.utime(stale, (old, old))
    leftover = cache.store / f"{TMP_PREFIX}results.tmp"
    leftover.write_bytes(b"{")
    os.utime(leftover, (old, old))
    engine.span_summary(f, cache=cache, thresholds=None)  # a hit: nothing written
    monkeypatch.setattr(cache_module, "MIN_WRITES_PER_SCAN", 1)
    cache.put_results(f, "other", {"steps": []})  # a write that is due to rescan sweeps
    assert not stale.exists() and not leftover.exists()
    assert young.exists()  # a live writer's temporary is left alone
