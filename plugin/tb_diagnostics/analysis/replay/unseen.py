"""Copies that waited for device work the recording does not hold (the replay graph's
earliest starts, :mod:`.graph`)."""

from __future__ import annotations

import numpy as np

#: A stream's first copy in the window that started more than this many times later
#: after its launch than the same copy's other launches on the stream (or the device's
#: launch latency) waited for work the recording does not hold.
UNSEEN_WAIT_FACTOR = 4.0


def waited_unseen(delay: np.ndarray, a_prev: np.ndarray, a_cross: np.ndarray,
                  a_dev: np.ndarray, a_lane: np.ndarray, a_name: np.ndarray,
                  a_bytes: np.ndarray, is_copy: np.ndarray, pageable: np.ndarray,
                  a_dur: np.ndarray, latency: float) -> np.ndarray:
    """The copies that waited for device work queued before the window (the previous
    step's, not recorded): the first on their stream, with no recorded edge that explains
    their launch-to-start delay beside the same copies (name and bytes: a copy's delay
    grows with its size). Copies only: a kernel's first launch can be long on the host
    (loading its module: the H100 eager trace of ``pairs/`` starts its first layer_norm
    kernel 37.6 µs after the call, the later ones 5.2-6.1 µs), which a change may move.
    They start no earlier than they did: a change to what the window holds does not move
    what held them (ResNet-50 ``num_workers=0``, second
    span: the batch's copy starts 7.1 ms after its call, the same copy 0.13-0.14 ms in
    the later steps; with 4 workers the same copy waits 42.9 ms). Without a like copy to
    compare with, a copy from pageable memory may take as long as itself to start: the
    driver stages it through a pinned buffer first (TimeSformer's one 38.5 MB copy starts
    166 µs after its call and runs 3.46 ms; held as a wait, it held the whole step)."""
    first = np.flatnonzero(is_copy & (a_prev < 0) & (a_cross < 0) & (a_dev < 0)
                           & np.isfinite(delay))
    out = np.zeros(delay.shape[0], dtype=bool)
    for i in first.tolist():
        alike = (a_bytes == a_bytes[i]) | (np.isnan(a_bytes) & np.isnan(a_bytes[i]))
        same = np.flatnonzero((a_lane == a_lane[i]) & (a_name == a_name[i]) & alike
                              & np.isfinite(delay))
        same = same[same != i]
        if same.size:
            usual = max(float(np.median(delay[same])), latency)
        else:
            usual = max(float(a_dur[i]) if pageable[i] else 0.0, latency)
        out[i] = delay[i] > UNSEEN_WAIT_FACTOR * usual
    return out


__all__ = ["UNSEEN_WAIT_FACTOR", "waited_unseen"]
