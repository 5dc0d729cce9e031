"""What bounds a step: the verdict and its thresholds.

The device is the thing that should be busy. When it is busy at least
``compute_bound`` of the step, the step is *compute-bound*: only faster
kernels (or less work) make it faster. When it is busy less than
``low_busy``, the host made it wait, and the largest cause of the wait names
the verdict. In between, the step is *mixed* and the largest cause is still
reported.
"""

from __future__ import annotations

from dataclasses import dataclass

#: device_busy at or above which a step is compute-bound (torch-tb-profiler and
#: HTA call ≥ 80 % GPU utilisation "good"; see docs/anchors in the README).
COMPUTE_BOUND = 0.80
#: device_busy below which the dominant idle cause names the verdict.
LOW_BUSY = 0.50
#: CPU-only traces: an op call whose self time reaches this many µs counts as
#: device work; shorter calls are dominated by the fixed dispatch cost.
CPU_HEAVY_SELF_US = 50.0

IDLE_CAUSES = ("input", "sync", "comm", "launch", "other")
#: The verdict each dominant idle cause gives below LOW_BUSY. "other" (the
#: host recorded nothing) falls back to overhead: the device waited for work.
CAUSE_VERDICT = {
    "input": "input-bound",
    "sync": "sync-bound",
    # Host time blocked in a collective: waiting for the other ranks or the network.
    "comm": "communication-bound",
    "launch": "overhead-bound",
    "other": "overhead-bound",
}
VERDICTS = ("compute-bound", "overhead-bound", "input-bound", "sync-bound",
            "communication-bound", "mixed")


@dataclass(frozen=True)
class Thresholds:
    """The named thresholds of the verdict; the CLI can override each one."""

    compute_bound: float = COMPUTE_BOUND
    low_busy: float = LOW_BUSY
    cpu_heavy_self_us: float = CPU_HEAVY_SELF_US

    def __post_init__(self) -> None:
        if not 0.0 <= self.low_busy <= self.compute_bound <= 1.0:
            raise ValueError(
                f"thresholds must satisfy 0 <= low_busy ({self.low_busy}) <= "
                f"compute_bound ({self.compute_bound}) <= 1"
            )
        if self.cpu_heavy_self_us < 0:
            raise ValueError("cpu_heavy_self_us must be >= 0")


def main_idle_cause(idle: dict[str, float]) -> str | None:
    """The largest idle cause; ties go to the earlier of input, sync, comm, launch, other.

    The profiler's own time (``idle["profiler"]``, where present) is never a cause.
    """
    best, most = None, 0.0
    for c in IDLE_CAUSES:  # strictly greater: the earlier cause keeps a tie
        if idle[c] > most:
            best, most = c, idle[c]
    return best


def verdict(device_busy: float, idle: dict[str, float], th: Thresholds) -> str:
    """Classify one step from its busy fraction and idle breakdown (µs per cause).

    ``device_busy`` is taken over the step without the profiler's own time.
    """
    return verdict_of(device_busy, main_idle_cause(idle), th)


def verdict_of(device_busy: float, cause: str | None, th: Thresholds) -> str:
    """:func:`verdict`, given the step's ``main_idle_cause`` already."""
    if device_busy >= th.compute_bound:
        return "compute-bound"
    if device_busy < th.low_busy:
        return CAUSE_VERDICT[cause or "other"]
    return "mixed"
