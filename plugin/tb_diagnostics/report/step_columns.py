"""Keys of the step documents as columns: each report layer (comm, roofline, critical
path, host work, flags, launch queue) computes its keys for every step at once and adds
them with :func:`with_columns`, to a span's :class:`~tb_diagnostics.lazy_rows.LazyRows`
as one more layer of packed columns; :func:`set_columns` sets them on the dicts of a list
of step documents (the tab, the API, the tests: the ``add_*`` functions), from the same
columns (issue 28: a Python call per step per key was a quarter of a million-step span's
report).

A column is anything :func:`~tb_diagnostics.lazy_rows.pack` takes: a numpy array (its
``tolist`` values), a list, or a packed column (``dict_column``, ``list_column``,
``masked_column``, ``codes_column``); ABSENT in a column leaves that row's key as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_diagnostics.analysis.views.distinct import distinct
from tb_diagnostics.lazy_rows import ABSENT, LazyRows, codes_column, masked_column, pack

#: A layer: its keys, in the order a per-step loop set them, and one column each.
Layer = tuple[tuple[str, ...], list[Any]]


def with_columns(steps: Sequence[dict[str, Any]], layer: Layer) -> Sequence[dict[str, Any]]:
    """``steps`` with ``layer``'s keys set: a LazyRows whose dicts are not made gains a
    layer (a new LazyRows, no dict made); anything else as :func:`set_columns` sets it."""
    if isinstance(steps, LazyRows) and not steps.materialised:
        return steps.with_layer(*layer)
    set_columns(steps, layer)
    return steps


def set_columns(steps: Sequence[dict[str, Any]], layer: Layer) -> None:
    """Set ``layer``'s keys on the dicts of ``steps`` (a list; a LazyRows makes its dicts),
    in place, as a loop per step left them: an existing key keeps its place, a new one
    goes last, ABSENT leaves the row as it is."""
    keys, columns = layer
    n = len(steps)
    for key, col in zip(keys, columns, strict=True):
        packed = pack(col)
        if packed.n != n:
            raise ValueError(f"column {key!r}: {packed.n} values for {n} steps")
        values = packed.take(0, n)
        for d, v in zip(steps, values, strict=True):
            if v is not ABSENT:
                d[key] = v


def where(mask: np.ndarray, values: np.ndarray | Sequence[Any], fill: Any = None) -> Any:
    """A column of ``values[i]`` where ``mask`` holds, else ``fill`` (None or ABSENT);
    ``values`` has one value per row (an array), or one per True of ``mask`` (a list)."""
    mask = np.asarray(mask, dtype=bool)
    if isinstance(values, np.ndarray) and values.shape[0] == mask.shape[0]:
        if mask.all():
            return values
        values = values[mask]
    inner = pack(values)
    if inner.n != int(mask.sum()):
        raise ValueError(f"{inner.n} values for {int(mask.sum())} rows")
    return masked_column(mask, inner, fill)


def strings_column(ids: np.ndarray, strings: Sequence[str]) -> Any:
    """A column of ``strings[ids[i]]`` (None where ``ids[i] < 0``): the few distinct ones
    as a table, each row a code into it (a segment's name, a model row's label)."""
    ids = np.asarray(ids, dtype=np.int64)
    ok = ids >= 0
    uniq, inv = distinct(ids[ok])  # np.unique's, by a presence table where ids allow
    first: dict[str, int] = {}  # a text two ids share (two lanes' label): one code
    remap = np.asarray([first.setdefault(strings[i], len(first)) for i in uniq.tolist()],
                       dtype=np.int64)
    col = codes_column(remap[inv.reshape(-1)], list(first))
    return col if ok.all() else masked_column(ok, col, None)


def labels_column(codes: np.ndarray, labels: Sequence[str]) -> Any:
    """A column of ``labels[codes[i]]`` for a small fixed table (``KIND_NAMES``), the
    labels distinct."""
    return codes_column(np.asarray(codes), labels)


def flat_offsets(counts: np.ndarray) -> np.ndarray:
    """The offsets of a list column whose rows hold ``counts`` values each."""
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
