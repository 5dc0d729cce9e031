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

from tb_diagnostics.trace.columns import as_int16, narrow_ids, take
from tb_diagnostics.trace.model import NO_ID

#: Columns that are often empty in a whole trace (no kernels, no stacks, no shapes), and
#: the value that marks "absent" in each.
ABSENT_VALUE: dict[str, Any] = {
    **dict.fromkeys(("corr", "ext", "device", "stream", "pyid", "pypar",
                     "stack", "dims", "types", "concrete", "shape", "resources"), NO_ID),
    "nbytes": math.nan,
}

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
