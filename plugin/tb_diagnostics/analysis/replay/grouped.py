"""``ufunc.at`` for the order-free reductions (max and min), by groups where it can.

``np.fmax.at(out, idx, values)`` visits the values one at a time (a 10⁶-step span's
capture regions and replayed windows: 0.1 s a call). Where ``idx`` is non-decreasing,
each index's values lie together and one ``reduceat`` per group gives the same result:
a maximum or minimum is exact in any order, and ``fmax``/``fmin`` skip a NaN, as
``maximum``/``minimum`` keep one, either way.
"""

from __future__ import annotations

import numpy as np

#: The reductions whose result does not depend on the order of the values.
ORDER_FREE = (np.maximum, np.minimum, np.fmax, np.fmin)


def at(ufunc: np.ufunc, out: np.ndarray, idx: np.ndarray, values: np.ndarray) -> None:
    """``ufunc.at(out, idx, values)`` (``ufunc`` one of :data:`ORDER_FREE`; ``idx``
    valid indices, ``values`` an array of their length), in groups where ``idx`` is
    sorted."""
    if ufunc not in ORDER_FREE:
        raise ValueError(f"{ufunc.__name__} depends on the order of its values")
    idx = np.asarray(idx)
    values = np.asarray(values, dtype=out.dtype)
    if idx.shape[0] < 2 or not bool(np.all(idx[1:] >= idx[:-1])):
        ufunc.at(out, idx, values)
        return
    starts = np.flatnonzero(np.concatenate(([True], idx[1:] != idx[:-1])))
    keys = idx[starts]
    out[keys] = ufunc(out[keys], ufunc.reduceat(values, starts))
