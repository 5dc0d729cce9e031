"""Column storage for the model builder: columns filled batch by batch, and constants.

A trace is decoded in bounded pieces; each piece adds a slice to every column.
:class:`GrowingColumn` keeps the slices in one buffer that doubles when full, so
joining them costs nothing and no scattered small arrays are left behind; a
column that never gets a value is only a count, and comes out as a read-only view
of one value (:func:`constant`), which costs no memory per row.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any

import numpy as np

from tb_diagnostics.trace.model import NO_ID


class GrowingColumn:
    """One column filled batch by batch, in one buffer that doubles when full.

    One large buffer instead of a list of small per-batch arrays: joining those
    needs the parts and the whole at once, and the freed parts stay scattered
    through the heap. The doubled buffer's unused tail is never touched, so it
    costs address space, not memory. A column that has had no value yet is only
    a count (constant columns cost nothing).
    """

    __slots__ = ("absent", "capacity", "data", "dtype", "n")

    def __init__(self, dtype: Any, absent: Any, capacity: int = 0) -> None:
        self.dtype = dtype
        self.absent = absent
        self.data: np.ndarray | None = None
        self.n = 0
        # The rows expected in all (a merge knows them): the first buffer holds them, so
        # that no doubling copies the column while the parts it comes from are still held.
        self.capacity = capacity

    def extend(self, values: np.ndarray) -> None:
        m = values.shape[0]
        if self.data is None:
            if self.absent is not None and all_absent(values, self.absent):
                self.n += m
                return
            rows = self.n + m
            size = self.capacity if self.capacity >= rows else max(2 * rows, 1 << 14)
            self.data = np.empty(size, dtype=self.dtype)
            if self.n:
                self.data[: self.n] = self.absent
        elif self.n + m > self.data.shape[0]:
            grown = np.empty(2 * (self.n + m), dtype=self.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : self.n + m] = values
        self.n += m

    def extend_absent(self, m: int) -> None:
        """Append ``m`` rows of the absent value."""
        if self.data is None:
            self.n += m
            return
        if self.n + m > self.data.shape[0]:
            grown = np.empty(2 * (self.n + m), dtype=self.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : self.n + m] = self.absent
        self.n += m

    def take(self) -> np.ndarray:
        if self.data is None:
            if self.absent is None:
                return np.zeros(self.n, dtype=self.dtype)
            return constant(self.absent, self.n, self.dtype)
        out, self.data = self.data[: self.n], None
        return out


def all_absent(values: np.ndarray, absent: Any) -> bool:
    if type(absent) is float and math.isnan(absent):
        return bool(np.isnan(values).all())
    return bool((values == absent).all())


def constant(value: Any, n: int, dtype: Any) -> np.ndarray:
    """``n`` copies of ``value`` as a read-only view of one element."""
    return np.broadcast_to(np.asarray(value, dtype=dtype), (n,))


def same_bits(x: np.ndarray) -> bool:
    """Whether a non-empty 1-d array of numbers or bools holds one value, bit for bit.
    Bits, not ``==``: 0.0 and -0.0 differ where they are written, and a NaN equals no
    NaN."""
    if not (x.ndim == 1 and x.size and x.dtype.kind in "biuf"):
        return False
    bits = x.view(f"u{x.dtype.itemsize}")
    return bool((bits == bits[0]).all())


def bitwise_equal(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Both None, or arrays of one dtype and shape holding the same bits (not ``==``:
    0.0 and -0.0 differ where they are used, and a NaN equals no NaN)."""
    if a is None or b is None:
        return a is b
    if a is b:
        return True
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind not in "biuf":
        return bool(np.array_equal(a, b))
    width = f"u{a.dtype.itemsize}"
    return bool(np.array_equal(np.ascontiguousarray(a).view(width),
                               np.ascontiguousarray(b).view(width)))


def one_value(x: np.ndarray) -> np.ndarray:
    """``x``, or where every element has the same bits (:func:`same_bits`), that element
    as a :func:`constant` of its shape (read-only, one element in all): a figure no step
    has (the comm, input or compile idle of a single-GPU run without them) held an array
    per window, 8 MB each at 10⁶ steps."""
    return constant(x[0], x.size, x.dtype) if x.size > 1 and same_bits(x) else x


def gather(values: np.ndarray, idx: np.ndarray, fill: Any) -> np.ndarray:
    """``values[idx]`` where ``idx >= 0``, ``fill`` where it is negative (no match, no
    predecessor); safe when ``values`` is empty (a trace with no row of that kind), where
    ``values[np.maximum(idx, 0)]`` raises."""
    idx = np.asarray(idx)
    if values.shape[0] == 0:
        return np.full(idx.shape, fill, dtype=np.result_type(values.dtype, np.asarray(fill)))
    return np.where(idx >= 0, values[np.maximum(idx, 0)], fill)


def take(column: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """``column[order]`` (the column itself where ``order`` is None: the rows are in
    order); a constant column stays a constant view."""
    if order is None:
        return column
    if column.ndim == 1 and column.strides == (0,):
        return column[: order.shape[0]]
    return column[order]


def time_order(ts: np.ndarray, dur: np.ndarray) -> np.ndarray | None:
    """The rows by start, longer first among equal starts, else in row order: what
    ``np.lexsort((-dur, ts))`` gives, without its two full sorts; None when that is the
    rows' own order (no row to move: the caller copies no column). A trace's starts are
    nearly in order already (each thread's events are written in time order), which the
    stable sort (timsort) of ``ts`` alone takes in one pass; only the rows that share a
    start are sorted again, by duration (0.4 s for lexsort on 1.5 M rows, 0.02 s here)."""
    if ts.shape[0] < 2 or bool((ts[1:] > ts[:-1]).all()):
        return None
    order = np.argsort(ts, kind="stable")
    start = ts[order]
    tie = start[1:] == start[:-1]
    if not tie.any():
        return order
    shared = np.zeros(order.shape[0], dtype=bool)  # rows whose start another row shares
    shared[1:] = tie
    shared[:-1] |= tie
    pos = np.flatnonzero(shared)
    group = np.cumsum(np.concatenate(([True], ~tie)))[pos]  # one number per start
    rows = order[pos]
    order[pos] = rows[np.lexsort((-dur[rows], group))]
    return order


def narrow_ids(column: np.ndarray) -> np.ndarray:
    """int32 when every value fits, else as it is (a constant stays a constant)."""
    if column.strides == (0,):
        return column
    return narrowest_ints(column, (np.int32,))


#: The signed integer dtypes :func:`narrowest_ints` picks from, narrowest first.
_SIGNED = (np.int8, np.int16, np.int32)


def narrowest_ints(column: np.ndarray, dtypes: tuple[type, ...] = _SIGNED) -> np.ndarray:
    """An int64 column as the narrowest of ``dtypes`` (signed, narrowest first) that holds
    every value (else as it is; a constant stays a constant view): a device index or a stream
    needs a byte where int64 spent eight, 4 M rows of each on a span of 10⁶ steps.
    Readers that do arithmetic on such a column cast it first (``device * 2**32``)."""
    if column.dtype != np.int64 or not column.size:
        return column
    if column.strides == (0,):
        lo = hi = int(column[0])
    else:
        lo, hi = int(column.min()), int(column.max())
    for dtype in dtypes:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            if column.strides == (0,):
                return constant(column[0], column.shape[0], dtype)
            return column.astype(dtype)
    return column


def as_int16(column: np.ndarray) -> np.ndarray:
    """The column as int16 (the caller knows every value fits)."""
    if column.strides == (0,) and column.size:
        return constant(column[0], column.shape[0], np.int16)
    return column.astype(np.int16)


def writable(column: np.ndarray) -> np.ndarray:
    """The column itself, or a copy of it when it is a read-only constant."""
    return column if column.flags.writeable else column.copy()


#: The struct codes :func:`packed` writes, and their dtypes (native sizes, as numpy's).
_PACKED_DTYPES = {"q": np.dtype(np.int64), "i": np.dtype(np.int32), "B": np.dtype(np.uint8),
                  "d": np.dtype(np.float64)}


def packed(values: Iterable[Any], code: str, n: int | None = None) -> np.ndarray:
    """A new array of ``values`` (Python ints for ``"q"``, ``"i"``, ``"B"``, numbers for
    ``"d"``; an iterable of ``n`` of them where ``n`` is given), written by one
    ``struct.pack_into``: a C conversion per value, half the time of ``np.fromiter`` or
    ``np.asarray`` (numpy's generic per-element packing). A value of another type or out
    of range raises (``struct.error``, ``TypeError``) where numpy would, for ints; a float
    is not truncated to an int, nor a digit string read."""
    if n is None:
        n = len(values)  # type: ignore[arg-type]
    out = np.empty(n, dtype=_PACKED_DTYPES[code])
    if n:
        struct.pack_into(f"{n}{code}", out, 0, *values)
    return out


def ints(values: list) -> np.ndarray:
    """An int64 column; values outside int64 (hostile ids) become NO_ID."""
    try:
        return packed(values, "q")
    except (OverflowError, TypeError, ValueError, struct.error):
        return np.asarray([v if type(v) is int and -(2**63) <= v < 2**63 else NO_ID
                           for v in values], dtype=np.int64)


#: Ids that do not fit int64 are renumbered into ``[2**62, 2**63 - 1)``: far above the
#: counters profilers write, and a function of the id alone, so one id gets one number in
#: every batch, every column and every process of a parallel load.
_RENUMBER_BASE = 1 << 62
_RENUMBER_SPAN = (1 << 62) - 1


def link_ids(values: list) -> tuple[np.ndarray, np.ndarray | None]:
    """An int64 column of ids that link events to each other (correlation, External id,
    Python id, flow id), and a mask of the values renumbered (None when none was).

    An id beyond int64 (``2**64 + 5``) is kept as ``2**62 + id mod (2**62 - 1)``, so the
    launch and the kernel that share it still link; ids less than ``2**62 - 1`` apart
    stay distinct. Anything but an int becomes NO_ID.
    """
    try:
        return packed(values, "q"), None
    except (OverflowError, TypeError, ValueError, struct.error):
        pass
    lo, hi = -(1 << 63), 1 << 63
    big = [type(v) is int and not lo <= v < hi for v in values]
    out = [_RENUMBER_BASE + v % _RENUMBER_SPAN if b else v if type(v) is int else NO_ID
           for v, b in zip(values, big, strict=True)]
    return np.asarray(out, dtype=np.int64), np.asarray(big, dtype=bool)


def link_id(v: Any) -> int | None:
    """A flow's id as an int of any size (a digit string is read), else None."""
    if type(v) is int:
        return v
    if type(v) is str and v.isascii() and v.isdigit() and len(v) <= 40:
        return int(v)
    return None


def digits(v: Any) -> int:
    """Numeric value of a pid/tid (``7``, ``"7"``, ``"stream 7"``), else NO_ID."""
    if type(v) is int:
        return v if 0 <= v < 2**63 else NO_ID
    if type(v) is str:
        v = v.removeprefix("stream ")
        if v.isascii() and v.isdigit() and len(v) < 19:
            return int(v)
    return NO_ID
