"""Per-step lists of the report document as columns, their dicts made on demand
(issue 28 item 3: a span of a million steps held ~4 KB of dicts per step).

:class:`LazyRows` is a read-only sequence of dicts: ``len``, indexing, slicing and
iteration give the same dicts the list form held. The JSON writer
(``output.json_chunks``) reads it a chunk at a time from the packed columns, as msgspec
Structs that encode as the dicts would (``lazy_json``: no dict per row), none kept; a
reader that indexes or iterates it gets the dicts made once and then kept (so changes
and identities hold, as in a list).

Values are packed exactly: a column of Python floats as float64 (``tolist`` gives back
the same floats, the same repr), ints as int64 where they fit, bools, a column whose
every value has the same bits as that value and a count, strings as codes
into a table, dicts of one key set as a dict of columns, lists as offsets into one
flattened column; anything else stays the Python objects it was.

:class:`~tb_diagnostics.lazy_record.Recorder` lets a function written for a list of step
dicts (``s[key] = value`` per step) add its keys to a LazyRows as one more layer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tb_diagnostics.trace.columns import same_bits

#: The rows built at once while iterating (their dicts live only while the chunk does).
CHUNK = 4096


class _Absent:
    """A layer's "this row has no value for the key" (distinct from None)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "ABSENT"  # one object across pickling (spawned workers send documents back)


ABSENT = _Absent()

_INT64 = 2 ** 63


class _Packed:
    """One column: ``take(lo, hi)`` gives its Python values for rows lo..hi-1."""

    n: int

    def take(self, lo: int, hi: int) -> list[Any]:
        raise NotImplementedError


class _Array(_Packed):
    def __init__(self, values: np.ndarray) -> None:
        self.values, self.n = values, values.size

    def take(self, lo: int, hi: int) -> list[Any]:
        return self.values[lo:hi].tolist()


class _Const(_Packed):
    def __init__(self, value: Any, n: int) -> None:
        self.value, self.n = value, n

    def take(self, lo: int, hi: int) -> list[Any]:
        return [self.value] * (min(hi, self.n) - min(lo, self.n))


class _Codes(_Packed):
    """Hashable values (strings) as codes into the table of the distinct ones."""

    def __init__(self, values: list[Any]) -> None:
        # The distinct values in order of first appearance, then each value's code, both
        # by C loops (a setdefault per value was 1 s on a span of 10⁶ steps).
        self.table = list(dict.fromkeys(values))
        index = dict(zip(self.table, range(len(self.table)), strict=True))
        self.codes = np.fromiter(map(index.__getitem__, values), count=len(values),
                                 dtype=np.int32 if len(index) < 2 ** 31 else np.int64)
        self.n = len(values)

    def take(self, lo: int, hi: int) -> list[Any]:
        t = self.table
        return [t[c] for c in self.codes[lo:hi].tolist()]


class _Derived(_Packed):
    """Values computed a chunk at a time from arrays held elsewhere (the window columns
    the analysis keeps): ``fn(*(a[lo:hi] for a in arrays), *args)``, an array whose
    ``tolist`` gives the values. Not a copy of what is computed: a span of 10⁶ steps held
    each rounded figure of its step documents as 8 MB more."""

    def __init__(self, fn: Any, arrays: tuple[np.ndarray, ...], args: tuple[Any, ...]) -> None:
        self.fn, self.arrays, self.args = fn, arrays, args
        self.n = int(arrays[0].shape[0])

    def take(self, lo: int, hi: int) -> list[Any]:
        return self.fn(*(a[lo:hi] for a in self.arrays), *self.args).tolist()


class _Objects(_Packed):
    def __init__(self, values: list[Any]) -> None:
        self.values, self.n = values, len(values)

    def take(self, lo: int, hi: int) -> list[Any]:
        return self.values[lo:hi]


#: A masked column counts its set rows once per this many rows: where row k's value is in
#: the inner column is that count plus a count within one block (a count per row was an
#: int64 per row, 8 MB a column at 10⁶ steps, for a mask of 1 MB).
COUNT_EVERY = 4096


class _Masked(_Packed):
    """Rows where ``mask`` holds take from ``inner`` (packed without the rest), the
    others are ``fill`` (None, or ABSENT)."""

    def __init__(self, mask: np.ndarray, inner: _Packed, fill: Any) -> None:
        self.mask, self.inner, self.fill, self.n = mask, inner, fill, mask.size
        counts = (np.add.reduceat(mask, np.arange(0, mask.size, COUNT_EVERY), dtype=np.int64)
                  if mask.size else np.zeros(0, dtype=np.int64))
        self._blocks = np.concatenate([[0], np.cumsum(counts)])

    def before(self, k: int) -> int:
        """How many rows before row ``k`` hold a value (``k`` past the end: all)."""
        k = min(max(k, 0), self.n)
        b = k // COUNT_EVERY
        return int(self._blocks[b]) + int(np.count_nonzero(self.mask[b * COUNT_EVERY:k]))

    def take(self, lo: int, hi: int) -> list[Any]:
        a, b = self.before(lo), self.before(hi)
        it = iter(self.inner.take(a, b))
        fill = self.fill
        return [next(it) if m else fill for m in self.mask[lo:hi].tolist()]


class _Dicts(_Packed):
    def __init__(self, keys: tuple[Any, ...], cols: list[_Packed], n: int) -> None:
        self.keys, self.cols, self.n = keys, cols, n

    def take(self, lo: int, hi: int) -> list[Any]:
        keys = self.keys
        parts = [c.take(lo, hi) for c in self.cols]
        if not parts:
            return [{} for _ in range(min(hi, self.n) - min(lo, self.n))]
        return [dict(zip(keys, row, strict=True)) for row in zip(*parts, strict=True)]


class _Lists(_Packed):
    def __init__(self, offsets: np.ndarray, flat: _Packed) -> None:
        # int32 where the flat column is shorter than 2^31 (every report): half the memory.
        if offsets.size and offsets[-1] < np.iinfo(np.int32).max:
            offsets = offsets.astype(np.int32)
        self.offsets, self.flat, self.n = offsets, flat, offsets.size - 1

    def take(self, lo: int, hi: int) -> list[Any]:
        hi = min(hi, self.n)
        if lo >= hi:
            return []
        off = self.offsets[lo:hi + 1].tolist()
        flat = self.flat.take(off[0], off[-1])
        base = off[0]
        return [flat[a - base:b - base] for a, b in itertools.pairwise(off)]


def _array(values: np.ndarray, owned: bool) -> _Packed:
    """A 1-d array of numbers or bools as a column: one value and a count where every
    element has the same bits (a zero, a count or a flag the same in every step: a span's
    comm or input idle where there is none), else the array (copied unless ``owned``).

    Bits, not ``==`` (:func:`~tb_diagnostics.trace.columns.same_bits`)."""
    if same_bits(values):
        return _Const(values[:1].tolist()[0], values.size)
    return _Array(values if owned else values.copy())


def pack(values: Sequence[Any]) -> _Packed:
    """``values`` (a list, or a numpy array taken as its ``tolist``) as a packed column."""
    if isinstance(values, _Packed):
        return values
    if isinstance(values, np.ndarray):
        return _array(values, owned=False)
    values = list(values)
    n = len(values)
    types = set(map(type, values))  # C loop: 10⁶ values at a time
    if not types:
        return _Objects([])
    if len(types) == 1:
        t = next(iter(types))
        if t is float:
            return _array(np.asarray(values, dtype=np.float64), owned=True)
        if t is bool:
            return _array(np.asarray(values, dtype=bool), owned=True)
        if t is int:
            if min(values) >= -_INT64 and max(values) < _INT64:
                return _array(np.asarray(values, dtype=np.int64), owned=True)
            return _Objects(values)
        if t is str:
            return _Codes(values)
        if t is dict:
            return _pack_dicts(values)
        if t is list:
            counts = np.fromiter((len(v) for v in values), dtype=np.int64, count=n)
            offsets = np.concatenate([[0], np.cumsum(counts)])
            return _Lists(offsets, pack([x for v in values for x in v]))
        if t is type(None) or t is _Absent:
            return _Const(values[0], n)
        return _Objects(values)
    for fill in (ABSENT, None):
        if type(fill) in types:
            mask = np.fromiter((v is not fill for v in values), dtype=bool, count=n)
            return _Masked(mask, pack([v for v in values if v is not fill]), fill)
    return _Objects(values)


def dict_column(keys: Sequence[str], columns: Sequence[Sequence[Any]], n: int) -> _Packed:
    """A column of dicts ``{keys[j]: columns[j][i]}``, packed with no dict per row."""
    return _Dicts(tuple(keys), [pack(c) for c in columns], n)


def _pack_dicts(values: list[dict[Any, Any]]) -> _Packed:
    keys = tuple(values[0])
    # One key set, in one order: a dict of columns (the order is the JSON's too).
    if all(len(v) == len(keys) and tuple(v) == keys for v in values):
        return _Dicts(keys, [pack([v[k] for v in values]) for k in keys], len(values))
    return _Objects(values)


class LazyRows(Sequence[dict[str, Any]]):
    """A sequence of dicts from layers of packed columns: the first layer's keys in its
    order, each later layer's value set on a row (existing key in place, a new key after
    the rest), as the functions that once mutated the dicts in that order left them."""

    def __init__(self, n: int, layers: list[tuple[tuple[str, ...], list[_Packed]]]) -> None:
        self._n = n
        self._layers = layers
        # The dicts, once a reader indexes or iterates: from then on the rows are those
        # dicts (a reader may change one, or tell them apart by identity, as in a list).
        # The JSON writer reads rows() and chunks(), which make them a chunk at a time.
        self._list: list[dict[str, Any]] | None = None

    @property
    def materialised(self) -> bool:
        """Whether the rows are held as dicts (a reader indexed or iterated them)."""
        return self._list is not None

    def as_list(self) -> list[dict[str, Any]]:
        """The rows as a list of dicts, made once and kept."""
        if self._list is None:
            self._list = [d for chunk in self.chunks() for d in chunk]
        return self._list

    @classmethod
    def from_columns(cls, keys: Sequence[str], columns: Sequence[Sequence[Any]],
                     n: int | None = None) -> LazyRows:
        """Rows ``{keys[j]: columns[j][i]}``: each column packed (never a dict per row)."""
        cols = [pack(c) for c in columns]
        size = n if n is not None else (cols[0].n if cols else 0)
        return cls(size, [(tuple(keys), cols)])

    def with_layer(self, keys: Sequence[str], columns: Sequence[Sequence[Any]]) -> LazyRows:
        """These rows with ``keys`` set from ``columns`` (ABSENT: left as it is)."""
        return LazyRows(self._n, [*self._layers, (tuple(keys), [pack(c) for c in columns])])

    def __len__(self) -> int:
        return self._n

    def rows(self, lo: int, hi: int) -> list[dict[str, Any]]:
        """Rows lo..hi-1 as fresh dicts."""
        lo, hi = max(lo, 0), min(hi, self._n)
        if lo >= hi:
            return []
        if self._list is not None:
            return self._list[lo:hi]
        (keys, cols), *rest = self._layers
        out = [dict(zip(keys, row, strict=True))
               for row in zip(*(c.take(lo, hi) for c in cols), strict=True)] \
            if cols else [{} for _ in range(hi - lo)]
        for keys, cols in rest:
            for key, col in zip(keys, cols, strict=True):
                for d, v in zip(out, col.take(lo, hi), strict=True):
                    if v is not ABSENT:
                        d[key] = v
        return out

    def chunks(self, size: int = CHUNK) -> Iterator[list[dict[str, Any]]]:
        """The rows as lists of at most ``size``, in order (made anew unless held)."""
        for lo in range(0, self._n, size):
            yield self.rows(lo, lo + size)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.as_list())

    def __getitem__(self, index: Any) -> Any:
        return self.as_list()[index]

    def __reduce__(self) -> tuple[Any, ...]:
        # Across processes as the columns and, if a reader made them, the dicts.
        return (_restored, (self._n, self._layers, self._list))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (LazyRows, list)):
            return len(self) == len(other) and all(
                a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list: unhashable as one

    def __repr__(self) -> str:
        return f"LazyRows({self._n} rows)"


def _restored(n: int, layers: list[tuple[tuple[str, ...], list[_Packed]]],
              held: list[dict[str, Any]] | None) -> LazyRows:
    rows = LazyRows(n, layers)
    rows._list = held
    return rows


def plain(obj: Any) -> Any:
    """``obj`` (a document) with each LazyRows in its dicts and lists replaced by its
    list, in place: for readers that take only builtins (``json.dumps``, pandas)."""
    items = obj.items() if type(obj) is dict else enumerate(obj) if type(obj) is list else ()
    for k, v in list(items):
        if isinstance(v, LazyRows):
            obj[k] = v.as_list()
        elif type(v) in (dict, list):
            plain(v)
    return obj


def with_values(rows: Sequence[dict[str, Any]], key: str,
                values: dict[int, Any]) -> Sequence[dict[str, Any]]:
    """``rows`` with ``key`` set to ``values[k]`` on row k: a LazyRows gains a layer (its
    dicts are made anew on each read: setting one would be lost), a list is set in place."""
    if isinstance(rows, LazyRows) and not rows.materialised:
        col: list[Any] = [ABSENT] * len(rows)
        for k, v in values.items():
            col[k] = v
        return rows.with_layer((key,), (col,))
    for k, v in values.items():
        rows[k][key] = v
    return rows


def list_column(offsets: np.ndarray, flat: Sequence[Any]) -> _Packed:
    """A column of lists: row i is ``flat[offsets[i]:offsets[i + 1]]`` (``offsets``: one
    more than the rows, ascending from 0), packed with no list per row."""
    return _Lists(np.asarray(offsets, dtype=np.int64), pack(flat))


def derived_column(fn: Any, arrays: Sequence[np.ndarray], *args: Any) -> _Packed:
    """A column of ``fn(*arrays, *args)`` (a numpy array, one value per row), computed a
    chunk of rows at a time as it is read, from ``arrays`` (1-d, one length, never changed
    after: they are held, not copied). ``fn`` must be elementwise: row k's value depends
    on row k of each array alone, so a chunk's values are those of the whole. Arrays that
    are each one value (constant views) give that one value and a count. ``fn`` is a
    module-level function where the rows may be pickled (a spawned worker's document)."""
    arrays = tuple(arrays)
    if not arrays or any(a.ndim != 1 or a.shape[0] != arrays[0].shape[0] for a in arrays):
        raise ValueError("derived_column: 1-d arrays of one length")
    n = int(arrays[0].shape[0])
    if n and all(a.strides == (0,) for a in arrays):
        return _Const(fn(*(a[:1] for a in arrays), *args).tolist()[0], n)
    return _Derived(fn, arrays, args)


def masked_column(mask: np.ndarray, inner: Sequence[Any], fill: Any = None) -> _Packed:
    """A column that is ``fill`` (None, or ABSENT: the row keeps its key as it is) where
    ``mask`` is False and, in order, ``inner``'s values (one per True) elsewhere."""
    mask = np.asarray(mask, dtype=bool)
    return _Masked(mask, pack(inner), fill)


def codes_column(codes: np.ndarray, table: Sequence[Any]) -> _Packed:
    """A column of ``table[codes[i]]`` (``table``: distinct hashable values, strings),
    packed from the codes with no value per row: integer codes as narrow as they come
    (a window's verdict code is a byte), and one code in every row as that value and a
    count."""
    col = _Codes(list(table))
    if len(col.table) != len(table):
        raise ValueError("codes_column: the table's values must be distinct")
    codes = np.asarray(codes)
    if same_bits(codes) and codes.dtype.kind in "iu":
        return _Const(col.table[int(codes[0])], int(codes.size))
    narrow = codes.dtype.kind in "iu" and codes.dtype.itemsize <= col.codes.dtype.itemsize
    col.codes = codes if narrow else codes.astype(col.codes.dtype)
    col.n = int(col.codes.size)
    return col
