"""Python's ``round`` over a column, in a few numpy passes: the documents' figures rounded
to the same last digit as a ``round`` per value gave, without a call per value (issue 28:
a span of a million steps rounds tens of millions of figures)."""

from __future__ import annotations

import numpy as np

#: From this magnitude on ``x * 10**digits`` may hold no fraction to round (past any µs
#: figure of a trace): such values take Python's round itself.
_LARGE = 2.0 ** 50
#: The powers of ten a float holds exactly (10**22 is the last).
_POWERS = np.asarray([float(10 ** i) for i in range(23)])


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


def significant(values: np.ndarray, digits: int) -> np.ndarray:
    """``[float(f"{x:.{digits}g}") for x in values]`` (``digits`` significant digits, as
    the format rounds: the exact value, half to even) as a float64 array, in a few numpy
    passes.

    The mantissa is ``rint(x * 10**k)`` for ``k = digits - 1 - floor(log10|x|)``, and the
    value that mantissa over ``10**k``: with ``10**|k|`` exact (``|k| <= 22``: :data:`_POWERS`) one
    correctly rounded product or quotient, the nearest float to the decimal, as the
    format's parse gives. Where ``x * 10**k`` lies within its rounding error of a half,
    where log10's rounding gave the mantissa a digit too few or too many, and for zeros,
    non-finite values and far exponents, the format itself (zeros are themselves).
    """
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        k = digits - 1 - np.floor(np.log10(np.abs(x)))
        fits = np.isfinite(k) & (np.abs(k) < _POWERS.size)
        k = np.where(fits, k, 0.0)
        p = _POWERS[np.abs(k).astype(np.int64)]
        up = k >= 0
        t = np.where(up, x * p, x / p)
        mant = np.rint(t)
        out = np.where(up, mant / p, mant * p)
        near_half = np.abs(t - np.floor(t) - 0.5) <= np.abs(t) * 2.0 ** -50 + 2.0 ** -60
        size = np.abs(mant)
        risky = (~fits | near_half | (size < 10.0 ** (digits - 1))
                 | (size > 10.0 ** digits) | ~np.isfinite(x))
    # A zero formats as itself ("0", "-0"): most figures of a span of 10⁶ one-op steps are
    # zeros, and the format per value took 1.2 s there.
    zero = x == 0
    out[zero] = x[zero]
    risky &= ~zero
    for i in np.flatnonzero(risky).tolist():
        out[i] = float(f"{float(x[i]):.{digits}g}")
    return out
