"""``dispatch_chain.TextCodes`` (codes per text, each string id looked up once across the
passes) gives the codes the rule's old per-pass lookup gave: every pass's distinct ids
coded in ascending order, a text met again (under any id) keeping its first code."""

from __future__ import annotations

import numpy as np

from tb_diagnostics.rules.dispatch_chain import TextCodes


def old_codes(passes: list[np.ndarray], strings: list[str], labels: list[str],
              ) -> tuple[list[np.ndarray], list[list[int]], dict[str, int]]:
    text_code: dict[str, int] = {}
    out, out_labels = [], []
    for sid in passes:
        ids = np.unique(sid)
        codes = np.asarray([text_code.setdefault(strings[i], len(text_code))
                            for i in ids.tolist()], dtype=np.int64)
        out.append(codes[np.searchsorted(ids, sid)] if sid.size else np.zeros(0, np.int64))
        out_labels.append([text_code.setdefault(t, len(text_code)) for t in labels])
    return out, out_labels, text_code


def test_same_codes_as_per_pass_lookup() -> None:
    # Texts repeat under several ids, and labels share texts with names.
    strings = ["aten::add", "k", "aten::mm", "k", "aten::add", "x", "thread 7", "y"] * 3
    labels = ["thread 7", "thread 9"]
    rng = np.random.default_rng(1)
    passes = [rng.integers(0, len(strings), size=n) for n in (0, 1, 7, 40, 3, 0, 100)]
    passes.insert(2, np.asarray([len(strings) - 1, 0]))  # the largest id early: a growth
    want, want_labels, want_text = old_codes(passes, strings, labels)
    tc = TextCodes(strings)
    for sid, w, wl in zip(passes, want, want_labels, strict=True):
        got = tc.of_sids(sid)
        assert got.dtype == np.int64 and np.array_equal(got, w)
        assert [tc.of_text(t) for t in labels] == wl
    assert tc.by_text == want_text and list(tc.by_text) == list(want_text)
