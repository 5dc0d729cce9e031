"""The numbers of ``ProfilerStep#N`` names, read as columns (issue 28: a span of 10⁶
steps has 10⁶ distinct step names, each parsed here without a Python line per name
where its digits are ASCII)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from tb_diagnostics.trace.string_table import StringTable

#: What every STEP_NAME match begins with (a test holds the two together).
_STEP_PREFIX = "ProfilerStep#"
#: Step numbers past what a float64 holds exactly are no step counter's: not steps.
_MAX_DIGITS = 15


def step_numbers(strings: Sequence[str], ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the names ``ids`` (ascending) that STEP_NAME matches: those whose number has at
    most :data:`_MAX_DIGITS` digits (int32 ids) and that number (int64), as columns.

    A match is the prefix, digits, and at most one newline (``$`` allows one). Where the
    digits are all ASCII they are read as bytes, one column pass for every name (10⁶ step
    names on 10⁶ steps); otherwise (a newline, other scripts' digits) by ``int`` each."""
    n = int(ids.shape[0])
    if isinstance(strings, StringTable):  # the names cut from its text in one pass
        names = strings.take(ids)
    else:
        names = [strings[i] for i in ids.tolist()] if n < 2 else \
            list(operator.itemgetter(*ids.tolist())(strings))
    digits = "".join(names).replace(_STEP_PREFIX, "")
    if not (digits.isascii() and digits.isdigit()):
        return _step_numbers_one_by_one(names, ids)
    width = np.fromiter(map(len, names), dtype=np.int64, count=n) - len(_STEP_PREFIX)
    keep = width <= _MAX_DIGITS  # longer: too long for an int64, left out
    code = np.frombuffer(digits.encode("ascii"), dtype=np.uint8)
    first = np.cumsum(width) - width  # where each name's digits begin in ``code``
    number = np.zeros(n, dtype=np.int64)
    # The names of one width at a time, digit by digit (Horner): a pass per digit place
    # over those names only, no per-digit int64 table of the whole span's digits.
    for w in np.unique(width[keep]).tolist():
        of_width = np.flatnonzero(width == w)
        at = first[of_width]
        value = np.zeros(of_width.shape[0], dtype=np.int64)
        for j in range(w):
            value *= 10
            value += code[at + j] - 48
        number[of_width] = value
    return ids[keep].astype(np.int32), number[keep]


def _step_numbers_one_by_one(names: list[str], ids: np.ndarray,
                             ) -> tuple[np.ndarray, np.ndarray]:
    keep: list[int] = []
    parsed: list[int] = []
    for k, s in enumerate(names):
        digits = s[len(_STEP_PREFIX):]
        if digits[-1] == "\n":
            digits = digits[:-1]
        if len(digits) <= _MAX_DIGITS:
            keep.append(k)
            parsed.append(int(digits))
    return (ids[np.asarray(keep, dtype=np.int64)].astype(np.int32),
            np.asarray(parsed, dtype=np.int64))
