"""The rules' column helpers give what the per-window / per-row forms they replaced gave."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tb_diagnostics.analysis.window_columns import WindowColumns
from tb_diagnostics.rules import kernel_duration_variance as kdv
from tb_diagnostics.rules._util import busy_share, step_numbers, steps_text
from tb_diagnostics.rules.dispatch_chain import _row_groups


class _Cols:
    """What the helpers read of ``analysis.windows.columns``."""

    def __init__(self, steps: list[int], has_steps: bool) -> None:
        self.step, self.has_steps = np.asarray(steps, dtype=np.int64), has_steps

    def __len__(self) -> int:
        return int(self.step.shape[0])

    # Read as the real columns read them.
    steps_at = WindowColumns.steps_at
    _step_ints = WindowColumns._step_ints


def _analysis(steps: list[int], has_steps: bool = True) -> SimpleNamespace:
    return SimpleNamespace(windows=SimpleNamespace(columns=_Cols(steps, has_steps)))


def test_step_numbers_sorted_unique_in_range() -> None:
    a = _analysis([5, 6, 7, 9])
    assert step_numbers(a, [3, 1, 1, -1, 4, 0]) == [5, 6, 9]
    assert step_numbers(a, np.array([2, 2, 0])) == [5, 7]
    assert step_numbers(a, {1}) == [6]
    assert step_numbers(a, []) == []
    assert step_numbers(_analysis([0, 0], has_steps=False), [1, 0]) == [None, None]


def test_busy_share_is_the_windows_division() -> None:
    busy = np.array([1.0, 2.0, 3.0, 0.5])
    wall = np.array([3.0, 0.0, -1.0, np.nan])
    want = [b / w if w > 0 else 0.0 for b, w in zip(busy.tolist(), wall.tolist(), strict=True)]
    assert busy_share(busy, wall).tolist() == want


def test_steps_text() -> None:
    assert steps_text([None, 4, None]) == "step 4"
    assert steps_text([3, 4, 5]) == "steps 3–5"
    assert steps_text([3, 7]) == "steps 3, 7"
    assert steps_text([None]) == "the span"


def test_row_groups_as_unique_rows() -> None:
    rng = np.random.default_rng(1)
    key = rng.integers(-2, 2, size=(300, 3))
    first, inv = _row_groups(key)
    _, u_first, u_inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    assert sorted(first.tolist()) == sorted(u_first.tolist())
    # The same partition of the rows, each group named by its first row.
    assert (first[inv] == u_first[u_inv.ravel()]).all()


def test_stable_counts_by_one_sort() -> None:
    # (name, shape) 1/0 launched twice in every step; 2/0 once in step 0, twice in step 1.
    name = np.array([1, 1, 2, 1, 1, 2, 2, 3])
    shape = np.array([0, 0, 0, 0, 0, 0, 0, 0])
    window = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    ki = SimpleNamespace(name=name, shape=shape, window=window)
    ok = np.ones(8, dtype=bool)
    ok[7] = False
    assert kdv._stable_counts(ki, ok).tolist() == [True, True, False, True, True, False,
                                                   False, False]
    assert kdv._stable_counts(ki, np.zeros(8, dtype=bool)).tolist() == [False] * 8
