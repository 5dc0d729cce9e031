"""The model's string table: every name, stack and raw JSON value of a trace interned once,
the columns holding indices into it."""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_diagnostics.trace.model import NO_ID


class Interner:
    """One table of the strings of a trace: each distinct string (name, call stack, raw JSON
    text of shapes) is stored once and referred to by its index."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []
        # Raw JSON text → string id, per compaction mode; empty and null are absent.
        self.raw_ids: dict[bool, dict[bytes, int]] = {
            mode: {b"": NO_ID, b"null": NO_ID} for mode in (False, True)}

    def many(self, values: list[str]) -> np.ndarray:
        ids = self.ids
        out = list(map(ids.get, values))  # C-speed lookups; new strings added below
        if None in out:
            # The new strings in order of first appearance (dict.fromkeys keeps it), each
            # given the next id, then every value looked up again: no Python line per value
            # (a span of 10⁶ steps has 10⁶ distinct step names).
            new = [v for v, j in zip(values, out, strict=True) if j is None]
            fresh = list(dict.fromkeys(new))
            base = len(self.strings)
            ids.update(zip(fresh, range(base, base + len(fresh)), strict=True))
            self.strings.extend(fresh)
            out = list(map(ids.__getitem__, values))
        return np.asarray(out, dtype=np.int32)

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
        out = list(map(known.get, keys))
        if None in out:
            for i, k in enumerate(keys):
                if out[i] is None:
                    j = known.get(k)
                    if j is None:
                        text = (k.translate(None, b" \t\r\n") if compact else k).decode(
                            "utf-8", "replace")
                        j = known[k] = int(self.many([text])[0])
                    out[i] = j
        return np.asarray(out, dtype=np.int32)


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
