"""The string ids a regular expression finds, without a ``search`` per string.

:meth:`TraceModel.name_ids_matching` asks which of the model's strings a pattern finds
(``search``). A ``search`` per string is a Python call per distinct name: a span of 10⁶
steps has 10⁶ distinct ``ProfilerStep#k`` names, and a dozen patterns are asked of it
(about 3 s). Most patterns name a literal that every match must contain (``^nccl|ncclKernel``:
``nccl``; ``^(?:cuda|hip)Memcpy(?:2D)?$``: ``Memcpy``): those literals are found in the
model's strings joined with ``"\\n"`` (once per model) by the regex engine in one pass
each, the offsets mapped back to the strings they fall in (a search in the strings'
start offsets), and only those strings are searched with the pattern itself. The literal
holds no newline, so each occurrence lies inside one string, and a string without one
cannot match: the ids are exactly those of a ``search`` per string. A pattern with no
such literal (``\\d+``) is searched one string at a time, as before.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Iterable
from itertools import chain
from typing import Any

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.trace.string_table import StringTable

try:  # CPython's regex parser (``re._parser`` from 3.11)
    from re import _constants as _sre
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - other Pythons: a search per string
    _sre = _sre_parse = None

#: Per model: the joined strings, each string's start offset in them, and the ids found
#: per pattern.
_JOINED: weakref.WeakKeyDictionary[Any, tuple[str, np.ndarray, dict[Any, np.ndarray]]] = \
    weakref.WeakKeyDictionary()

#: Flags that change how a literal matches (the rest do not, or cannot apply to one).
_LITERAL_FLAGS = re.IGNORECASE | re.ASCII


def _better(a: list[str] | None, b: list[str] | None) -> list[str] | None:
    """The more selective of two needle sets: the longer shortest needle, then fewer."""
    if not b:
        return a
    if not a:
        return b
    return b if (min(map(len, b)), -len(b)) > (min(map(len, a)), -len(a)) else a


def needles(tree: Any) -> list[str] | None:
    """Literals one of which every match of a parsed pattern (a sequence of
    ``(op, argument)``) contains, or None: the longest run of plain characters in the
    sequence, or the needles of every alternative of a branch it must pass, or those of
    a group or a repeat (at least once) it must pass; no newline in any of them."""
    best: list[str] | None = None
    run: list[str] = []
    repeats = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)}
    for op, av in tree:
        if op is _sre.LITERAL and av != ord("\n"):
            run.append(chr(av))
            continue
        best = _better(best, ["".join(run)] if run else None)
        run = []
        if op is _sre.BRANCH:
            alts = [needles(alt) for alt in av[1]]
            if all(alts):
                found = sorted(set(chain.from_iterable(a for a in alts if a)))
                # A needle that holds another is implied by it.
                best = _better(best, [n for n in found if not any(o != n and o in n
                                                                  for o in found)])
        elif op is _sre.SUBPATTERN and not av[1] and not av[2]:  # no scoped flags
            best = _better(best, needles(av[3]))
        elif op in repeats and av[0] >= 1:
            best = _better(best, needles(av[2]))
        elif op is getattr(_sre, "ATOMIC_GROUP", None):
            best = _better(best, needles(av))
    return _better(best, ["".join(run)] if run else None)


def pattern_needles(pattern: re.Pattern[str]) -> list[str] | None:
    """:func:`needles` of a compiled pattern (None where it cannot be read)."""
    if _sre_parse is None or not isinstance(pattern.pattern, str):
        return None
    found = _needles_of(pattern.pattern, pattern.flags)
    return None if found is None else list(found)


@functools.lru_cache(maxsize=512)
def _needles_of(source: str, flags: int) -> tuple[str, ...] | None:
    # Once per pattern for the process: the parse costs the same for every model.
    try:
        tree = _sre_parse.parse(source, flags)
    except Exception:  # an unreadable parse: a search per string
        return None
    found = needles(tree)
    return None if found is None else tuple(found)


def _joined(model: Any) -> tuple[str, np.ndarray, dict[Any, np.ndarray]]:
    hit = _JOINED.get(model)
    if hit is None and isinstance(model.strings, StringTable):  # the text is the table's
        hit = (model.strings.text, model.strings.starts[:-1], {})
        _JOINED[model] = hit
    if hit is None:
        strings = model.strings
        sizes = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)) + 1
        starts = np.zeros(len(strings), dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        hit = ("\n".join(strings), starts, {})
        _JOINED[model] = hit
    return hit


def joined_strings(model: Any) -> tuple[str, np.ndarray]:
    """The model's strings joined with ``"\\n"`` and each one's start offset in that text
    (made once per model; ``trace.name_index`` searches it too)."""
    text, starts, _ = _joined(model)
    return text, starts


def ids_matching(model: Any, pattern: re.Pattern[str]) -> np.ndarray:
    """The ids (ascending, int32, read-only) of ``model.strings`` that ``pattern``
    finds (``pattern.search``), computed once per model and pattern."""
    text, starts, done = _joined(model)
    key = (pattern.pattern, pattern.flags)
    ids = done.get(key)
    if ids is not None:
        return ids
    strings = model.strings
    found = pattern_needles(pattern) if strings else None
    flags = pattern.flags & _LITERAL_FLAGS
    if found and not flags and 2 * sum(text.count(n) for n in found) > len(strings):
        found = None  # in most strings (the step names): the search per string is cheaper
    if found:
        at = [np.fromiter((m.start() for m in re.finditer(re.escape(n), text, flags)),
                          dtype=np.int64) for n in found]
        # By a sort: numpy 2.4's hash path is far slower on many distinct ints.
        cand = sorted_sets.unique(
            np.searchsorted(starts, np.concatenate(at), side="right") - 1)
        ids = cand[_hits(pattern, map(strings.__getitem__, cand.tolist()), cand.size)]
        ids = ids.astype(np.int32)
    else:
        ids = np.flatnonzero(_hits(pattern, strings, len(strings))).astype(np.int32)
    ids.flags.writeable = False  # shared by every caller of the same pattern
    done[key] = ids
    return ids


def _hits(pattern: re.Pattern[str], strings: Iterable[str], n: int) -> np.ndarray:
    """Per string, whether ``pattern`` finds it: the searches mapped in C, no Python line
    per string (a span of 10⁶ steps has 10⁶ step names)."""
    return np.fromiter(map(bool, map(pattern.search, strings)), dtype=bool, count=n)
