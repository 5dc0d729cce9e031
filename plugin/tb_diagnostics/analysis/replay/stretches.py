"""The replay's pass over the graph, a stretch at a time (issue 28: a million steps).

The replay (:mod:`.engine`) visits every host timepoint and device activity in recorded
order. Each *chain* (a host thread's timepoints, a stream's activities) is a max-plus
recurrence: a node starts at ``s = max(X, v_prev + a)`` and ends at ``v = s + b``, where
``v_prev`` is the chain's previous node, ``a`` the time between them (the host's recorded
time less what a change removes, the stream's gap), ``b`` the node's own duration (0 on the
host) and ``X`` what it waits for on other chains: a device activity its launch call, the
other stream's activity it waited for, the bound on overlap, its floor; a host timepoint
the device work that released its sync, another thread's burst (a join or an anchor).

**Stretches.** An edge into another chain's node that is visited in the same stretch of
the order would need that node first; the order is cut so that no stretch holds both ends
of such an edge (the fewest cuts: :func:`stretch_cuts`), except a launch: within a stretch
the host's chains are replayed first, then the device's. A long stretch is replayed with
numpy (:func:`_vector_stretch`); a short one, and a run of short ones, node by node as
before (:func:`_loop_block`), where numpy's cost per call is more than the loop's.

**The same floats.** Along a chain the recurrence's value is a sum added one term after
another from the node that last bound it (a *reset*: ``X`` won the max). Numpy's
``add.accumulate`` adds in that order, so each run from a reset is the loop's sums, bit
for bit (:func:`segmented_accumulate`). Where the resets are is first estimated from prefix
sums (a running maximum of ``X - S``), then checked exactly, every node's max against
its predecessor's replayed value; a wrong guess is flipped and the chain added again
(the first wrong one is always right after the flip, so the rounds make progress), and a
stretch still wrong after :data:`MAX_ROUNDS` rounds is replayed node by node.

Values are kept by visit position (:mod:`.order`), one slot past the end holding 0.0: an
edge into a node the order visits later reads 0.0 there.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from tb_diagnostics.analysis.replay.order import Nodes

#: Stretches of fewer nodes than this are replayed node by node: numpy's per-call cost of
#: a vectorised stretch (a few hundred µs) is more than the loop's (about 1 µs a node).
MIN_VECTOR_NODES = 512
#: A longer stretch is replayed in pieces of at most this many nodes, one after the other.
#: Any position may cut the order (each piece reads the ones before it, as a stretch reads
#: the stretches before it), so the floats are the same; a piece's temporaries, some
#: twenty arrays of its size, stay small (one stretch of a 10⁶-step span's 5 M nodes held
#: about 0.9 GB of them).
MAX_VECTOR_NODES = 1 << 18
#: Runs up to this long are summed a column at a time, longer ones as padded rows.
NARROW = 8
#: Rounds of flipping wrongly guessed resets before a stretch is replayed node by node.
MAX_ROUNDS = 8


def segmented_accumulate(ufunc: np.ufunc, x: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``ufunc.accumulate`` of ``x`` restarted where ``first`` is set (``first[0]`` is),
    each run computed in order, as a loop would. Runs of like length go together: short
    ones a column at a time, long ones as the rows of one array (``accumulate(axis=1)``
    adds along each row in order), a run alone with one call."""
    if not x.size:
        return x.copy()
    starts = np.flatnonzero(first)
    if starts.size == 1:
        return ufunc.accumulate(x)
    lens = np.diff(np.append(starts, x.size))
    out = x.copy()
    long = lens > 1
    if not long.any():
        return out
    bucket = np.zeros(lens.shape[0], dtype=np.int64)
    bucket[long] = np.ceil(np.log2(lens[long])).astype(np.int64)
    for w in np.flatnonzero(np.bincount(bucket[long])).tolist():
        sel = np.flatnonzero(bucket == w)
        width = int(lens[sel].max())
        if sel.size == 1:
            s = int(starts[sel[0]])
            out[s:s + width] = ufunc.accumulate(x[s:s + width])
        elif width <= NARROW:
            # Column by column: each run's k-th value from its (k-1)-th, every run at once.
            at, left = starts[sel], lens[sel]
            for k in range(1, width):
                on = left > k
                at, left = at[on], left[on]
                out[at + k] = ufunc(out[at + k - 1], x[at + k])
        else:
            # Rows padded to the bucket's longest (at most twice the values it holds); the
            # padding sits after each row's run and never enters a value that is kept.
            cols = np.arange(width)
            idx = starts[sel][:, None] + cols
            valid = cols < lens[sel][:, None]
            acc = ufunc.accumulate(x[np.where(valid, idx, 0)], axis=1)
            out[idx[valid]] = acc[valid]
    return out


def stretch_cuts(targets: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """The fewest positions that cut the order between each edge's source and target.

    Each edge (``sources[k]`` < ``targets[k]``, ``targets`` sorted and unique, the latest
    source per target) needs a cut ``c`` with source < c <= target. Greedily, the first
    cut is the first target; the next, the first target whose source is at or after the
    last cut (every edge before it has its source before the cut). That next target is
    found for every target at once (a suffix minimum), then followed cut to cut.
    """
    m = targets.shape[0]
    if not m:
        return targets
    # tau[u]: the last target at or before u's source: a cut at targets[t] leaves u's edge
    # uncut exactly when t <= tau[u].
    tau = np.searchsorted(targets, sources, side="right") - 1
    nxt = np.full(m + 1, m, dtype=np.int64)
    ok = tau >= 0
    np.minimum.at(nxt, tau[ok], np.flatnonzero(ok))
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]
    out, t = [], 0
    nxt_l = nxt.tolist()
    while t < m:
        out.append(t)
        t = nxt_l[t]
    return targets[np.asarray(out, dtype=np.int64)]


def _cut_edges(nd: Nodes) -> tuple[np.ndarray, np.ndarray]:
    """Per node that reads another chain's node other than its launch: (its position,
    the latest such source's position), in position order."""
    gp = nd.p
    src = gp.cut_src
    syncs = np.flatnonzero(gp.h_sync_src >= 0)
    syncs = syncs[nd.h_waits[syncs]]
    if syncs.size:
        src = src.copy()
        src[gp.h_pos[syncs]] = gp.h_sync_src[syncs]  # their other sources are none
    tgt = np.flatnonzero(src >= 0)
    return tgt, src[tgt]


def _chain_scan(first: np.ndarray, has_init: np.ndarray, init: np.ndarray, x: np.ndarray,
                a: np.ndarray, b: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """Exact ``s = max(x, v_prev + a)``, ``v = s + b`` along chains laid end to end
    (``first``: a chain's first node in the stretch, whose ``v_prev`` is ``init`` where
    ``has_init``, none otherwise). (s, v), or None where the resets do not settle."""
    m = x.shape[0]
    forced = first & ~has_init
    waits = np.isfinite(x) & ~forced
    if waits.any():
        # Estimate: v ~ S + max(init, max_{j<=k} (x_j + b_j - S_j)), S the chain's sums.
        a0 = np.where(forced, 0.0, a)
        ab = a0 if b is None else a0 + b
        sums = segmented_accumulate(np.add, ab, first)
        r = (x if b is None else x + b) - sums
        r_init = np.where(first & has_init, init, -np.inf)
        best = segmented_accumulate(np.maximum, np.maximum(r, r_init), first)
        reset = forced | ((r >= best) & waits)
    else:  # nothing waits on another chain: each chain one sum from its start
        reset = forced
    prev = np.empty(m)
    for _ in range(MAX_ROUNDS):
        elem = np.where(reset, x, a)
        cont = first & ~reset  # continues from the value before the stretch
        elem[cont] = init[cont] + a[cont]
        seg = first | reset
        if b is None:
            v = segmented_accumulate(np.add, elem, seg)
            s = v
        else:
            inter = np.empty(2 * m)
            inter[0::2] = elem
            inter[1::2] = b
            seg2 = np.zeros(2 * m, dtype=bool)
            seg2[0::2] = seg
            acc = segmented_accumulate(np.add, inter, seg2)
            s, v = acc[0::2], acc[1::2]
        prev[1:] = v[:-1]
        prev[first] = init[first]
        chained = prev + a
        wrong = ~forced & ((reset & (x < chained)) | (~reset & (x > chained)))
        if not wrong.any():
            return s, v
        reset = reset ^ wrong
    return None


@dataclass
class _State:
    nd: Nodes
    v: np.ndarray  # per position (and the slot past the end): host time, activity end
    s: np.ndarray  # per position: activity start


def _vector_stretch(st: _State, b0: int, b1: int) -> bool:
    """Replay positions [b0, b1) with numpy; False where its resets do not settle (the
    loop then replays the whole stretch again)."""
    nd, V, S = st.nd, st.v, st.s
    gp = nd.p
    dev = gp.dev[b0:b1]
    node = gp.node[b0:b1]
    hs = node[~dev]
    if hs.size:
        hs, first = _by_lane(hs, gp.h_lane)
        has_init = gp.h_pred[hs] >= 0
        init = np.zeros(hs.size)
        f = np.flatnonzero(first & has_init)
        init[f] = V[gp.h_pred[hs[f]]]
        x = np.full(hs.size, -np.inf)
        a = nd.h_delta(hs)
        # Only a few timepoints are more than the previous one plus the time between.
        k = np.flatnonzero(gp.h_special[hs])
        i = hs[k]
        anchor, join, rel = gp.h_anchor[i], gp.h_join[i], gp.h_release[i]
        xk, ak, tail = x[k], a[k], gp.h_tail[i]
        later = (anchor < 0) & has_init[k]
        is_join = later & (join >= 0)
        is_sync = later & ~is_join & (rel >= 0)
        ak[is_sync] = np.minimum(ak[is_sync], tail[is_sync])
        waits = is_sync & nd.h_waits[i]
        xk[waits] = V[rel[waits]] + tail[waits]
        xk[is_join] = V[join[is_join]] + nd.h_join_after[i][is_join]
        ak[is_join] = 0.0
        alone = (anchor < 0) & ~has_init[k]
        xk[alone] = nd.h_first(i[alone])
        on = anchor >= 0
        xk[on] = (V[anchor[on]] + gp.h_anchor_after[i][on]) - nd.h_since[i][on]
        ak[on] = 0.0
        x[k], a[k] = xk, ak
        got = _chain_scan(first, has_init, init, x, a, None)
        if got is None:
            return False
        V[gp.h_pos[hs]] = got[1]  # the device's launches read them below
    acts = node[dev]
    if acts.size:
        acts, first = _by_lane(acts, gp.a_lane)
        pred = gp.a_prev[acts]
        has_init = pred >= 0
        init = np.zeros(acts.size)
        f = np.flatnonzero(first & has_init)
        init[f] = V[pred[f]]
        j, c, d = gp.a_launch[acts], gp.a_cross[acts], gp.a_dev[acts]
        x = np.where(j >= 0, V[np.maximum(j, 0)] + gp.a_lat[acts], -np.inf)
        x = np.maximum(x, np.where(c >= 0, V[np.maximum(c, 0)] + gp.a_cross_lat[acts],
                                   -np.inf))
        dd = np.maximum(d, 0)
        bound = np.where(gp.a_dev_end[acts], V[dd], S[dd])
        x = np.maximum(x, np.where(d >= 0, bound, -np.inf))
        x = np.maximum(x, gp.a_floor[acts])
        alone = ~gp.a_any[acts]  # waits for nothing in the trace: it stays
        x[alone] = gp.a_start[acts][alone]
        got = _chain_scan(first, has_init, init, x, nd.a_gap[acts], nd.a_dur[acts])
        if got is None:  # the loop rewrites the whole stretch
            return False
        at = gp.a_pos[acts]
        S[at] = got[0]
        V[at] = got[1]
    return True


def _loop_block(st: _State, b0: int, b1: int) -> None:
    """Replay positions [b0, b1) node by node, as the replay always did."""
    nd, V, S = st.nd, st.v, st.s
    gp = nd.p
    dev = gp.dev[b0:b1]
    node = gp.node[b0:b1]
    hs, acts = node[~dev], node[dev]
    refs = [gp.h_pred[hs], gp.h_anchor[hs], gp.h_release[hs], gp.h_join[hs],
            gp.a_launch[acts], gp.a_prev[acts], gp.a_cross[acts], gp.a_dev[acts]]
    every = np.concatenate(refs)
    # The nodes before the block (and the slot past the end) it reads, each once: a sort
    # (numpy's hashing unique is slow on many distinct ints).
    ext = np.sort(every[(every >= 0) & ((every < b0) | (every >= b1))])
    ext = ext[np.concatenate(([True], ext[1:] != ext[:-1]))] if ext.size else ext
    n_ext = ext.shape[0]

    def local(r: np.ndarray) -> list[int]:
        inside = (r >= b0) & (r < b1)
        at = np.where(inside, n_ext + r - b0, np.searchsorted(ext, r))
        return np.where(r < 0, -1, at).tolist()

    (h_pred, h_anchor, h_rel, h_join, a_launch, a_prev, a_cross, a_dev) = map(local, refs)
    v = V[ext].tolist() + [0.0] * (b1 - b0)
    sv = S[ext].tolist() + [0.0] * (b1 - b0)
    h_first, h_delta = nd.h_first(hs).tolist(), nd.h_delta(hs).tolist()
    h_after, h_since = gp.h_anchor_after[hs].tolist(), nd.h_since[hs].tolist()
    h_tail, h_waits = gp.h_tail[hs].tolist(), nd.h_waits[hs].tolist()
    h_join_after = nd.h_join_after[hs].tolist()
    a_lat, a_gap, a_cross_lat = (gp.a_lat[acts].tolist(), nd.a_gap[acts].tolist(),
                                 gp.a_cross_lat[acts].tolist())
    a_dev_end, a_floor = gp.a_dev_end[acts].tolist(), gp.a_floor[acts].tolist()
    a_start, a_dur = gp.a_start[acts].tolist(), nd.a_dur[acts].tolist()
    neg_inf = -np.inf
    q = n_ext  # this node's slot
    kh = ka = 0  # its index among the block's host timepoints / device activities
    for is_dev in dev.tolist():
        if is_dev:
            i = ka
            ka += 1
            ready = neg_inf
            j = a_launch[i]
            if j >= 0:
                ready = v[j] + a_lat[i]
            p = a_prev[i]
            if p >= 0 and v[p] + a_gap[i] > ready:
                ready = v[p] + a_gap[i]
            c = a_cross[i]
            if c >= 0 and v[c] + a_cross_lat[i] > ready:
                ready = v[c] + a_cross_lat[i]
            if ready == neg_inf:  # nothing it waits for is in the trace: it stays
                s = a_start[i]
            else:
                d = a_dev[i]
                if d >= 0:  # no further into another stream's work than recorded
                    bound = v[d] if a_dev_end[i] else sv[d]
                    if bound > ready:
                        ready = bound
                s = ready if ready > a_floor[i] else a_floor[i]
            sv[q] = s
            v[q] = s + a_dur[i]
            q += 1
            continue
        i = kh
        kh += 1
        p = h_pred[i]
        k = h_anchor[i]
        if k >= 0:  # a burst on another thread: as long after the main thread's event
            T = v[k] + h_after[i] - h_since[i]
            if p >= 0 and v[p] > T:
                T = v[p]
        elif p < 0:  # a lane's first timepoint stays where it was
            T = h_first[i]
        else:
            delta = h_delta[i]
            T = v[p] + delta
            r = h_rel[i]
            if r >= 0:
                # A sync returns when the device work it waited for is done, plus the
                # call's own tail: its host part is at most that tail.
                T = v[p] + min(delta, h_tail[i])
                if h_waits[i]:
                    T = max(T, v[r] + h_tail[i])
            j = h_join[i]
            if j >= 0:  # it waited for another thread's burst: it returns after it
                T = max(v[p], v[j] + h_join_after[i])
        v[q] = T
        q += 1
    V[b0:b1] = v[n_ext:]
    S[b0:b1] = sv[n_ext:]


def run(nd: Nodes, min_vector: int = MIN_VECTOR_NODES) -> np.ndarray:
    """Every node's replayed value by position (host time, activity end), and the slot
    past the end; stretches of ``min_vector`` nodes or more with numpy, in pieces of at
    most :data:`MAX_VECTOR_NODES`."""
    n = nd.p.n
    st = _State(nd, np.zeros(n + 1), np.zeros(n + 1))
    tgt, src = _cut_edges(nd)
    cuts = stretch_cuts(tgt, src).tolist()
    bounds = sorted({0, n, *cuts})
    b0 = 0  # start of the run of short stretches not yet replayed
    for lo, hi in pairwise(bounds):
        if hi - lo < min_vector:
            continue
        if b0 < lo:
            _loop_block(st, b0, lo)
        pieces = -(-(hi - lo) // MAX_VECTOR_NODES)
        edges = [lo + (hi - lo) * k // pieces for k in range(pieces + 1)]
        for p0, p1 in pairwise(edges):
            if not _vector_stretch(st, p0, p1):
                _loop_block(st, p0, p1)
        b0 = hi
    if b0 < n:
        _loop_block(st, b0, n)
    return st.v


def _by_lane(nodes: np.ndarray, lane_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``nodes`` grouped by lane (stable: visit order within each), and where each
    lane's run begins."""
    lane = lane_of[nodes]
    if np.any(lane != lane[0]):
        nodes = nodes[np.argsort(lane, kind="stable")]
        lane = lane_of[nodes]
    first = np.ones(nodes.size, dtype=bool)
    first[1:] = lane[1:] != lane[:-1]
    return nodes, first
