"""The model's string table: every name, stack and raw JSON value of a trace interned once,
the columns holding indices into it."""

from __future__ import annotations

from collections import defaultdict
from itertools import count, islice, repeat
from typing import Any

import numpy as np

from tb_diagnostics.trace.columns import packed
from tb_diagnostics.trace.model import NO_ID


class Interner:
    """One table of the strings of a trace: each distinct string (name, call stack, raw JSON
    text of shapes) is stored once and referred to by its index."""

    def __init__(self) -> None:
        # A missing string is numbered by the lookup itself (the factory counts on from
        # the table's size): one C-speed pass a batch, whether its strings are new or not.
        # Only :meth:`many` subscripts it (a subscript inserts); ``get`` and ``in`` do not.
        self.ids: defaultdict[str, int] = defaultdict(count().__next__)
        self.strings: list[str] = []
        # Raw JSON text → string id, per compaction mode; empty and null are absent.
        self.raw_ids: dict[bool, dict[bytes, int]] = {
            mode: {b"": NO_ID, b"null": NO_ID} for mode in (False, True)}
        # For :meth:`composed`: the string id of each combination of raw texts seen.
        self._composed: dict[tuple[bytes, ...], int] = {}

    def many(self, values: list[str]) -> np.ndarray:
        """Each value's id, the new ones numbered in order of first appearance."""
        ids = self.ids
        # One lookup per value (a span of 10⁶ steps has 10⁶ distinct step names): a new
        # string is inserted, with the next id, by the lookup that first meets it.
        out = packed(map(ids.__getitem__, values), "i", len(values))
        new = len(ids) - len(self.strings)
        if new:
            # The strings inserted last are the dictionary's last keys, in order.
            fresh = list(islice(reversed(ids), new))
            fresh.reverse()
            self.strings.extend(fresh)
        return out

    def optional(self, values: list[str]) -> np.ndarray:
        """Intern the non-empty strings; NO_ID for the rest."""
        out = np.full(len(values), NO_ID, dtype=np.int32)
        idx = [i for i, v in enumerate(values) if v]
        if idx:
            out[idx] = self.many([values[i] for i in idx])
        return out

    def raw(self, values: list[Any], compact: bool = False) -> np.ndarray:
        """Intern raw JSON values (``msgspec.Raw``) as their text; NO_ID when absent.

        ``compact`` drops white space, for values that hold only numbers (shapes),
        so that the same shape printed two ways is one string.
        """
        keys = raw_texts(values)
        known = self.raw_ids[compact]
        n = len(keys)
        # _UNKNOWN for the texts not seen yet (NO_ID is a value of the table).
        out = packed(map(known.get, keys, repeat(_UNKNOWN, n)), "i", n)
        new = np.flatnonzero(out == _UNKNOWN)
        if new.size:
            for i in new.tolist():  # in order: new texts are numbered as they first appear
                k = keys[i]
                j = known.get(k)
                if j is None:
                    text = (k.translate(None, b" \t\r\n") if compact else k).decode(
                        "utf-8", "replace")
                    j = known[k] = int(self.many([text])[0])
                out[i] = j
        return out

    def composed(self, fields: list[list[Any]]) -> np.ndarray:
        """Per row, the id of the JSON array of its raw values in ``fields`` (one list of
        ``msgspec.Raw`` per element, a row's values at its index), compacted as
        :meth:`raw` does, an absent value written ``null``; NO_ID for a row whose values
        are all absent.

        A row is looked up by the tuple of its texts (at C speed; the tuple of a row is
        dropped before the next is made, so one is reused), and only a combination not
        seen before is composed: composing a kernel's ``[grid, block]`` text per kernel
        cost 1.2 µs."""
        texts = [raw_texts(values) for values in fields]
        n = len(texts[0])
        known = self._composed
        known.setdefault((b"",) * len(texts), NO_ID)  # a row without any value
        out = packed(map(known.get, zip(*texts, strict=True), repeat(_UNKNOWN, n)), "i", n)
        new = np.flatnonzero(out == _UNKNOWN)
        for i in new.tolist():  # in order: new texts are numbered as they first appear
            row = tuple(t[i] for t in texts)
            sid = known.get(row)
            if sid is None:
                text = b"[" + b",".join(v or b"null" for v in row) + b"]"
                sid = known[row] = int(self.raw([text], compact=True)[0])
            out[i] = sid
        return out


#: Not an id of the table: a text :meth:`Interner.raw` has not seen yet.
_UNKNOWN = -2

#: Joins a batch's raw values for one split: a byte no JSON text holds outside a string,
#: nor inside one (control characters there are escaped).
_SEPARATOR = b"\x00"


def raw_texts(values: list[Any]) -> list[bytes]:
    """Each raw JSON value (``msgspec.Raw`` or bytes) as bytes: one join and one split at
    C speed, a third of ``bytes()`` per value (133 ns a value, a Raw being read through
    the buffer protocol); per value where one holds the separator (a hostile file)."""
    keys = _SEPARATOR.join(values).split(_SEPARATOR)
    if len(keys) != len(values):
        return list(map(bytes, values))
    return keys
