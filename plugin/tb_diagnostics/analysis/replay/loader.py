"""What a DataLoader with worker processes still costs the training thread per batch.

The ``input`` change replaces the training thread's wait for the DataLoader by the
hand-off of a batch that worker processes made. That hand-off is not free, and the
before run shows what it moves: the batch's tensors and their bytes.

Measured on the shared pair ``traces/kineto_resnet50_v100_dataloader_workers0`` (before)
and ``..._workers4`` (after, 4 workers; V100 DGX Station, PyTorch 1.9, the
``file_descriptor`` sharing strategy), the 12 warm steps of each, medians:

- **receiving** (``_MultiProcessingDataLoaderIter.__next__``): 1,362.5 µs per batch of two
  tensors (inputs and labels). Inside it, each tensor's storage is rebuilt after an
  untraced stretch of 0.35-0.71 ms: its file descriptor comes over a socket from a
  resource-sharer thread in the worker, which needs the worker's GIL, held by the
  worker's transforms. So 681 µs per tensor, for workers busy in Python; the shared CPU
  pair in ``log/`` (``train_cnn``, 8 workers that sleep in ``__getitem__``) receives a
  batch in 37-41 µs. The figure is this pair's and depends on what the workers do.
- **releasing the previous batch** (between ``__next__`` and the first op, where the
  profiler records the previous batch's ``[memory]`` free): 2,643 µs after against
  55.5 µs before, 2,587.5 µs more for 19,267,584 bytes (4,704 pages of 4 KiB): 0.550 µs
  a page to unmap shared memory and free its pages.
- **copying it from shared memory** (the batch's ``cudaMemcpyAsync`` from pageable
  memory, in the steps where it did not wait for the device): 3,101 µs after against
  1,879 µs before, 1,222 µs more: 0.260 µs a page, the first touch of each freshly
  mapped page (a minor fault) as the driver stages it.

The two page costs are operating-system physics (per 4 KiB page), not this model's; a
loader that already runs in worker processes (``_MultiProcessingDataLoaderIter`` in the
before run) pays them in the recording already, and keeps only the receive.

The batch is what the before run moves after the wait: the host→device copies the thread
launches after it and before its first kernel (one per tensor, with their bytes), else
the CPU bytes the wait allocated and did not free (``[memory]`` events, one tensor at
least). A trace that shows neither keeps nothing: what it moves is not known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.categories import Kind

#: µs to receive one tensor of a batch from a worker: the ResNet-50 pair's median
#: ``__next__`` (1,362.5 µs) over its two tensors (see the module docstring).
RECEIVE_US_PER_TENSOR = 681.25
#: µs per 4 KiB page to release a batch in shared memory (ResNet-50 pair: 2,587.5 µs
#: more per 19,267,584-byte batch after than before).
SHM_RELEASE_US_PER_PAGE = 0.550
#: µs per 4 KiB page of the first touch of a batch freshly mapped from shared memory
#: (ResNet-50 pair: its copy to the device 1,222 µs longer after than before).
SHM_FAULT_US_PER_PAGE = 0.260
PAGE_BYTES = 4096
#: The iterator of a loader that already uses worker processes.
MULTIPROCESS_ITER = "_MultiProcessingDataLoaderIter"
#: Host-to-device copies, by name (what ``str.startswith`` found).
_HTOD = re.compile(r"^Memcpy HtoD")


@dataclass(frozen=True)
class LoaderWaits:
    """The training thread's DataLoader waits (the union of its DataLoader rows, per
    lane) and, per wait, what the hand-off of its batch by a worker would cost."""

    lane: np.ndarray  # int64 host lane
    start: np.ndarray  # float64 µs
    end: np.ndarray  # float64 µs
    tensors: np.ndarray  # int64: the batch's tensors the before run shows (0: unknown)
    nbytes: np.ndarray  # float64: their bytes
    multiprocess: np.ndarray  # bool: the loader already runs in worker processes

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @property
    def handoff_us(self) -> np.ndarray:
        """Per wait, the hand-off the training thread keeps: the receive per tensor and,
        for a loader that did not use workers yet, the shared-memory page costs."""
        pages = np.ceil(self.nbytes / PAGE_BYTES)
        shm = np.where(self.multiprocess, 0.0,
                       pages * (SHM_RELEASE_US_PER_PAGE + SHM_FAULT_US_PER_PAGE))
        return self.tensors * RECEIVE_US_PER_TENSOR + shm


def _waits(analysis: SpanAnalysis) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lane, start, end, multiprocess) of each wait: nested DataLoader rows (a Python
    ``__next__`` frame around its ``enumerate(DataLoader)`` label) are one wait."""
    m = analysis.model
    rows = analysis.input_rows
    lanes, starts, ends, multi = [], [], [], []
    for lane in sorted_sets.unique(m.lane[rows]).tolist():
        on = rows[m.lane[rows] == lane]
        on = on[np.argsort(m.start[on], kind="stable")]
        s, e = m.start[on], m.end[on]
        reach = np.maximum.accumulate(e)
        new = np.ones(on.size, dtype=bool)
        new[1:] = s[1:] >= reach[:-1]
        group = np.cumsum(new) - 1
        n = int(group[-1]) + 1
        g_end = np.full(n, -np.inf)
        np.maximum.at(g_end, group, e)
        is_multi = np.asarray([MULTIPROCESS_ITER in m.strings[int(x)] for x in m.name[on]])
        g_multi = np.zeros(n, dtype=bool)
        np.logical_or.at(g_multi, group, is_multi)
        lanes.append(np.full(n, lane, dtype=np.int64))
        starts.append(s[new])
        ends.append(g_end)
        multi.append(g_multi)
    if not lanes:
        z = np.zeros(0)
        return z.astype(np.int64), z, z, z.astype(bool)
    return (np.concatenate(lanes), np.concatenate(starts), np.concatenate(ends),
            np.concatenate(multi))


def _next_wait_start(lane: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per wait, the start of the next wait on its lane (inf for the last)."""
    until = np.full(start.shape[0], np.inf)
    for x in sorted_sets.unique(lane).tolist():
        on = np.flatnonzero(lane == x)
        on = on[np.argsort(start[on], kind="stable")]
        until[on[:-1]] = start[on[1:]]
    return until


def _window_sums(t: np.ndarray, w: np.ndarray, lo: np.ndarray,
                 hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How many of the sorted times ``t`` fall in each ``[lo, hi)``, and their weights'
    sum (``w``, in ``t``'s order)."""
    a = np.searchsorted(t, lo, side="left")
    b = np.searchsorted(t, hi, side="left")
    csum = np.concatenate([[0.0], np.cumsum(w)])
    return np.maximum(b - a, 0), np.where(b > a, csum[b] - csum[a], 0.0)


def _copied_batches(analysis: SpanAnalysis, lane: np.ndarray, start: np.ndarray,
                    end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per wait, the host→device copies its thread launches after it and before its first
    kernel launch (or the next wait): how many, and their bytes."""
    m = analysis.model
    acts = m.device_activity_rows
    call = m.launcher[acts]
    ok = call >= 0
    acts, call = acts[ok], call[ok]
    c_lane, c_start = m.lane[call], m.start[call]
    htod = m.name_ids_matching(_HTOD)
    is_copy = (m.kind[acts] == Kind.MEMCPY) & np.isin(m.name[acts], htod)
    is_kernel = m.kind[acts] == Kind.KERNEL
    until = _next_wait_start(lane, start)
    tensors = np.zeros(start.shape[0], dtype=np.int64)
    nbytes = np.zeros(start.shape[0])
    for x in sorted_sets.unique(lane).tolist():
        waits = np.flatnonzero(lane == x)
        lo, hi = end[waits], until[waits]
        kernel_t = np.sort(c_start[(c_lane == x) & is_kernel])
        at = np.searchsorted(kernel_t, lo, side="left")
        first = np.where(at < kernel_t.size, kernel_t[np.minimum(at, kernel_t.size - 1)],
                         np.inf) if kernel_t.size else np.full(lo.shape, np.inf)
        on = np.flatnonzero((c_lane == x) & is_copy)
        on = on[np.argsort(c_start[on], kind="stable")]
        count, total = _window_sums(c_start[on], np.nan_to_num(m.nbytes[acts[on]]), lo,
                                    np.minimum(first, hi))
        tensors[waits], nbytes[waits] = count, total
    return tensors, nbytes


def _allocated_batches(analysis: SpanAnalysis, lane: np.ndarray, start: np.ndarray,
                       end: np.ndarray) -> np.ndarray:
    """Per wait, the CPU bytes it allocated and did not free (``[memory]`` events on its
    thread): the batch it returns. 0 without memory events."""
    mem = analysis.model.memory
    out = np.zeros(start.shape[0])
    if not len(mem):
        return out
    for x in sorted_sets.unique(lane).tolist():
        waits = np.flatnonzero(lane == x)
        on = np.flatnonzero((mem.device_type == 0) & (mem.lane == x))
        on = on[np.argsort(mem.ts[on], kind="stable")]
        # The wait's end included: a free recorded at its last µs is the wait's.
        t = mem.ts[on]
        a = np.searchsorted(t, start[waits], side="left")
        b = np.searchsorted(t, end[waits], side="right")
        csum = np.concatenate([[0.0], np.cumsum(mem.nbytes[on])])
        out[waits] = np.maximum(np.where(b > a, csum[b] - csum[a], 0.0), 0.0)
    return out


def loader_waits(analysis: SpanAnalysis) -> LoaderWaits:
    """The span's DataLoader waits and the batch each returned (see the module
    docstring)."""
    lane, start, end, multi = _waits(analysis)
    tensors, nbytes = _copied_batches(analysis, lane, start, end)
    allocated = _allocated_batches(analysis, lane, start, end)
    # Without copies the batch stays on the host: its allocation is the batch.
    use_alloc = (tensors == 0) & (allocated > 0)
    tensors = np.where(use_alloc, 1, tensors)
    nbytes = np.where(use_alloc, allocated, nbytes)
    return LoaderWaits(lane=lane, start=start, end=end, tensors=tensors, nbytes=nbytes,
                       multiprocess=multi)
