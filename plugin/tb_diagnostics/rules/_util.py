"""Small helpers the rule modules share: formatting figures and picking evidence."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import is_not

import numpy as np

from tb_diagnostics.analysis.cost.shapes import parse_json
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.analysis.views.tables import window_of_rows
from tb_diagnostics.analysis.views.warmth import step_walls
from tb_diagnostics.names import short_name
from tb_diagnostics.rules.base import Evidence, evidence

#: The most telling events a finding lists (the issue's "~10").
MAX_EVIDENCE = 10


def fmt_us(us: float) -> str:
    """A duration in the unit a person reads best: ``850 µs``, ``14.10 ms``, ``2.31 s``."""
    us = float(us)
    # Thresholds just below the unit boundary so 999.7 µs reads "1.00 ms", not "1000 µs".
    if abs(us) >= 999_995:
        return f"{us / 1e6:.2f} s"
    if abs(us) >= 999.5:
        return f"{us / 1e3:.2f} ms"
    if abs(us) >= 9.95:
        return f"{us:.0f} µs"
    return f"{us:.1f} µs"


def fmt_bytes(n: float) -> str:
    n = float(n)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def step_numbers(analysis: SpanAnalysis, windows: Iterable[int]) -> list[int | None]:
    """Step numbers of window indices (sorted, unique; None for a span without steps),
    from the windows' step column (not a window view per index: they can be every step)."""
    c = analysis.windows.columns
    idx = (windows.ravel().astype(np.int64) if isinstance(windows, np.ndarray)
           else np.asarray([int(k) for k in windows], dtype=np.int64))
    idx = unique(idx[(idx >= 0) & (idx < len(c))])  # by a sort: see views.distinct
    return c.steps_at(idx)


def all_steps(analysis: SpanAnalysis) -> list[int | None]:
    """Every window's step number (None for a span without steps), from the column."""
    return analysis.windows.columns.step_list()


def busy_share(busy_us: np.ndarray, wall_us: np.ndarray) -> np.ndarray:
    """``busy / wall`` per window, 0 where the wall is not positive (``StepWindow``'s
    ``device_busy``/``compute_busy``, every window at once: the same floats)."""
    wall = np.asarray(wall_us, dtype=np.float64)
    return np.divide(np.asarray(busy_us, dtype=np.float64), wall, out=np.zeros_like(wall),
                     where=wall > 0)


def name_ids_matched(analysis: SpanAnalysis, pattern: re.Pattern[str]) -> np.ndarray:
    """The ids of the model's strings that ``pattern.match``es (at their start): the
    model's ``name_ids_matching`` (one pass over every string, kept per pattern) of the
    pattern anchored with ``^``; a ``match`` per string where it cannot be anchored so
    (under MULTILINE ``^`` would match after a newline too)."""
    m = analysis.model
    anchored = None
    if not pattern.flags & re.MULTILINE:
        try:
            anchored = re.compile(f"^(?:{pattern.pattern})", pattern.flags)
        except re.error:  # e.g. inline global flags, which must come first
            anchored = None
    if anchored is None:
        return np.asarray([i for i, s in enumerate(m.strings) if pattern.match(s)],
                          dtype=np.int32)
    return m.name_ids_matching(anchored)


def steps_text(steps: Sequence[int | None]) -> str:
    """``step 6``, ``steps 5–10``, ``steps 3, 7`` or ``the span``."""
    nums = list(filter(partial(is_not, None), steps))  # in C: a span's every step
    if not nums:
        return "the span"
    if len(nums) == 1:
        return f"step {nums[0]}"
    if nums == list(range(nums[0], nums[-1] + 1)):
        return f"steps {nums[0]}–{nums[-1]}"
    return "steps " + ", ".join(str(s) for s in nums)


def evidence_rows(analysis: SpanAnalysis, rows: Iterable[int], note: str | None = None,
                  limit: int = MAX_EVIDENCE) -> list[Evidence]:
    out = []
    for r in rows:
        if len(out) >= limit:
            break
        if int(r) >= 0:
            out.append(evidence(analysis, int(r), note))
    return out


def top_by(rows: np.ndarray, key: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` rows with the largest ``key``, largest first."""
    if not rows.size:
        return rows
    order = np.argsort(-key, kind="stable")[:k]
    return rows[order]


def n_steps(analysis: SpanAnalysis) -> int:
    """Warm windows: what a rule's per-step figures divide by (1 for a span without steps)."""
    return warm_steps(analysis).n


@dataclass(frozen=True)
class WarmSteps:
    """The windows every per-step figure of a rule speaks for: the warm ones.

    A cold first step (``views.warmth``) pays one-time costs; averaged in, a
    3.8 ms cold step turns 70 µs warm steps into an "818 µs" mean and shares of
    a step above 100 %. So per-step means sum over the warm windows only and
    divide by their count, and a share of a step is that sum over the same
    windows' wall time: the time-weighted share, never above 100 % for work of
    one thread inside its steps. A span without steps is its one window.
    """

    index: np.ndarray  # warm window indices, in order
    mask: np.ndarray  # bool per window
    wall_us: float  # summed wall of the warm windows
    median_wall_us: float  # median wall of the warm windows
    has_steps: bool
    cold: tuple[int | None, ...]  # step numbers left out

    @property
    def n(self) -> int:
        return max(int(self.index.size), 1)

    @property
    def mean_wall_us(self) -> float:
        return self.wall_us / self.n

    @property
    def per(self) -> str:
        """How a per-step figure is worded: ``per step`` or, without steps, ``in the span``."""
        return "per step" if self.has_steps else "in the span"

    def steps(self, analysis: SpanAnalysis) -> list[int | None]:
        c = analysis.windows.columns  # the column, not a view per window
        return c.steps_at(self.index)

    def in_warm(self, window: np.ndarray) -> np.ndarray:
        """Which of these window indices (-1: outside steps) are warm."""
        window = np.asarray(window)
        return (window >= 0) & self.mask[np.clip(window, 0, max(self.mask.size - 1, 0))] \
            if self.mask.size else np.zeros(window.shape, dtype=bool)

    def host_rows(self, analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
        """The host ``rows`` that start inside a warm window."""
        rows = np.asarray(rows)
        return rows[self.in_warm(window_of_rows(analysis, rows))] if rows.size else rows

    def activities(self, analysis: SpanAnalysis) -> np.ndarray:
        """Bool per ``model.device_activity_rows``: launched in a warm window."""
        if not self.has_steps:
            return np.ones(analysis.model.device_activity_rows.shape[0], dtype=bool)
        return self.in_warm(analysis.activity_step)

    def device_rows(self, analysis: SpanAnalysis, rows: np.ndarray) -> np.ndarray:
        """The device activity ``rows`` launched inside a warm window."""
        rows = np.asarray(rows)
        acts = analysis.model.device_activity_rows
        keep = acts[self.activities(analysis)]
        return rows[np.isin(rows, keep)] if rows.size else rows

    def per_window(self, values: np.ndarray) -> np.ndarray:
        """The per-step mean of per-window ``values`` (last axis: windows) over warm windows."""
        values = np.asarray(values, dtype=float)
        return values[..., self.index].sum(axis=-1) / self.n

    def share(self, per_step_us: float | np.ndarray) -> float | np.ndarray:
        """A per-step time as a share of a warm step's wall (see the class doc)."""
        mean = self.mean_wall_us
        return per_step_us / mean if mean > 0 else per_step_us * 0.0

    def share_text(self, per_step_us: float) -> str:
        """``12% of a warm step`` (``of the span`` without steps); work of several threads
        can exceed the wall, and is said so rather than as a share above 100 %."""
        x = float(self.share(per_step_us))
        what = "a warm step" if self.has_steps else "the span"
        if x > 1.0:
            return f"{x:.1f}× the wall of {what}, on several threads"
        return f"{fmt_pct(x)} of {what}"

    @property
    def cold_clause(self) -> str:
        """``, cold step 0 left out`` where a cold step was left out, else empty."""
        nums = [s for s in self.cold if s is not None]
        if not nums:
            return ""
        return f", {steps_text(nums).replace('step', 'cold step', 1)} left out"

    @property
    def cold_note(self) -> str:
        """`` (cold step 0 left out)`` where a cold step was left out, else empty."""
        return f" ({self.cold_clause[2:]})" if self.cold_clause else ""


@computed
def warm_steps(analysis: SpanAnalysis) -> WarmSteps:
    """The warm windows of ``analysis`` (all of them where none ran cold)."""
    windows = analysis.windows
    has_steps = bool(len(analysis.host_steps))
    if not windows:
        return WarmSteps(index=np.zeros(0, dtype=np.int64), mask=np.zeros(0, dtype=bool),
                         wall_us=0.0, median_wall_us=0.0, has_steps=has_steps, cold=())
    from tb_diagnostics.analysis.views.whatif import warm_windows

    # The what-if cards' warm windows: one decision for rules and cards.
    cold = step_walls(analysis).cold if has_steps else np.zeros(len(windows), dtype=bool)
    index = np.asarray(warm_windows(analysis), dtype=np.int64)
    mask = np.zeros(len(windows), dtype=bool)
    mask[index] = True
    # From the window columns (a span may hold a million steps).
    walls = windows.columns.wall_us[index]
    steps = windows.columns.step_list()
    return WarmSteps(index=index, mask=mask, wall_us=float(walls.sum()),
                     median_wall_us=float(np.median(walls)), has_steps=has_steps,
                     cold=tuple(steps[k] for k in np.flatnonzero(cold).tolist()))


def fmt_count(x: float) -> str:
    """A per-step count: ``161``, ``2.5``, ``0.2``."""
    x = float(x)
    if abs(x) >= 10 or x == int(x):
        return f"{x:.0f}"
    return f"{x:.1f}"


def op_label(name: str, input_dims: str | None, width: int = 60) -> str:
    """An op with its tensors' recorded shapes, as people write it:
    ``aten::mm [64,64] [64,64]`` (scalars and other non-tensor arguments left out)."""
    if not input_dims:
        return name
    dims = parse_json(input_dims)
    if not isinstance(dims, list):
        return name
    shapes = [json.dumps(d, separators=(",", ":")) for d in dims if isinstance(d, list) and d]
    return f"{name} {short_name(' '.join(shapes), width)}" if shapes else name


def fmt_flops(x: float) -> str:
    """``1.23 TFLOP``, ``456 GFLOP``…"""
    x = float(x)
    for unit, size in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(x) >= size:
            return f"{x / size:.3g} {unit}"
    return f"{x:.0f} FLOP"


@dataclass(frozen=True)
class ChangeSaving:
    """A finding's replayed saving over its windows: the total over their number
    (``saves_us``, the finding's ``savings_us``) and the total (``saves_us_total``), as
    ``views.whatif.saving_over`` defines them for the what-if cards and their parts."""

    saves_us: float
    saves_us_total: float
    windows: tuple[int, ...]


def replayed_saving(analysis: SpanAnalysis, change_id: str) -> float | None:
    """The saving of a projected change (``views.whatif``) as its what-if card gives it:
    per step over the warm windows, their total over their number; None when the change
    does not apply to the span. A finding whose change is the card's (``Card.claims``)
    claims this number, so the finding and the card never disagree."""
    from tb_diagnostics.analysis.views.whatif import projection, warm_windows

    p = projection(analysis, change_id)
    return None if p is None else p.saving(warm_windows(analysis))


def change_savings(analysis: SpanAnalysis, change: object,
                   steps: Sequence[int | None] | None = None) -> ChangeSaving | None:
    """The replayed saving of ``change`` (a ``replay.engine.Change``, or None: no saving
    to replay) over the warm windows of ``steps`` (``views.whatif.part_windows``): what
    a finding whose change is part of a what-if card claims, and what that card lists
    as the part."""
    if change is None:
        return None
    from tb_diagnostics.analysis.views.whatif import part_windows, replayed, saving_over

    windows = part_windows(analysis, steps)
    saving = saving_over(*replayed(analysis, change), windows)
    return ChangeSaving(saves_us=saving.per_step_us, saves_us_total=saving.total_us,
                        windows=tuple(windows))


def change_saving(analysis: SpanAnalysis, change: object,
                  steps: Sequence[int | None] | None = None) -> float | None:
    """:func:`change_savings`' saving per step (the finding's ``savings_us``)."""
    saving = change_savings(analysis, change, steps)
    return None if saving is None else saving.saves_us
