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
    if isinstance(strings, StringTable) and strings.text.isascii():
        # The digits read in the table's text itself: no string made per name.
        starts = strings.starts
        first = starts[ids] + len(_STEP_PREFIX)
        read = _read_numbers(np.frombuffer(strings.text.encode("ascii"), dtype=np.uint8),
                             first, starts[ids + 1] - 1 - first)
        if read is not None:
            return ids[read[0]].astype(np.int32), read[1]
    names = [strings[i] for i in ids.tolist()] if n < 2 else \
        list(operator.itemgetter(*ids.tolist())(strings))
    digits = "".join(names).replace(_STEP_PREFIX, "")
    if not (digits.isascii() and digits.isdigit()):
        return _step_numbers_one_by_one(names, ids)
    width = np.fromiter(map(len, names), dtype=np.int64, count=n) - len(_STEP_PREFIX)
    code = np.frombuffer(digits.encode("ascii"), dtype=np.uint8)
    read = _read_numbers(code, np.cumsum(width) - width, width)
    assert read is not None  # every byte a digit (checked above)
    return ids[read[0]].astype(np.int32), read[1]


def _read_numbers(code: np.ndarray, first: np.ndarray, width: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """The numbers whose ASCII digits are ``code[first[k]:first[k] + width[k]]``: which k
    have at most :data:`_MAX_DIGITS` digits (a mask) and their values; None where a byte
    read is not a digit or a number has none."""
    n = int(first.shape[0])
    keep = width <= _MAX_DIGITS  # longer: too long for an int64, left out
    if n and int(width.min()) < 1:
        return None
    number = np.zeros(n, dtype=np.int64)
    # The names of one width at a time, digit by digit (Horner): a pass per digit place
    # over those names only, no per-digit int64 table of the whole span's digits.
    for w in np.flatnonzero(np.bincount(width[keep])).tolist() if n else ():
        of_width = np.flatnonzero(width == w)
        at = first[of_width]
        value = np.zeros(of_width.shape[0], dtype=np.int64)
        for j in range(w):
            digit = code[at + j] - np.uint8(48)  # a byte below '0' wraps past 9
            if bool((digit > 9).any()):
                return None
            value *= 10
            value += digit
        number[of_width] = value
    # The digits of the names left out are not read: checked as the others are.
    for k in np.flatnonzero(~keep).tolist():
        if not bool((code[first[k]:first[k] + width[k]] - np.uint8(48) <= 9).all()):
            return None
    return keep, number[keep]


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
