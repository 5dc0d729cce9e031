"""``strings_column`` groups the ids by ``distinct`` (a presence table where their range
allows): the very table, codes and rows of the ``np.unique`` grouping it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from tb_diagnostics.lazy_rows import codes_column, masked_column
from tb_diagnostics.report.step_columns import strings_column


def _old_strings_column(ids, strings):
    ids = np.asarray(ids, dtype=np.int64)
    ok = ids >= 0
    uniq, inv = np.unique(ids[ok], return_inverse=True)
    first: dict[str, int] = {}
    remap = np.asarray([first.setdefault(strings[i], len(first)) for i in uniq.tolist()],
                       dtype=np.int64)
    col = codes_column(remap[inv.reshape(-1)], list(first))
    return col if ok.all() else masked_column(ok, col, None)


@pytest.mark.parametrize("seed", range(8))
def test_strings_column_equals_the_np_unique_grouping(seed):
    rng = np.random.default_rng(seed)
    strings = [f"s{i % 7}" for i in range(50)]  # texts shared by several ids
    for n in (0, 1, 3, 400):
        ids = rng.integers(-1, 50, n)
        if seed % 2:
            ids[ids == -1] = 3  # no missing one
        got, want = strings_column(ids, strings), _old_strings_column(ids, strings)
        assert type(got) is type(want)
        assert got.take(0, n) == want.take(0, n)
        assert vars(got).keys() == vars(want).keys()


@pytest.mark.parametrize("seed", range(4))
def test_kernel_classes_group_names_as_np_unique(seed):
    # fp32-matmul groups the kernels' name ids by distinct: np.unique's ids and inverse.
    from tb_diagnostics.analysis.views.distinct import distinct

    rng = np.random.default_rng(seed)
    for n in (0, 1, 50, 5000):
        names = rng.integers(0, 3_000_000 if seed % 2 else 40, n).astype(np.int32)
        ids, inv = distinct(names.astype(np.int64))
        want_ids, want_inv = np.unique(names, return_inverse=True)
        assert ids.tolist() == want_ids.tolist() and inv.tolist() == want_inv.tolist()
