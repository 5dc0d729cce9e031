"""The model's optional columns as the builder keeps them: keys, dtypes, absent values, width.

:class:`~tb_diagnostics.trace.build.ModelBuilder` grows one column per key while batches
come in; the ones here are often empty in a whole trace (no kernels, no stacks, no
shapes), so each has the value that marks "absent". When the builder finishes,
:func:`stored_columns` takes them in the model's row order and stores each as narrow as
its values allow: ids that are only looked up as int32 when they fit, string ids as
int16 when the trace has few strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tb_diagnostics.trace.columns import as_int16, ints, link_ids, narrow_ids, packed, take
from tb_diagnostics.trace.decode import ABSENT, NAN, NO_RAW
from tb_diagnostics.trace.interner import Interner
from tb_diagnostics.trace.model import NO_ID

#: Columns that are often empty in a whole trace (no kernels, no stacks, no shapes), and
#: the value that marks "absent" in each.
ABSENT_VALUE: dict[str, Any] = {
    **dict.fromkeys(("corr", "ext", "device", "stream", "pyid", "pypar",
                     "stack", "dims", "types", "concrete", "shape", "resources"), NO_ID),
    "nbytes": math.nan,
}

#: The dtype of each of those columns (a batch may give one as a count of absent values).
DTYPES: dict[str, Any] = {
    **dict.fromkeys(("corr", "ext", "device", "stream", "pyid", "pypar"), np.int64),
    **dict.fromkeys(("stack", "dims", "types", "concrete", "shape", "resources"), np.int32),
    "nbytes": np.float64}

#: The builder's columns that hold string ids.
STRING_ID_KEYS = frozenset({"name", "stack", "dims", "types", "concrete", "shape",
                            "resources"})

#: The model's fields filled from the builder's columns as they are: field → (key, dtype).
OPTIONAL_FIELDS: dict[str, tuple[str, Any]] = {
    "name": ("name", np.int32), "external_id": ("ext", np.int64),
    "nbytes": ("nbytes", np.float64), "python_id": ("pyid", np.int64),
    "python_parent": ("pypar", np.int64), "call_stack": ("stack", np.int32),
    "input_dims": ("dims", np.int32), "input_types": ("types", np.int32),
    "concrete_inputs": ("concrete", np.int32),
    "launch_shape": ("shape", np.int32),
    "launch_resources": ("resources", np.int32)}

#: Id columns that are only looked up, never combined arithmetically: stored as int32
#: when every id fits (they are small counters in practice), int64 otherwise.
NARROWABLE_IDS = ("external_id", "python_id", "python_parent")

#: Index columns are int16 when every index fits (traces with fewer than 32767
#: distinct strings, or threads and streams): half the memory of int32.
INT16_LIMIT = np.iinfo(np.int16).max
STRING_ID_COLUMNS = ("name", "call_stack", "input_dims", "input_types", "concrete_inputs",
                     "launch_shape", "launch_resources")


def stored_columns(column: Callable[[str, Any], np.ndarray], order: np.ndarray,
                   n_strings: int) -> dict[str, np.ndarray]:
    """The :data:`OPTIONAL_FIELDS` of the model, each taken from ``column(key, dtype)`` (the
    builder lets go of it as it is taken) in row ``order``, then narrowed."""
    columns = {field: take(column(key, dtype), order)
               for field, (key, dtype) in OPTIONAL_FIELDS.items()}
    for field in NARROWABLE_IDS:
        columns[field] = narrow_ids(columns[field])
    if n_strings < INT16_LIMIT:
        for field in STRING_ID_COLUMNS:
            columns[field] = as_int16(columns[field])
    return columns


def arg_columns(intern: Interner, args: list) -> tuple[dict[str, np.ndarray | int],
                                                     list[np.ndarray]]:
    """One batch's columns from its complete events' args (links, device, stream, bytes,
    Python ids, stacks, shapes, types), and per link column the mask of the ids it
    renumbered (:func:`~tb_diagnostics.trace.columns.link_ids`).

    Most fields are absent from most events (a CPU op has no stream, a kernel no stack): a
    column whose batch holds only the default is given as the count of its rows (found by
    a C-speed ``list.count``, the default being one shared object), no array is made."""
    n = len(args)
    renumbered: list[np.ndarray] = []

    def link(values: list) -> np.ndarray | int:
        if values.count(ABSENT) == n:
            return n
        column, big = link_ids(values)
        if big is not None:
            renumbered.append(big)
        return column

    ext_values = [a.external_id for a in args]
    ext_lc_values = [a.external_id_lc for a in args]
    if ext_values.count(ABSENT) == n and ext_lc_values.count(ABSENT) == n:
        ext: np.ndarray | int = n
    else:
        ext_column, big = link_ids(ext_values)
        if big is not None:
            renumbered.append(big)
        ext_lc = link(ext_lc_values)
        # The lower-case key of some generations where the usual one is missing.
        ext = np.where(ext_column >= 0, ext_column, ABSENT if type(ext_lc) is int else ext_lc)
    del ext_values, ext_lc_values
    cols: dict[str, np.ndarray | int] = {"corr": link([a.correlation for a in args]),
                                         "ext": ext}
    device = [a.device for a in args]
    cols["device"] = n if device.count(ABSENT) == n else ints(device)
    del device
    stream = [a.stream for a in args]
    cols["stream"] = n if stream.count(ABSENT) == n else ints(
        [v if type(v) is int else ABSENT for v in stream])
    del stream
    nbytes = [a.nbytes for a in args]
    cols["nbytes"] = n if nbytes.count(NAN) == n else packed(nbytes, "d")
    del nbytes
    cols["pyid"] = link([a.python_id for a in args])
    parents = [a.python_parent_id for a in args]
    if None in parents:  # a null parent id: no parent
        parents = [NO_ID if v is None else v for v in parents]
    cols["pypar"] = link(parents)
    del parents
    # Interned in this order: string ids are numbered in order of first appearance.
    stacks = [a.call_stack for a in args]
    cols["stack"] = n if stacks.count("") == n else intern.optional(stacks)
    del stacks
    dims = [a.input_dims for a in args]
    cols["dims"] = n if dims.count(NO_RAW) == n else intern.raw(dims, compact=True)
    del dims
    types = [a.input_type for a in args]
    cols["types"] = n if types.count(NO_RAW) == n else intern.raw(types)
    return cols, renumbered
