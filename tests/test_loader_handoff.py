"""The ``input`` change keeps the batch's hand-off on the training thread: a loader with
worker processes still receives each batch, and one without them before also pays the
shared-memory pages of the bytes the run moves (``analysis.replay.loader``)."""

from __future__ import annotations

import numpy as np
import pytest
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.replay.changes import input_change
from tb_diagnostics.analysis.replay.engine import replay
from tb_diagnostics.analysis.replay.loader import (
    PAGE_BYTES,
    RECEIVE_US_PER_TENSOR,
    SHM_FAULT_US_PER_PAGE,
    SHM_RELEASE_US_PER_PAGE,
    loader_waits,
)

SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
PER_PAGE = SHM_RELEASE_US_PER_PAGE + SHM_FAULT_US_PER_PAGE
IMAGES = 1000 * PAGE_BYTES  # the batch's inputs: 1,000 pages
LABELS = 256  # and its labels: one page


def _steps(b: TraceBuilder, loader: str = SINGLE, wait_us: float = 20_000.0,
           n: int = 3, copies: bool = True, first_delay_us: float = 2.0) -> list[float]:
    """Host-bound steps: a DataLoader wait, the batch's two copies to the device (inputs
    and labels, from pageable memory), then one op launching a 100 µs kernel. The first
    copy starts ``first_delay_us`` after its call (2 µs in the later steps). Each step ends
    when its kernel does, and the next starts there. Returns the steps' starts."""
    t0, starts = 0.0, []
    for s in range(n):
        starts.append(t0)
        mark = b.step(s + 1, t0, 0.0)
        b.annotation(loader, t0 + 10, wait_us)
        t = t0 + 20 + wait_us
        if copies:
            for nbytes, dur in ((IMAGES, 300.0), (LABELS, 5.0)):
                b.op("aten::to", t, dur + 10)
                delay = first_delay_us if s == 0 and nbytes == IMAGES else 2.0
                corr = b.runtime("cudaMemcpyAsync", t + 2, dur + delay + 3)
                b.device("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t + 2 + delay, dur,
                         corr, bytes=nbytes)
                t += dur + delay + 18
        b.op("aten::mm", t, 20)
        b.launch("gemm", t + 5, t + 20, 100)
        mark["dur"] = t + 121 - t0
        t0 += mark["dur"]
    return starts


def _saved(a) -> np.ndarray:
    before = np.asarray([w.wall_us for w in a.windows])
    return before - replay(a, input_change(a)).wall_us


def test_a_loader_without_workers_keeps_the_receive_and_the_pages_it_moves(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b)
    a = b.analysis()
    waits = loader_waits(a)
    assert waits.tensors.tolist() == [2, 2, 2]
    assert waits.nbytes.tolist() == [IMAGES + LABELS] * 3
    handoff = 2 * RECEIVE_US_PER_TENSOR + (1000 + 1) * PER_PAGE
    assert waits.handoff_us == pytest.approx([handoff] * 3)
    # Host-bound steps: each loses its wait but the hand-off, which stays where the batch
    # arrives (the wait's end).
    assert _saved(a)[:2] == pytest.approx([20_000.0 - handoff] * 2, abs=1e-6)


def test_a_loader_already_in_workers_keeps_only_the_receive(tmp_path):
    """Its recording already pays the shared-memory pages (release, first touch)."""
    b = TraceBuilder(tmp_path)
    _steps(b, loader=MULTI)
    a = b.analysis()
    waits = loader_waits(a)
    assert waits.multiprocess.all()
    assert waits.handoff_us == pytest.approx([2 * RECEIVE_US_PER_TENSOR] * 3)
    assert _saved(a)[:2] == pytest.approx([20_000.0 - 2 * RECEIVE_US_PER_TENSOR] * 2,
                                          abs=1e-6)


def test_a_wait_no_longer_than_its_handoff_saves_nothing(tmp_path):
    b = TraceBuilder(tmp_path)
    _steps(b, wait_us=1_000.0)  # under the two tensors' receive alone
    a = b.analysis()
    assert input_change(a) is None


def test_without_copies_the_batch_is_what_the_wait_allocated_and_kept(tmp_path):
    """A batch that stays on the host (CPU training): the ``[memory]`` events inside the
    wait, an allocation freed there and the batch that is not, give its bytes."""
    b = TraceBuilder(tmp_path)
    for t0 in _steps(b, n=2, copies=False):
        b.memory(t0 + 100, 602_112, device_type=0, device_id=-1)  # one sample, freed
        b.memory(t0 + 200, -602_112, device_type=0, device_id=-1)
        b.memory(t0 + 19_000, IMAGES, device_type=0, device_id=-1)  # the collated batch
        b.memory(t0 + 19_500, 4096, device_type=1)  # device memory is not the batch
    a = b.analysis()
    waits = loader_waits(a)
    assert waits.tensors.tolist() == [1, 1]
    assert waits.nbytes.tolist() == [IMAGES, IMAGES]
    assert waits.handoff_us == pytest.approx([RECEIVE_US_PER_TENSOR + 1000 * PER_PAGE] * 2)


def test_a_trace_that_shows_no_batch_keeps_no_handoff(tmp_path):
    """Neither copies nor memory events: what the wait hands over is not known, and the
    whole wait goes, as before."""
    b = TraceBuilder(tmp_path)
    _steps(b, copies=False)
    a = b.analysis()
    assert loader_waits(a).handoff_us.tolist() == [0.0, 0.0, 0.0]
    assert _saved(a)[:2] == pytest.approx([20_000.0] * 2, abs=1e-6)


def test_nested_dataloader_frames_are_one_wait(tmp_path):
    """A Python ``__next__`` frame around the ``enumerate(DataLoader)`` label is one wait,
    with one batch."""
    b = TraceBuilder(tmp_path)
    starts = _steps(b, n=2)
    for t0 in starts:
        b.python("torch/utils/data/dataloader.py(521): __next__", t0 + 5, 20_010.0)
    a = b.analysis()
    waits = loader_waits(a)
    assert len(waits) == 2
    assert waits.start.tolist() == [t0 + 5.0 for t0 in starts]
    assert waits.tensors.tolist() == [2, 2]


def test_a_copy_that_waited_for_work_before_the_window_does_not_move(tmp_path):
    """The window's first copy starts 1.5 ms after its call, the same copy 2 µs after in
    the later steps: it waited for device work queued before the window (the previous
    step's), which the fix does not move. The first step saves only the launch gaps the
    host left after that copy (the labels' copy and the kernel now follow it at once:
    54 µs here), not its wait."""
    b = TraceBuilder(tmp_path)
    _steps(b, first_delay_us=1_500.0)
    handoff = 2 * RECEIVE_US_PER_TENSOR + (1000 + 1) * PER_PAGE
    assert 0.0 <= _saved(b.analysis())[0] < 60.0
    # A copy whose first delay is the usual one moves with its call.
    b2 = TraceBuilder(tmp_path / "usual")
    _steps(b2)
    assert _saved(b2.analysis())[0] == pytest.approx(20_000.0 - handoff, abs=1.0)
