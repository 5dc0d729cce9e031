"""The string table numbers each distinct string once, in order of first appearance."""

from __future__ import annotations

from tb_diagnostics.trace.interner import Interner


def test_ids_in_order_of_first_appearance_across_batches():
    table = Interner()
    assert table.many(["a", "b", "a", "c"]).tolist() == [0, 1, 0, 2]
    assert table.many(["c", "d", "d", "a", "e"]).tolist() == [2, 3, 3, 0, 4]
    assert table.many([]).tolist() == []
    assert table.strings == ["a", "b", "c", "d", "e"]
    assert table.optional(["", "f", "a", ""]).tolist()[1:3] == [5, 0]


def test_a_batch_of_only_new_strings_and_one_of_only_known_ones():
    table = Interner()
    names = [f"ProfilerStep#{k}" for k in range(1000)]
    assert table.many(names).tolist() == list(range(1000))
    assert table.many(names[::-1]).tolist() == list(range(999, -1, -1))
    assert len(table.strings) == len(table.ids) == 1000
