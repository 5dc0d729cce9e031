"""The JSON writer's view of :class:`~tb_diagnostics.lazy_rows.LazyRows`: a chunk of rows
as objects msgspec encodes to exactly the bytes of their dicts, made from the packed
columns with no Python code per row (issue 28: a span of a million steps).

A row is a msgspec Struct (one class per key order, its fields renamed to the keys), not
a dict: Structs are made by ``map(Struct, *columns)`` in C, about 7x faster than the
dicts, and msgspec writes a Struct's fields as a dict's items, in order. A key a row
lacks (a later layer's ABSENT) is ``msgspec.UNSET``, a field msgspec leaves out. The
values are the very objects the dicts would hold, so numbers, strings and the rest are
written by msgspec as they were. Where this cannot be exact (a key msgspec cannot rename
to, a row whose keys would come in another order) :func:`encodable` says None and the
writer encodes the dicts.

This module reads the packed columns of :mod:`tb_diagnostics.lazy_rows` (its friend).
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any

import msgspec
import numpy as np

from tb_diagnostics.lazy_rows import (
    ABSENT,
    LazyRows,
    _Array,
    _Codes,
    _Const,
    _Dicts,
    _Lists,
    _Masked,
    _Objects,
    _Packed,
)
from tb_diagnostics.trace.columns import same_bits

UNSET = msgspec.UNSET

#: Keys msgspec refuses as a renamed field (it would have to escape them).
_UNRENAMABLE = re.compile("[\"\\\\\x00-\x1f]")


@functools.lru_cache(maxsize=512)
def _struct_for(keys: tuple[Any, ...]) -> type[msgspec.Struct] | None:
    """The Struct class whose instances encode as dicts with ``keys`` in this order, or
    None where a key is not a str msgspec writes as it writes a dict key."""
    if len(set(keys)) != len(keys) or not all(
            type(k) is str and not _UNRENAMABLE.search(k) for k in keys):
        return None
    fields = [(f"f{j}", object) for j in range(len(keys))]
    # gc=False: these rows live for one chunk and refer to nothing that refers back.
    return msgspec.defstruct("Row", fields, rename=dict(zip([f for f, _ in fields], keys,
                                                            strict=True)), gc=False)


def _scatter(out: list[Any], at: list[int], values: list[Any]) -> None:
    """``out[at[j]] = values[j]`` for every j (a loop: faster than map of setitem)."""
    for k, v in zip(at, values, strict=True):
        out[k] = v


#: :func:`_same`'s "the rows' values differ (or may)".
_VARIES = object()


def _same(col: _Packed, lo: int, hi: int) -> Any:
    """The one value rows lo..hi-1 of ``col`` all have, as :func:`_column` would give it,
    where the column's make-up says so (a constant; dicts, lists of one length, set rows
    of such; no values read), else :data:`_VARIES`."""
    t = type(col)
    if t is _Const:
        return col.value  # type: ignore[attr-defined]
    if t is _Array:  # one value bit for bit (an idle figure steady over the chunk)
        assert isinstance(col, _Array)
        part = col.values[lo:hi]
        return part[:1].tolist()[0] if same_bits(part) else _VARIES
    if t is _Codes:
        assert isinstance(col, _Codes)
        codes = col.codes[lo:hi]
        return col.table[int(codes[0])] if same_bits(codes) else _VARIES
    if t is _Masked:
        assert isinstance(col, _Masked)
        top = min(hi, col.n)
        a, b = col.before(lo), col.before(top)
        if a == b:
            return col.fill
        return _same(col.inner, a, b) if b - a == top - lo else _VARIES
    if t is _Dicts:
        assert isinstance(col, _Dicts)
        struct = _struct_for(col.keys)
        if struct is None or not col.cols:
            return _VARIES
        values = [_same(c, lo, hi) for c in col.cols]
        return _VARIES if any(v is _VARIES for v in values) else struct(*values)
    if t is _Lists:
        assert isinstance(col, _Lists)
        top = min(hi, col.n)
        if lo >= top:
            return _VARIES
        off = col.offsets[lo:top + 1]
        sizes = np.diff(off)
        if not (sizes == sizes[0]).all():
            return _VARIES
        if not sizes[0]:
            return ()
        v = _same(col.flat, int(off[0]), int(off[-1]))
        return _VARIES if v is _VARIES else (v,) * int(sizes[0])
    return _VARIES


def _encoded_once(value: Any) -> Any:
    """``value`` as msgspec.Raw of its JSON (a value every row of a chunk shares is encoded
    once, not once per row: floats formatted again and again were a third of the write of
    a span of 10⁶ steps), or the value itself where msgspec refuses it alone (a lone
    surrogate, ABSENT): the chunk's encoding then meets it as before."""
    try:
        return msgspec.Raw(msgspec.json.encode(value))
    except Exception:  # any refusal: encoded with the rows, as it was
        return value


def _column(col: _Packed, lo: int, hi: int) -> list[Any]:
    """``col.take(lo, hi)`` as msgspec writes it: each dict a Struct that encodes to its
    bytes, lists of one length tuples, a value every row shares encoded once (Raw)."""
    same = _same(col, lo, hi)
    if same is not _VARIES:
        return [_encoded_once(same)] * max(0, min(hi, col.n) - min(lo, col.n))
    t = type(col)
    if t is _Array or t is _Const or t is _Objects:
        return col.take(lo, hi)
    if t is _Codes:
        assert isinstance(col, _Codes)
        codes, table = col.codes[lo:hi], col.table
        if len(table) > codes.size:  # a table of mostly other rows' strings: index it
            return [table[c] for c in codes.tolist()]
        # An object array of the very strings, indexed by the codes at once.
        pick = np.empty(len(table), dtype=object)
        for k, v in enumerate(table):
            pick[k] = v
        return pick[codes].tolist()
    if t is _Masked:
        assert isinstance(col, _Masked)
        hi = min(hi, col.n)
        a, b = col.before(lo), col.before(hi)
        if b - a == hi - lo:  # every row has a value
            return _column(col.inner, a, b)
        out = [col.fill] * (hi - lo)
        if b > a:
            _scatter(out, np.flatnonzero(col.mask[lo:hi]).tolist(), _column(col.inner, a, b))
        return out
    if t is _Lists:
        assert isinstance(col, _Lists)
        hi = min(hi, col.n)
        if lo >= hi:
            return []
        off = col.offsets[lo:hi + 1]
        flat = _column(col.flat, int(off[0]), int(off[-1]))
        sizes = np.diff(off)
        if (sizes == sizes[0]).all():
            # Lists of one length (none, one segment) as tuples, which msgspec writes as
            # lists: zip makes them in C, 15x faster than slicing a list per row.
            if not sizes[0]:
                return [()] * (hi - lo)
            return list(zip(*[iter(flat)] * int(sizes[0]), strict=True))
        return [flat[a:b] for a, b in itertools.pairwise((off - off[0]).tolist())]
    if t is _Dicts:
        assert isinstance(col, _Dicts)
        struct = _struct_for(col.keys)
        if struct is None or not col.cols:
            return col.take(lo, hi)
        return list(map(struct, *(_column(c, lo, hi) for c in col.cols)))
    return col.take(lo, hi)  # a kind of column this module does not know: its dicts


#: Column kinds whose values are never ABSENT (a _Const of ABSENT is handled first).
_NO_ABSENT = (_Array, _Const)


def _set_rows(col: _Packed, lo: int, hi: int) -> tuple[list[int] | None, list[Any]]:
    """A later layer's column: the rows it sets (None: all) and their values, in order."""
    if type(col) is _Const and col.value is ABSENT:  # type: ignore[attr-defined]
        return [], []
    if type(col) is _Masked and col.fill is ABSENT:  # type: ignore[attr-defined]
        assert isinstance(col, _Masked)
        a, b = col.before(lo), col.before(hi)
        if b - a == hi - lo:
            return None, _column(col.inner, a, b)
        return np.flatnonzero(col.mask[lo:hi]).tolist(), _column(col.inner, a, b)
    values = _column(col, lo, hi)
    # Arrays (numbers) and a constant other than ABSENT hold no ABSENT: no scan of the
    # chunk (`in` compares every value: 0.8 s of a span of 10⁶ steps' write).
    if type(col) not in _NO_ABSENT and ABSENT in values:
        at = [k for k, v in enumerate(values) if v is not ABSENT]
        return at, [values[k] for k in at]
    return None, values


def encodable(rows: LazyRows, lo: int, hi: int) -> list[Any] | None:
    """Rows lo..hi-1 of ``rows`` (within its length) as objects whose msgspec encoding is
    that of ``rows.rows(lo, hi)``; None where the writer must encode those dicts."""
    if rows.materialised:
        return rows.rows(lo, hi)  # the dicts a reader holds are the rows
    n = hi - lo
    (keys, cols), *rest = rows._layers
    values: dict[Any, list[Any]] = {}
    for key, col in zip(keys, cols, strict=True):
        values[key] = _column(col, lo, hi)
    # Keys a later layer brings: the layer that placed each and its rows that have it.
    placed: dict[Any, int] = {}
    has: dict[Any, np.ndarray] = {}
    for layer, (keys, cols) in enumerate(rest):
        for key, col in zip(keys, cols, strict=True):
            at, new = _set_rows(col, lo, hi)
            if at is not None and not at:
                continue
            if key not in values:  # a new key: it goes after the keys the rows have
                placed[key] = layer
                values[key] = new if at is None else [UNSET] * n
                has[key] = np.zeros(n, dtype=bool)
            elif key in has and placed[key] != layer and not (
                    has[key].all() if at is None else has[key][at].all()):
                # A row gains this key after later keys were placed: its dict lists it
                # after them, a Struct in its first place.
                return None
            if at is None:
                values[key] = new
                if key in has:
                    has[key][:] = True
            else:
                _scatter(values[key], at, new)
                if key in has:
                    has[key][at] = True
    if _struct_for(tuple(values)) is None:
        return None
    if not values:
        return [{} for _ in range(n)]
    keys, columns = _joined_constants(values, n)
    struct = _struct_for(keys)
    assert struct is not None  # its keys are some of those above
    return list(map(struct, *columns))


def _joined_constants(values: dict[Any, list[Any]], n: int) -> tuple[tuple[Any, ...],
                                                                       list[list[Any]]]:
    """The keys and columns of the rows' Structs, each run of keys whose every row holds
    one Raw (a value the chunk shares, encoded once) joined into one field: the first
    key's, its Raw ``v1,"k2":v2,…`` (msgspec writes a Raw as it is, so the bytes are
    those of the fields one by one; a span of 10⁶ steps' rows have ~30 such fields of 47,
    each a field to fill and write per row)."""
    keys: list[Any] = []
    columns: list[list[Any]] = []
    run: list[bytes] = []  # the open run's bytes: its first value, then ,"key":value

    def close() -> None:
        if len(run) > 1:
            columns[-1] = [msgspec.Raw(b"".join(run))] * n
        run.clear()

    for key, col in values.items():
        first = col[0]
        if type(first) is msgspec.Raw and col.count(first) == n:
            if run:
                run.append(b"," + msgspec.json.encode(key) + b":" + bytes(first))
                continue
            run.append(bytes(first))
        else:
            close()
        keys.append(key)
        columns.append(col)
    close()
    return tuple(keys), columns
