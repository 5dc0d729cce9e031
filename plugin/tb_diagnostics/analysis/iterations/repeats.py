"""Iterations from a unit that repeats at the top level of the main thread: a
``record_function`` label, a model's forward, a sequence of ops.

A repeating unit is only a guess, so it must pass two tests a script's loop passes:

- it is top-level: no single ``nn.Module`` forward encloses two of its occurrences (the
  identical layers of one forward repeat too, and are not iterations);
- its windows hold nearly all of the main thread's activity from the first window on
  (``MIN_COVERAGE``), and a fair share of all of it (``MIN_LOOP_SHARE``): a profiled loop
  runs to the end of the recording after its set-up, while a unit that repeats by chance
  (two ``aten::detach`` calls in one long forward) holds a sliver of it.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.iterations.lane import (
    DATALOADER,
    LABEL_KINDS,
    OPTIMIZER_STEP,
    OPTIMIZER_ZERO_GRAD,
    Lane,
    make_lane,
    module_frames,
    outermost,
    pick,
)
from tb_diagnostics.analysis.iterations.slices import slice_groups
from tb_diagnostics.analysis.iterations.windows import (
    EDGE_PERIODS,
    PERIOD_AGREEMENT,
    Iterations,
    windows,
)
from tb_diagnostics.analysis.views.distinct import unique
from tb_diagnostics.trace.categories import STEP_NAME, Kind
from tb_diagnostics.trace.model import TraceModel

#: The windows of a repeating unit hold at least this share of the main thread's
#: activity: of its op and runtime call time, or of the device time it launched. A
#: profiled loop leaves out only what ran before its first iteration and after its last
#: (setup, a final synchronize); 90 % allows that and rejects a chance repeat.
MIN_COVERAGE = 0.9
#: ... and at least this share of all of it, before the first included: a unit repeating
#: by chance at the tail of a long run is not its loop, while a benchmark's set-up (model
#: build, weights upload, CUDA context) may take longer than the loop it prepares.
MIN_LOOP_SHARE = 0.25
#: A repeating sequence of ops holds at least this many top-level calls over all its
#: repeats: two or three calls of one op are as often how one forward moves its inputs
#: as a loop.
MIN_REPEATED_CALLS = 4
#: Host gaps at every q-th repeat of a unit that are this many times the other gaps (by
#: median, all of them above the others' 90th percentile) mark a loop around q repeats.
LOOP_GAP_RATIO = 1.25
#: ... seen at least this many times (one loop boundary by chance is too easy).
MIN_LOOP_SEAMS = 3
#: At most this many repeats of a unit are grouped into one iteration (the deepest models
#: have about a hundred identical layers); bounds the search.
MAX_BLOCKS = 128

_RUN_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER)


class Rejected(Exception):
    """A repeating unit that is not the script's iterations, and why (for the note)."""


def coverage(m: TraceModel, lane: Lane, lo: float, hi: float,
             since: float = -np.inf) -> float:
    """Share of the main thread's activity from ``since`` on that lies inside
    ``[lo, hi)``: the larger of its share of op and runtime call time (outermost calls,
    so nested ones count once) and its share of the device time launched from the
    thread."""
    run = np.flatnonzero(np.isin(m.kind[lane.rows], _RUN_KINDS))
    run = run[outermost(lane.start[run], lane.end[run])]
    s, e = lane.start[run], lane.end[run]
    total = float(np.clip(e - np.maximum(s, since), 0.0, None).sum())
    inside = float(np.sum(np.clip(e, lo, hi) - np.clip(s, lo, hi)))
    host = inside / total if total > 0 else 0.0
    dev = m.device_activity_rows
    launcher = m.launcher[dev].astype(np.int64)
    mine = launcher >= 0
    mine[mine] = m.lane[launcher[mine]] == lane.lane_id
    dur, at = m.dur[dev[mine]], m.start[launcher[mine]]
    total = float(dur[at >= since].sum())
    device = float(dur[(at >= lo) & (at < hi)].sum()) / total if total > 0 else 0.0
    return max(host, device)


def check(m: TraceModel, lane: Lane, found: Iterations | None, what: str) -> Iterations | None:
    """``found`` if it passes the top-level and coverage tests; raises :class:`Rejected`."""
    if found is None:
        return None
    frames = module_frames(m, lane.lane_id)
    if frames.size:
        inside = (np.searchsorted(found.host_start, m.end[frames], side="left")
                  - np.searchsorted(found.host_start, m.start[frames], side="left"))
        if inside.max() >= 2:
            f = int(frames[int(np.argmax(inside))])
            raise Rejected(f"{what} repeats {int(inside.max())} times inside one forward "
                           f"({m.name_of(f).removeprefix('nn.Module: ')}): layers, not "
                           "iterations")
    lo, hi = float(found.host_start[0]), float(found.host_end[-1])
    share = coverage(m, lane, lo, hi, since=lo)
    if share < MIN_COVERAGE:
        raise Rejected(f"the {len(found)} repeats of {what} hold {share:.0%} of the main "
                       f"thread's activity from the first on (iterations need "
                       f"{MIN_COVERAGE:.0%})")
    share = coverage(m, lane, lo, hi)
    if share < MIN_LOOP_SHARE:
        raise Rejected(f"the {len(found)} repeats of {what} hold {share:.0%} of the main "
                       f"thread's activity (iterations need {MIN_LOOP_SHARE:.0%})")
    return found


def label(m: TraceModel, lane: Lane) -> Iterations | None:
    ann = np.flatnonzero(m.kind[lane.rows] == Kind.USER_ANNOTATION)
    if not ann.size:
        return None
    skip = (OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD, DATALOADER, STEP_NAME)
    found: dict[str, np.ndarray] = {}
    for sid in unique(m.name[lane.rows[ann]]).tolist():
        s = m.strings[sid]
        if any(p.search(s) for p in skip):
            continue
        p = ann[m.name[lane.rows[ann]] == sid]
        p = p[outermost(lane.start[p], lane.end[p])]
        if p.size >= 2:
            found[s] = p
    if not found:
        return None
    # The shallowest labels; a label repeating inside an iteration is deeper, or repeats
    # more often than most labels at its depth.
    depth = {n: int(lane.depth[p].min()) for n, p in found.items()}
    shallow = min(depth.values())
    found = {n: p for n, p in found.items() if depth[n] == shallow}
    counts = np.bincount([p.size for p in found.values()])
    n_common = int(np.flatnonzero(counts == counts.max())[0])
    found = {n: p for n, p in found.items() if p.size == n_common}
    name, pos = pick(found, lane, latest=False)
    it = windows(m, lane, pos, f"the repeating record_function label {name!r}")
    return check(m, lane, it, f"the label {name!r}")


def module_forward(m: TraceModel, lane: Lane) -> Iterations | None:
    """The outermost ``nn.Module`` forward frames (Python rows) of the main thread."""
    rows = module_frames(m, lane.lane_id)
    if rows.size < 2:
        return None
    rows = rows[outermost(m.start[rows], m.end[rows])]
    names, inverse = np.unique(m.name[rows], return_inverse=True)
    counts = np.bincount(inverse)
    if counts.max() < 2:
        return None
    # The model's forward: the outermost module called most, the earliest on ties.
    best = int(np.flatnonzero(counts == counts.max())[0])
    picked = rows[inverse == best]
    with_frames = make_lane(m, sorted_sets.union1d(lane.rows, picked), lane.lane_id)
    pos = np.searchsorted(with_frames.rows, picked)
    module = m.strings[int(names[best])].removeprefix("nn.Module: ")
    it = windows(m, with_frames, pos, f"the repeating forward of {module}", widen_each=False)
    return check(m, lane, it, f"the forward of {module}")


def signature(m: TraceModel, lane: Lane) -> Iterations | None:
    """Top-level ops that repeat alike: for each repeat count, smallest first, the names
    repeating that often, validated to fall once into each window, the windows cut where
    the host pauses between repeats (the loop's own time) and grouped by the loop's
    period, and checked like every repeating unit. The first count that passes wins."""
    level = np.flatnonzero((lane.depth == 0) & np.isin(m.kind[lane.rows], LABEL_KINDS))
    # A single wrapper around everything: the level below it is the loop's.
    while level.size == 1:
        inner = np.flatnonzero((lane.depth == lane.depth[level[0]] + 1)
                               & (lane.start >= lane.start[level[0]])
                               & (lane.end <= lane.end[level[0]])
                               & np.isin(m.kind[lane.rows], LABEL_KINDS))
        if not inner.size:
            return None
        level = inner
    if level.size < 2:
        return None
    names, inverse = np.unique(m.name[lane.rows[level]], return_inverse=True)
    counts = np.bincount(inverse)
    rejected: Rejected | None = None
    for n_iter in unique(counts[counts >= 2]).tolist():
        try:
            found = _signature_of(m, lane, level, names, inverse, counts, n_iter)
        except Rejected as why:
            rejected = rejected or why
            continue
        if found is not None:
            return found
    if rejected is not None:
        raise rejected
    return None


def _signature_of(m: TraceModel, lane: Lane, level: np.ndarray, names: np.ndarray,
                  inverse: np.ndarray, counts: np.ndarray, n_iter: int) -> Iterations | None:
    alike = np.flatnonzero(counts == n_iter)
    firsts = [int(level[np.flatnonzero(inverse == k)[0]]) for k in alike.tolist()]
    anchor = alike[int(np.argmin(lane.start[firsts]))]
    at = np.flatnonzero(inverse == anchor)  # indices into level
    cuts = lane.start[level[at]]
    # Each name of the signature once per window, for most of the names.
    once = 0
    for k in alike.tolist():
        w = np.searchsorted(cuts, lane.start[level[inverse == k]], side="right") - 1
        once += bool(np.array_equal(np.sort(w), np.arange(n_iter)))
    if once < max(1, 2 * alike.size / 3):
        return None
    at, grouped = _loop_cuts(lane, level, inverse, at)
    if at[-1] - at[0] + np.median(np.diff(at)) < MIN_REPEATED_CALLS:
        return None
    what = f"top-level ops starting with {m.strings[int(names[inverse[at[0]]])]}"
    source = f"a repeating sequence of {what}"
    if grouped > 1:
        source += (f" ({grouped} repeats per iteration, cut where the host pauses between "
                   "them)")
    it = windows(m, lane, level[at], source, widen_each=False)
    if it is None or not _alike(lane, level, inverse, it):
        return None
    return check(m, lane, it, f"the sequence of {what}")


def _alike(lane: Lane, level: np.ndarray, inverse: np.ndarray, it: Iterations) -> bool:
    """Whether the windows hold the same sequence of top-level ops, in at least
    ``PERIOD_AGREEMENT`` of them: a loop repeats all of its ops, not a few (the input and
    the target both made by ``randn`` and ``to`` in one iteration are not two). The last
    window may stop short, or run on a little into what followed the loop."""
    at = np.searchsorted(lane.start[level], np.append(it.host_start, it.host_end[-1]))
    mode_count = _mode_slice(inverse, at[:-1])
    if mode_count is None:  # fingerprints collided: a tuple per window tells
        seqs = [tuple(inverse[a:b].tolist()) for a, b in itertools.pairwise(at)]
        mode, count = Counter(seqs[:-1]).most_common(1)[0]
    else:
        mode, count = mode_count
    last = tuple(inverse[at[-2]:at[-1]].tolist())
    n_seqs = at.shape[0] - 1
    n = len(mode)
    ran_on = last[:n] == mode and len(last) <= EDGE_PERIODS * n
    same = count + (ran_on or mode[:len(last)] == last)
    return same >= PERIOD_AGREEMENT * n_seqs


def _mode_slice(inverse: np.ndarray, at: np.ndarray) -> tuple[tuple[int, ...], int] | None:
    """``Counter(slices).most_common(1)[0]`` of the slices ``inverse[at[k]:at[k + 1]]``
    as tuples: the commonest, the first seen among equally common ones, and its count,
    from their groups (:func:`.slices.slice_groups`). None where that cannot tell."""
    if at.shape[0] < 2:
        return None  # no slice: Counter's own error, on the tuples' path
    group = slice_groups(inverse, at)
    if group is None:
        return None
    count = np.bincount(group)
    best = int(np.argmax(count))  # groups are numbered by first slice: the first seen
    k = int(np.flatnonzero(group == best)[0])
    return tuple(inverse[at[k]:at[k + 1]].tolist()), int(count[best])


def _same_run(inverse: np.ndarray, cuts: np.ndarray, b: int, length: int) -> np.ndarray:
    """Per cut ``c``: ``np.array_equal(inverse[c:c + length], inverse[b:b + length])``,
    for every cut at once (slices cut short at the end compare by their length)."""
    n = inverse.shape[0]
    unit = inverse[b:b + length]
    size = np.minimum(length, n - cuts)
    out = size == unit.shape[0]
    sel = np.flatnonzero(out)
    # Compared a block of cuts at a time: cuts x length stays a few MB.
    step = max(1, (1 << 20) // max(unit.shape[0], 1))
    for a in range(0, sel.shape[0], step):
        s = sel[a:a + step]
        idx = cuts[s][:, None] + np.arange(unit.shape[0])
        out[s] = (inverse[idx] == unit).all(axis=1)
    return out


def _loop_cuts(lane: Lane, level: np.ndarray, inverse: np.ndarray,
               at: np.ndarray) -> tuple[np.ndarray, int]:
    """Where a periodic run of top-level calls is cut into iterations, and how many
    repeats of the unit each holds.

    When the unit is always the same number of calls, it starts at the call the host
    waits longest before (in a loop, the script's own time between iterations: the loop,
    the call into the model). When the waits before every q-th repeat stand out from the
    others (``LOOP_GAP_RATIO``), q repeats are one iteration: a model of q identical
    blocks, called in a loop, repeats its block q times per iteration.
    """
    spans = np.diff(at)
    if at.size < 2 or not np.all(spans == spans[0]):
        return at, 1
    length = int(spans[0])
    gap = np.full(level.shape[0], np.nan)
    gap[1:] = lane.start[level[1:]] - lane.end[level[:-1]]
    # The seam: the call of the unit preceded by the longest median pause.
    offsets = [np.nanmedian(gap[(at + s)[at + s < level.shape[0]]]) for s in range(length)]
    seam = int(np.nanargmax(offsets)) if not np.all(np.isnan(offsets)) else 0
    b = int(at[0]) + seam
    # Back to the first repeat of the run (the unit may start before the anchor).
    while b - length >= 0 and np.array_equal(inverse[b - length:b], inverse[b:b + length]):
        b -= length
    cuts = np.arange(b, level.shape[0], length)
    cuts = cuts[_same_run(inverse, cuts, b, length)]
    if cuts.size < at.size:
        cuts = at  # not one periodic run (a repeat by chance): the anchor's own repeats
    g = gap[cuts]
    best = (1, 0)
    for q in range(2, min(cuts.size // MIN_LOOP_SEAMS, MAX_BLOCKS) + 1):
        # After the first (cold) iteration, one row per iteration, one column per phase:
        # the loop's seams are the column whose every pause beats the other pauses.
        k = (cuts.size - q) // q
        if k < MIN_LOOP_SEAMS:
            break
        grid = g[q:q + q * k].reshape(k, q)
        r = int(np.argmax(grid.min(axis=0)))
        seams, rest = grid[:, r], np.delete(grid, r, axis=1).ravel()
        if (seams.min() > np.quantile(rest, 0.9)
                and np.median(seams) >= LOOP_GAP_RATIO * np.median(rest)):
            best = (q, r)
            break
    q, r = best
    return (cuts[r::q] if q > 1 else cuts), q
