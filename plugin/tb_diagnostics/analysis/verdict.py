"""What bounds a step: the verdict and its thresholds.

Compute is the thing the device should be busy with. A collective kernel
(NCCL/RCCL) keeps the device "busy" too, but it mostly waits for the other
ranks: it is communication, not compute. So the verdict reads ``compute_busy``,
the share of the step in device activity that is not a collective.

When compute covers at least ``compute_bound`` of the step, the step is
*compute-bound*: only faster kernels (or less work) make it faster. When it
covers less than ``low_busy``, the largest cause of the time that is not
compute names the verdict. In between, the step is *mixed* and the largest
cause is still reported.

The time that is not compute splits, without overlap, into the device's idle
time (each idle cause: input, sync, comm, launch, other, and the profiler's own
time) and the time the device ran only collectives (``exposed_collective``:
collective kernels that no compute overlaps). The *comm* cause is the sum of
the two parts that are communication: the host blocked in a collective while
the device sat idle (``idle["comm"]``) and collective kernels running alone.
They are disjoint in time (one is device idle, the other device busy), so
nothing is counted twice.

Some idle time is no cause: the profiler's own time, and one-time costs, the
host compiling inside the window (Dynamo, AOTAutograd, Inductor and its
autotuning: ``views.compiled``) and a kernel's first launch loading its module
(``views.launch``). Each is labelled (``idle["profiler"]``, ``idle["compile"]``,
``idle["module_load"]``), taken before every cause (so a sync inside an
autotuning compile is compilation, and a 420 ms first launch is no launch
overhead), and left out of the time the step is judged on (:data:`UNJUDGED`).
Where the device sits idle while the host compiles for most of a step
(:data:`COMPILE_BOUND_SHARE` of its wall), compilation is what bounds it: the step is
*compile-bound*, its main cause ``compile`` (:func:`compile_bound`), not judged by the
little work around the compile (which the "overhead-bound, nothing recorded" of an idle
rest would misname).

A busy device is not always the limit: a warm step whose device runs on work
queued before it, while the queue shrinks and the host needs longer to issue a
step than the device needs to run it (``views.backlog``), is limited by the
host whatever its ``compute_busy`` (:func:`host_limited_verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tb_diagnostics.analysis.intervals import Intervals, covered

#: compute_busy at or above which a step is compute-bound (torch-tb-profiler and
#: HTA call ≥ 80 % GPU utilisation "good"; see docs/anchors in the README).
COMPUTE_BOUND = 0.80
#: compute_busy below which the dominant cause names the verdict.
LOW_BUSY = 0.50
#: CPU-only traces: an op call whose self time reaches this many µs counts as
#: device work; shorter calls are dominated by the fixed dispatch cost.
CPU_HEAVY_SELF_US = 50.0

IDLE_CAUSES = ("input", "sync", "comm", "launch", "other")
#: Idle time that is the profiler's own or a one-time cost: labelled, never a cause, and
#: left out of the time a step is judged on.
UNJUDGED = ("profiler", "compile", "module_load")
#: A step whose device sits idle while the host compiles for at least this share of its
#: wall is compile-bound ("most of its wall"): a one-time cost bounds it.
COMPILE_BOUND_SHARE = 0.5
#: A window with at least this much host compile time (µs) is flagged ``compiling``
#: (compile-overhead's threshold for compilation inside the window).
COMPILING_MIN_US = 1000.0
#: The verdict each dominant cause gives below LOW_BUSY. "other" (the host
#: recorded nothing) falls back to overhead: the device waited for work.
CAUSE_VERDICT = {
    "input": "input-bound",
    "sync": "sync-bound",
    # Waiting for the other ranks or the network: on the host in a collective while
    # the device idles, or on the device in a collective kernel that no compute hides.
    "comm": "communication-bound",
    "launch": "overhead-bound",
    "other": "overhead-bound",
}
VERDICTS = ("compute-bound", "overhead-bound", "input-bound", "sync-bound",
            "communication-bound", "mixed", "compile-bound")
#: A window's main idle cause, by its code in the window columns (``cause_code``): the
#: idle causes, None (no cause), and "compile" (a compile-bound step's).
CAUSE_CODES: tuple[str | None, ...] = (*IDLE_CAUSES, None, "compile")
#: What decided a window's verdict where compute and the main cause did not, by its code
#: in the window columns (``by_code``).
VERDICT_BY_CODES: tuple[str | None, ...] = (None, "launch-backlog", "compilation")


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


def cause_times(idle: dict[str, float], exposed_collective: float = 0.0) -> dict[str, float]:
    """µs per cause of the time that is not compute: the idle causes, with the collective
    kernels that ran alone (``exposed_collective``) added to ``comm``."""
    out = {c: idle[c] for c in IDLE_CAUSES}
    out["comm"] += exposed_collective
    return out


def main_idle_cause(idle: dict[str, float], exposed_collective: float = 0.0) -> str | None:
    """The largest cause of the time that is not compute; ties go to the earlier of input,
    sync, comm, launch, other.

    ``comm`` counts the host's waits in collectives (``idle["comm"]``) plus the collective
    kernels no compute overlaps (``exposed_collective``). The profiler's own time
    (``idle["profiler"]``, where present) is never a cause.
    """
    times = cause_times(idle, exposed_collective)
    best, most = None, 0.0
    for c in IDLE_CAUSES:  # strictly greater: the earlier cause keeps a tie
        if times[c] > most:
            best, most = c, times[c]
    return best


def verdict(compute_busy: float, idle: dict[str, float], th: Thresholds,
            exposed_collective: float = 0.0) -> str:
    """Classify one step from its compute fraction and the µs of each cause.

    ``compute_busy`` is taken over the step without the profiler's own time.
    """
    return verdict_of(compute_busy, main_idle_cause(idle, exposed_collective), th)


def compile_bound(idle_compile_us: float, wall_us: float) -> bool:
    """Whether a step is compile-bound: its device idle while the host compiles
    (``idle["compile"]``) is at least :data:`COMPILE_BOUND_SHARE` of its wall."""
    return wall_us > 0 and idle_compile_us >= COMPILE_BOUND_SHARE * wall_us


def verdict_of(compute_busy: float, cause: str | None, th: Thresholds) -> str:
    """:func:`verdict`, given the step's ``main_idle_cause`` already."""
    if compute_busy >= th.compute_bound:
        return "compute-bound"
    if compute_busy < th.low_busy:
        return CAUSE_VERDICT[cause or "other"]
    return "mixed"


def host_limited_verdict(input_us: float, issue_us: float) -> str:
    """The verdict of a warm step whose device drains a backlog for a host that issues less
    than the device runs: the host is the limit, so its time names the verdict.
    ``input-bound`` when the DataLoader holds at least half of the host's issue time
    (``input_us`` of ``issue_us``: the host's time without waits and one-time costs), else
    ``overhead-bound`` (Python, dispatch and launches)."""
    if issue_us > 0 and input_us >= 0.5 * issue_us:
        return CAUSE_VERDICT["input"]
    return CAUSE_VERDICT["launch"]


def idle_split(busy: Intervals, busy_us: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               layers: Mapping[str, Intervals]) -> dict[str, np.ndarray]:
    """The device idle µs of each window ``[lo[k], hi[k])`` by cause: each of ``layers``
    (host intervals, in order) takes the idle time it adds to the busy time and the layers
    before it, and ``other`` the rest, so the parts sum to ``hi - lo - busy_us``. Keyed
    causes first (:data:`IDLE_CAUSES`), then the labelled time (:data:`UNJUDGED`)."""
    so_far, c_prev = busy, busy_us
    idle: dict[str, np.ndarray] = {}
    for name, iv in layers.items():
        if len(iv):  # most traces compile nothing and load no module: no union, no scan
            so_far = so_far | iv
            c_now = covered(so_far, lo, hi)
        else:
            c_now = c_prev
        idle[name] = c_now - c_prev
        c_prev = c_now
    idle["other"] = (hi - lo) - c_prev
    return {c: idle[c] for c in (*IDLE_CAUSES, *UNJUDGED)}
