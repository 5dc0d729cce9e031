"""``TraceModel.name_index``: a string's id, found one name at a time.

A dict of every string (a repeated one keeps its last id) was 0.4 s and ~70 MB on a span of
10⁶ steps (10⁶ distinct ``ProfilerStep#k`` names) for the few names its readers look up
(the profiler's flush syncs, a rule's copy ops). :class:`NameIndex` answers a lookup
with a search of the model's strings joined by newlines (``name_match``, made once per
model and shared with the pattern searches), from the end, so the last id wins as in the
dict; each answer is kept. Iterating it, or asking its length, makes the whole dict.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

_NOT_FOUND = -1


class NameIndex(Mapping[str, int]):
    """``dict(zip(strings, range(len(strings))))`` of a model's strings, looked up lazily."""

    def __init__(self, model: Any) -> None:
        # A weak reference: the model keeps this in its cache, and a cycle would keep a
        # model (its columns) alive until a collection finds it.
        self._model = weakref.ref(model)
        self._strings: Sequence[str] = model.strings
        self._found: dict[str, int] = {}
        self._all: dict[str, int] | None = None

    def _whole(self) -> dict[str, int]:
        if self._all is None:
            strings = self._strings
            self._all = dict(zip(strings, range(len(strings)), strict=True))
        return self._all

    def _lookup(self, name: str) -> int:
        if self._all is not None:
            return self._all.get(name, _NOT_FOUND)
        hit = self._found.get(name)
        if hit is None:
            hit = self._found[name] = self._search(name)
        return hit

    def _search(self, name: str) -> int:
        """The last id of ``name`` in the strings, or -1."""
        strings = self._strings
        model = self._model()
        if model is None or not name or "\n" in name:
            # No joined text to search, or a name the newline-joined text cannot find
            # (empty, or holding the separator): one pass over the strings.
            return max((i for i, s in enumerate(strings) if s == name), default=_NOT_FOUND)
        from tb_diagnostics.trace.name_match import joined_strings

        text, starts = joined_strings(model)
        size, end = len(name), len(text)
        at = text.rfind(name)
        while at >= 0:
            # A whole string: a separator (or an end of the text) on both sides, at a
            # string's start (a string may itself hold a newline), and equal to it.
            if (at == 0 or text[at - 1] == "\n") and (at + size == end
                                                      or text[at + size] == "\n"):
                i = int(np.searchsorted(starts, at, side="right")) - 1
                if int(starts[i]) == at and strings[i] == name:
                    return i
            at = text.rfind(name, 0, at + size - 1)
        return _NOT_FOUND

    def __getitem__(self, name: str) -> int:
        i = self._lookup(name) if isinstance(name, str) else _NOT_FOUND
        if i < 0:
            raise KeyError(name)
        return i

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())
