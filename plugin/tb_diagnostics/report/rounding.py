"""Python's ``round`` over a column, in a few numpy passes: the documents' figures rounded
to the same last digit as a ``round`` per value gave, without a call per value (issue 28:
a span of a million steps rounds tens of millions of figures)."""

from __future__ import annotations

import numpy as np

#: From this magnitude on ``x * 10**digits`` may hold no fraction to round (past any µs
#: figure of a trace): such values take Python's round itself.
_LARGE = 2.0 ** 50


def rounded(values: np.ndarray, digits: int) -> list[float]:
    """``[round(float(x), digits) for x in values]``, in a few numpy passes."""
    return rounded_array(values, digits).tolist()


def rounded_array(values: np.ndarray, digits: int) -> np.ndarray:
    """:func:`rounded` as a float64 array (a step document's column packs it as it is).

    numpy rounds ``x`` as ``rint(x * 10**d) / 10**d``; Python rounds the exact value of
    ``x``, half to even. The division is correctly rounded either way, so the two agree
    wherever ``rint`` picks the same integer: everywhere but where ``x * 10**d`` lies
    within its own rounding error of a half (or is huge, or not finite). Those few take
    Python's round.
    """
    x = np.asarray(values, dtype=np.float64)
    scale = 10.0 ** digits
    t = x * scale
    out = np.rint(t) / scale
    with np.errstate(invalid="ignore"):
        near_half = np.abs(t - np.floor(t) - 0.5) <= np.abs(t) * 2.0 ** -50 + 2.0 ** -60
        risky = near_half | ~(np.abs(t) < _LARGE)
    for k in np.flatnonzero(risky).tolist():
        out[k] = round(float(x[k]), digits)
    return out
