"""A damaged cache entry is a miss that is rewritten, never a traceback and never served."""

from __future__ import annotations

import json
import os
import re
import time

import msgspec
import numpy as np
import pytest
from test_cache import write_run

from tb_diagnostics import cache as cache_module
from tb_diagnostics import engine
from tb_diagnostics.cache import STALE_TMP_S, TMP_PREFIX, TraceCache


@pytest.fixture
def cached(tmp_path):
    """(span file, cache, entry directory, the cold summary) of one cached small run."""
    cache = TraceCache(tmp_path / "cache")
    (f,) = write_run(tmp_path / "logs").files
    doc = engine.span_summary(f, cache=cache)
    engine.open_model(f, cache)
    d = cache.entry(f)
    assert (d / "model.npz").is_file() and (d / "model.json").is_file()
    return f, cache, d, doc


def _rewrite_npz(path, change) -> None:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


DAMAGE = {
    "truncated npz": lambda d: (d / "model.npz").write_bytes((d / "model.npz").read_bytes()[:100]),
    "empty npz": lambda d: (d / "model.npz").write_bytes(b""),
    "a column one row short": lambda d: _rewrite_npz(
        d / "model.npz", lambda a: a.__setitem__("start", a["start"][:-1])),
    "model.json {}": lambda d: (d / "model.json").write_text("{}"),
    "model.json with wrong types": lambda d: (d / "model.json").write_text(json.dumps(
        {**json.loads((d / "model.json").read_text()), "strings": 5, "lanes": "x"})),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_model_is_a_miss_and_is_written_again(cached, damage):
    f, cache, d, _ = cached
    DAMAGE[damage](d)
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
    f, cache, d, doc = cached
    (p,) = d.glob("results-*.json")
    raw = p.read_bytes()
    changed = RESULT_DAMAGE[damage](raw)
    assert changed != raw
    p.write_bytes(changed)
    variant = p.name.removeprefix("results-").removesuffix(".json")
    assert cache.get_results(f, variant) is None
    assert not p.exists()  # dropped, and written anew by the next analysis
    assert engine.span_summary(f, cache=cache) == doc
    assert msgspec.json.decode(p.read_bytes().partition(b"\n")[2]) == doc


def test_what_a_killed_writer_left_is_swept(cached, monkeypatch):
    f, cache, d, _ = cached
    stale = cache.store / f"{TMP_PREFIX}killed.tmp"
    stale.mkdir()
    (stale / "model.npz").write_bytes(b"half")
    young = cache.store / f"{TMP_PREFIX}writing.tmp"
    young.mkdir()
    old = time.time() - STALE_TMP_S - 10
    os.utime(stale, (old, old))
    leftover = d / f"{TMP_PREFIX}results.tmp"
    leftover.write_bytes(b"{")
    os.utime(leftover, (old, old))
    engine.span_summary(f, cache=cache, thresholds=None)  # a hit: nothing written
    monkeypatch.setattr(cache_module, "MIN_WRITES_PER_SCAN", 1)
    cache.put_results(f, "other", {"steps": []})  # a write that is due to rescan sweeps
    assert not stale.exists() and not leftover.exists()
    assert young.exists()  # a live writer's directory is left alone
