"""Small helpers the rule modules share: formatting figures and picking evidence."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import numpy as np

from tb_diagnostics.analysis.cost.shapes import parse_json
from tb_diagnostics.analysis.span import SpanAnalysis
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
    """Step numbers of window indices (sorted, unique; None for a span without steps)."""
    ws = analysis.windows
    return [ws[k].step for k in sorted({int(k) for k in windows if 0 <= int(k) < len(ws)})]


def steps_text(steps: Sequence[int | None]) -> str:
    """``step 6``, ``steps 5–10``, ``steps 3, 7`` or ``the span``."""
    nums = [s for s in steps if s is not None]
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
    """Windows that are steps (1 for a span without steps)."""
    return max(len(analysis.windows), 1)


def short_name(name: str, width: int = 80) -> str:
    """A long (templated kernel) name cut to ``width`` characters."""
    return name if len(name) <= width else name[: width - 1] + "…"


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


def _windows_of(analysis: SpanAnalysis, steps: Sequence[int | None] | None) -> list[int] | None:
    """Window indices of ``steps`` (None: all windows, and when none of them is a window)."""
    if steps is None:
        return None
    wanted = set(steps)
    return [k for k, w in enumerate(analysis.windows) if w.step in wanted] or None


def replayed_saving(analysis: SpanAnalysis, change_id: str,
                    steps: Sequence[int | None] | None = None) -> float | None:
    """The replayed saving of a projected change (``views.whatif``): the median per step
    over the windows of ``steps`` (all windows when None), never below zero; None when
    the change does not apply to the span."""
    from tb_diagnostics.analysis.views.whatif import projection

    p = projection(analysis, change_id)
    return None if p is None else max(p.saving(_windows_of(analysis, steps)), 0.0)


def change_saving(analysis: SpanAnalysis, change: object,
                  steps: Sequence[int | None] | None = None) -> float | None:
    """The replayed saving of ``change`` (a ``replay.engine.Change``, or None: no saving
    to replay), as :func:`replayed_saving` reads a projection's."""
    if change is None:
        return None
    from tb_diagnostics.analysis.views.whatif import median_saving, replayed

    return max(median_saving(*replayed(analysis, change), _windows_of(analysis, steps)), 0.0)
