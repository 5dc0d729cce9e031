"""A model's string table held as one text: the strings joined by newlines and where each
one starts.

A trace of 10⁶ steps has 10⁶ distinct ``ProfilerStep#k`` names; as a list of Python
strings they were 72 MB held through the whole analysis (an object of ~50 bytes each and
a pointer), and the name searches (:mod:`.name_match`) joined them once more. Held as one
text (a byte a character for ASCII names) and an offset per string, they are ~28 MB,
and that text is the one the searches read.

:class:`StringTable` is a read-only ``Sequence[str]``: indexing makes the string
(equal to the one the list held, not the same object), iteration goes a block of strings
at a time, and :meth:`StringTable.take` makes many at once.
"""

from __future__ import annotations

import operator
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, overload

import numpy as np

#: Strings made at a time while iterating (one split of the text per block).
_BLOCK = 4096


class StringTable(Sequence[str]):
    """``strings`` as one text: ``self[i] == strings[i]`` for every i."""

    __slots__ = ("_n", "_plain", "_starts", "_text")

    def __init__(self, strings: Iterable[str]) -> None:
        strings = strings if isinstance(strings, list) else list(strings)
        n = len(strings)
        text = "\n".join(strings)
        sizes = np.fromiter(map(len, strings), dtype=np.int64, count=n)
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes + 1, out=starts[1:])  # string i is text[starts[i]:starts[i+1]-1]
        self._set(text, starts)

    def _set(self, text: str, starts: np.ndarray) -> None:
        self._text = text
        self._n = int(starts.shape[0]) - 1
        # An array.array: indexing it gives Python ints (fast per string); numpy reads it
        # without a copy (:attr:`starts`).
        self._starts = array("q", starts.astype(np.int64).tobytes())
        # No string holds the separator: a block of strings is one split of the text.
        self._plain = self._n == 0 or text.count("\n") == self._n - 1

    @classmethod
    def from_text(cls, text: str, starts: np.ndarray) -> StringTable:
        """The table of a text and its ``n + 1`` offsets (as :attr:`starts` gives them)."""
        table = cls.__new__(cls)
        table._set(text, np.asarray(starts, dtype=np.int64))
        return table

    @property
    def text(self) -> str:
        """The strings joined by ``"\\n"``."""
        return self._text

    @property
    def starts(self) -> np.ndarray:
        """Each string's offset in :attr:`text`, and one more (the text's length + 1):
        string i is ``text[starts[i]:starts[i + 1] - 1]`` (read-only, no copy)."""
        out = np.frombuffer(self._starts, dtype=np.int64)
        out.flags.writeable = False
        return out

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.take(range(*index.indices(self._n)))
        i = operator.index(index)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("string table index out of range")
        s = self._starts
        return self._text[s[i]:s[i + 1] - 1]

    def take(self, ids: Iterable[int] | np.ndarray) -> list[str]:
        """``[self[i] for i in ids]`` (ids valid and non-negative), in one pass."""
        ids = np.asarray(ids if not isinstance(ids, range) else np.arange(
            ids.start, ids.stop, ids.step), dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self._n):
            raise IndexError("string table index out of range")
        starts = self.starts
        text = self._text
        return [text[a:b] for a, b in zip(starts[ids].tolist(), (starts[ids + 1] - 1).tolist(),
                                          strict=True)]

    def __iter__(self) -> Iterator[str]:
        # A block of strings made at a time, chained in C: a full pass (a name search
        # per string) costs about what the list's did, with a block held, not a list.
        return chain.from_iterable(map(self._block, range(0, self._n, _BLOCK)))

    def _block(self, lo: int) -> list[str]:
        hi = min(lo + _BLOCK, self._n)
        if not self._plain:
            return self.take(range(lo, hi))
        s = self._starts
        return self._text[s[lo]:s[hi] - 1].split("\n")

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and any(s == value for s in self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringTable):
            return self._text == other._text and self._starts == other._starts
        if isinstance(other, list | tuple):
            return len(other) == self._n and all(a == b for a, b in zip(self, other,
                                                                        strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list: unhashable as one

    def __reduce__(self) -> tuple[Any, ...]:
        return (StringTable.from_text, (self._text, self.starts.copy()))

    def __repr__(self) -> str:
        return f"StringTable({self._n} strings)"


def strings_nbytes(strings: Sequence[str]) -> int:
    """About the memory ``strings`` hold: a table's text and offsets, or a list's strings
    (an object of ~56 bytes each, its characters and the list's pointer)."""
    if isinstance(strings, StringTable):
        return sys.getsizeof(strings.text) + 8 * (len(strings) + 1)
    return sum(len(s) + 56 for s in strings)


def string_list(strings: Sequence[str]) -> list[str]:
    """``strings`` as a list (for a writer that takes only builtins, the cache's JSON)."""
    return strings if isinstance(strings, list) else list(strings)
