"""A function written for a list of step dicts, run on a :class:`~.lazy_rows.LazyRows`:
:class:`Recorder` hands it rows whose ``s[key] = value`` goes to a column of the layer it
records (packed when the function returns), so that no dict is made per step."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tb_diagnostics.lazy_rows import ABSENT, CHUNK, LazyRows


class _Row:
    """One row as a recorded function sees it: sets go to the recorder's columns, reads
    see the row as it stands (a list or dict read is recorded too: a mutation sticks)."""

    __slots__ = ("_k", "_rec")

    def __init__(self, rec: Recorder, k: int) -> None:
        self._rec, self._k = rec, k

    def __setitem__(self, key: str, value: Any) -> None:
        self._rec.set(self._k, key, value)

    def __getitem__(self, key: str) -> Any:
        return self._rec.get(self._k, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self._rec.get(self._k, key)
        except KeyError:
            return default

    def __contains__(self, key: str) -> bool:
        return self.get(key, ABSENT) is not ABSENT

    def update(self, other: dict[str, Any]) -> None:
        for key, value in other.items():
            self._rec.set(self._k, key, value)


class Recorder(Sequence[_Row]):
    """The rows of ``base`` for a function that sets keys on step dicts; :meth:`result`
    is ``base`` with what it set as one more layer."""

    def __init__(self, base: LazyRows) -> None:
        self._base = base
        self._cols: dict[str, list[Any]] = {}
        self._chunk_at = -1
        self._chunk: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self._base)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [_Row(self, k) for k in range(*index.indices(len(self)))]
        k = index.__index__()
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError("step index out of range")
        return _Row(self, k)

    def __iter__(self) -> Iterator[_Row]:
        return (_Row(self, k) for k in range(len(self)))

    def set(self, k: int, key: str, value: Any) -> None:
        col = self._cols.get(key)
        if col is None:
            col = self._cols[key] = [ABSENT] * len(self)
        col[k] = value

    def get(self, k: int, key: str) -> Any:
        col = self._cols.get(key)
        if col is not None and col[k] is not ABSENT:
            return col[k]
        lo = k - k % CHUNK
        if lo != self._chunk_at:
            self._chunk_at, self._chunk = lo, self._base.rows(lo, lo + CHUNK)
        value = self._chunk[k - lo][key]
        if isinstance(value, (list, dict)):
            self.set(k, key, value)  # the caller may change it in place
        return value

    def result(self) -> LazyRows:
        if not self._cols:
            return self._base
        if self._base.materialised:  # its dicts are the rows: set on them
            for key, col in self._cols.items():
                for d, v in zip(self._base.as_list(), col, strict=True):
                    if v is not ABSENT:
                        d[key] = v
            return self._base
        return self._base.with_layer(list(self._cols), list(self._cols.values()))
