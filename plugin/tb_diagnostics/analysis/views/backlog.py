"""Launch backlog: the device's queue of launched-but-not-started work, per step.

HTA's queue length (``TraceCounters.get_queue_length_time_series``) is the
number of outstanding operations on a stream: +1 when a runtime call enqueues
a kernel or copy (at the call's ``ts``), −1 when that activity starts on the
device; only activities whose launch is in the trace count (a semi-join: those
without made its series go negative). Here the same count is taken over every
stream of the device, with two additions: activity launched *before* the record
window (``views.activity_coverage``) is queued from the start, since it was
launched and had not started, and the queued work is also summed in µs of device
time (launched and not yet done, the running activity's remainder included), which
says how long the device can run without the host.

Per step (its host window ``[host_start, host_end)``) that gives the queue at both
ends and its change, the launch → start delay of the step's launches, the host's
time for the step (its issue period) and the device time of the step's own work.
When the device runs on work queued before the step and the queue shrinks while
the host needs longer to issue a step (its time without waits in syncs and
collectives, and without one-time compilation and module loads) than the device
needs to run it, the device only looks busy: it is
draining a backlog the host no longer refills, and once the queue is empty the
host is the limit (``host_limited``). When the queue grows, the device
is the limit (``device_limited``).

This view reads the host steps, the activities' steps and the host's sync,
collective, compile and module-load intervals only (never the step windows), so
the windows' verdict reads it: a warm host-limited step is judged by the host's
time, not by the busy device (``SpanAnalysis.windows``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tb_diagnostics.analysis.intervals import chained_starts, covered, from_previous_ends
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.activity_coverage import pre_window_activities
from tb_diagnostics.analysis.views.compiled import compile_intervals
from tb_diagnostics.analysis.views.launch import module_loads

#: The device's work for a step is at most this share of the host's time for it...
HOST_LIMITED_RATIO = 0.8
#: ...by at least this many µs, and the queued work shrinks by at least this share of
#: the difference (a device busy all along drains exactly the difference).
MIN_DEFICIT_US = 10.0
DRAIN_SHARE = 0.5
#: The queued work changes by at least this share of the step's host time to be
#: growing or draining rather than steady.
TREND_SHARE = 0.1
#: :meth:`LaunchBacklog.trend`'s words, in :meth:`LaunchBacklog.trend_codes`' order.
TRENDS = ("growing", "draining", "steady")


@dataclass(frozen=True)
class LaunchBacklog:
    """Per step window (one window for a span without steps): the launch queue. The
    derived columns are computed once (``cached_property``): read per step, a property
    recomputed over every step made the step documents quadratic in the steps."""

    host_start: np.ndarray  # µs, the step's host window
    host_end: np.ndarray
    backlog_start: np.ndarray  # int: activities launched and not started at host_start
    backlog_end: np.ndarray  # int: ...at host_end
    backlog_start_us: np.ndarray  # µs of device time launched and not done at host_start
    backlog_end_us: np.ndarray
    launch_queue_us: np.ndarray  # median launch call end → activity start (NaN: no launch)
    device_work_us: np.ndarray  # union of the step's own activities
    host_blocked_us: np.ndarray  # host time in syncs and collectives: waiting, not issuing
    pre_window: np.ndarray  # bool per device activity: backlog launched before the window
    # Host time waiting (syncs, collectives) or paying a one-time cost (compilation,
    # module loads): the union, so a sync inside an autotuning compile counts once.
    host_not_issuing_us: np.ndarray

    def __len__(self) -> int:
        return int(self.host_start.shape[0])

    @cached_property
    def host_period_us(self) -> np.ndarray:
        """The host's time for each step: one step issued every so many µs."""
        return self.host_end - self.host_start

    @cached_property
    def host_issue_us(self) -> np.ndarray:
        """The host's time for each step without its waits on the device (syncs) and on
        other ranks (collectives) and its one-time costs (compiling, loading modules): the
        time it takes, in steady state, to issue the step's work."""
        return np.maximum(self.host_period_us - self.host_not_issuing_us, 0.0)

    @cached_property
    def change_us(self) -> np.ndarray:
        """Queued device work at the step's end minus at its start."""
        return self.backlog_end_us - self.backlog_start_us

    @cached_property
    def host_limited(self) -> np.ndarray:
        """Bool per step: the device drains work queued earlier and the host issues less
        than the device consumes; in steady state the host is the limit. A host that
        waits in a sync or a collective lets the queue drain for the device's or the
        other ranks' sake, so only its issue time counts."""
        period, work = self.host_issue_us, self.device_work_us
        deficit = period - work
        shrink = -self.change_us
        return ((self.backlog_start_us > 0) & (work <= HOST_LIMITED_RATIO * period)
                & (deficit >= MIN_DEFICIT_US) & (shrink >= DRAIN_SHARE * deficit))

    @cached_property
    def device_limited(self) -> np.ndarray:
        """Bool per step: the queue grows across the step; the device is the limit."""
        return self.change_us >= np.maximum(TREND_SHARE * self.host_period_us, 1e-9)

    def trend(self, k: int) -> str | None:
        """``growing``, ``draining`` or ``steady``; None where nothing was queued."""
        start, end = float(self.backlog_start_us[k]), float(self.backlog_end_us[k])
        if start <= 0 and end <= 0:
            return None
        if self.device_limited[k]:
            return "growing"
        if -self.change_us[k] >= TREND_SHARE * self.host_period_us[k]:
            return "draining"
        return "steady"

    def trend_codes(self) -> np.ndarray:
        """:meth:`trend` of every step as its index in :data:`TRENDS` (-1: None), from the
        columns at once (one pass, not a pass over every step per step)."""
        idle = (self.backlog_start_us <= 0) & (self.backlog_end_us <= 0)
        draining = -self.change_us >= TREND_SHARE * self.host_period_us
        code = np.where(self.device_limited, 0, np.where(draining, 1, 2))
        return np.where(idle, -1, code)

    def trends(self) -> list[str | None]:
        """:meth:`trend` of every step (:meth:`trend_codes`' words)."""
        return [TRENDS[c] if c >= 0 else None for c in self.trend_codes().tolist()]

    def step_fields(self, k: int) -> dict[str, object]:
        """The step document's keys for window ``k``."""
        q = float(self.launch_queue_us[k])
        return {
            "backlog_start": int(self.backlog_start[k]),
            "backlog_end": int(self.backlog_end[k]),
            "backlog_start_us": round(float(self.backlog_start_us[k]), 3),
            "backlog_end_us": round(float(self.backlog_end_us[k]), 3),
            "backlog_trend": self.trend(k),
            "launch_queue_us": None if np.isnan(q) else round(q, 3),
            "host_period_us": round(float(self.host_period_us[k]), 3),
            "device_work_us": round(float(self.device_work_us[k]), 3),
            "host_blocked_us": round(float(self.host_blocked_us[k]), 3),
            "host_limited": bool(self.host_limited[k]),
        }


def _queued(launch: np.ndarray, start: np.ndarray, dur: np.ndarray,
            *times: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """At each time of each of ``times``: how many activities were launched before it and
    had not started (``launch < t <= start``, HTA's count), and the device time launched
    before it and not yet done (the running activities' remainder included). The sorts
    and running sums are made once for all of ``times`` (the steps' starts and ends)."""
    start = np.maximum(start, launch)  # a clock skew must not start work before its launch
    end = start + dur
    lo = np.argsort(launch, kind="stable")
    so = np.argsort(start, kind="stable")
    eo = np.argsort(end, kind="stable")
    launch_sorted, start_sorted, end_sorted = launch[lo], start[so], end[eo]
    dur_l, dur_e, start_s, start_e = (_sums(v) for v in (dur[lo], dur[eo], start[so],
                                                         start[eo]))
    out = []
    for t in times:
        n_l = np.searchsorted(launch_sorted, t, side="left")
        n_s = np.searchsorted(start_sorted, t, side="left")
        n_e = np.searchsorted(end_sorted, t, side="right")
        launched = dur_l[n_l]
        # Done by t: every finished activity, and of the running ones, t minus their start.
        done = dur_e[n_e] + t * (n_s - n_e) - (start_s[n_s] - start_e[n_e])
        out.append((n_l - n_s, np.maximum(launched - done, 0.0)))
    return out


def _sums(values: np.ndarray) -> np.ndarray:
    """The sums of the first ``n`` of ``values`` at ``[n]``: 0, then the running sum."""
    out = np.empty(values.shape[0] + 1)
    out[0] = 0.0
    np.cumsum(values, out=out[1:])  # no copy of the running sum behind the 0
    return out


def union_per_group(group: np.ndarray, start: np.ndarray, end: np.ndarray,
                    n: int) -> np.ndarray:
    """Per group ``0..n-1``: the length of the union of its ``[start, end)`` intervals."""
    out = np.zeros(n)
    if not group.size:
        return out
    order = np.lexsort((start, group))
    g, s, e = group[order].astype(np.int64), start[order], end[order]
    # A running maximum of the end within each group, exact: rank the ends, and key each
    # by (group, rank) as one integer, so no earlier group's end can exceed a later one's.
    rank_order = np.argsort(e, kind="stable")
    rank = np.empty(e.size, dtype=np.int64)
    rank[rank_order] = np.arange(e.size)
    reach = np.maximum.accumulate(g * e.size + rank)
    reach_end = e[rank_order][reach - g * e.size]  # the group's latest end so far
    first = np.r_[True, g[1:] != g[:-1]]
    new = first.copy()
    new[1:] |= s[1:] > reach_end[:-1]
    run_start = s[new]
    last = np.r_[np.flatnonzero(new)[1:] - 1, s.size - 1]
    lengths = reach_end[last] - run_start
    at = g[new]  # ascending: the groups are the sort's first key
    if at[0] >= 0 and at[-1] < n:
        # bincount adds each group's lengths in input order from 0.0, as np.add.at did:
        # the same floats, without add.at's cost per element (47 ms on a million steps).
        return np.bincount(at, weights=lengths, minlength=n)
    np.add.at(out, at, lengths)  # a group outside 0..n-1: as before
    return out


@computed
def launch_backlog(analysis: SpanAnalysis) -> LaunchBacklog:
    m = analysis.model
    hs = analysis.host_steps
    if len(hs):
        host_lo, host_hi = hs.host_start.astype(np.float64), hs.host_end.astype(np.float64)
    else:
        host_lo, host_hi = analysis.bounds
    n = host_lo.shape[0]
    acts = m.device_activity_rows
    launcher = m.launcher[acts]
    has = launcher >= 0
    pre = pre_window_activities(m)
    queued = has | pre
    launch_t = np.where(has, m.start[np.maximum(launcher, 0)], -np.inf)[queued]
    a_start, a_dur = m.start[acts][queued], m.dur[acts][queued]
    # A step that starts where the one before ends has that end's queue (the queue is a
    # figure of the time alone): only the other starts are searched (intervals.chained).
    chained = chained_starts(host_lo, host_hi)
    rest = None if chained is None else np.flatnonzero(~chained)
    (count_lo, work_lo), (count_hi, work_hi) = _queued(
        launch_t, a_start, a_dur, host_lo if rest is None else host_lo[rest], host_hi)
    if chained is not None:
        count_lo = from_previous_ends(count_hi, chained, rest, count_lo)
        work_lo = from_previous_ends(work_hi, chained, rest, work_lo)
    del chained, rest

    window = (analysis.activity_step if len(hs)
              else np.zeros(acts.shape[0], dtype=np.int64)).astype(np.int64)
    own = (window >= 0) & ~pre
    work = union_per_group(window[own], m.start[acts][own], m.end[acts][own], n)

    # Launch → start per launch call: the first activity it started (a graph launch
    # starts many; the later ones wait for the graph's own kernels, not for the queue).
    queue = np.full(n, np.nan)
    sel = np.flatnonzero(has & own)
    if sel.size:
        order = sel[np.lexsort((m.start[acts][sel], launcher[sel]))]
        first = order[np.r_[True, launcher[order][1:] != launcher[order][:-1]]]
        delay = np.maximum(m.start[acts][first] - m.end[launcher[first]], 0.0)
        w = window[first]
        by = np.lexsort((delay, w))  # by window, then delay: each window's delays sorted
        w, delay = w[by], delay[by]
        cuts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
        size = np.diff(np.r_[cuts, w.size])
        queue[w[cuts]] = (delay[cuts + (size - 1) // 2] + delay[cuts + size // 2]) / 2
    waits = analysis.sync_intervals | analysis.comm_intervals
    blocked = covered(waits, host_lo, host_hi)
    one_time = compile_intervals(analysis) | module_loads(analysis).intervals
    not_issuing = covered(waits | one_time, host_lo, host_hi) if len(one_time) else blocked
    return LaunchBacklog(host_start=host_lo, host_end=host_hi, backlog_start=count_lo,
                         backlog_end=count_hi, backlog_start_us=work_lo, backlog_end_us=work_hi,
                         launch_queue_us=queue, device_work_us=work, host_blocked_us=blocked,
                         pre_window=pre, host_not_issuing_us=not_issuing)
