"""The JSON writer encodes a long list's chunks in forked workers and this process
together (``chunks_on_cores``, issue 28: a span of 10⁶ steps wrote its rows on one core).

Checked: the chunks come in order and equal one process's; a chunk a worker fails on, or
a worker that dies, is encoded here (an error is raised here, as without workers); a
reader that stops early leaves no process behind; the serial cases do not fork; and the
report's JSON is the same bytes with and without workers.
"""

from __future__ import annotations

import os
import signal
import sys

import msgspec
import pytest
from test_streamed_json import _as_list, _columns

import tb_diagnostics.chunks_on_cores as coc
from tb_diagnostics.lazy_rows import LazyRows
from tb_diagnostics.output import json_chunks

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the writer forks on Linux only")


@pytest.fixture
def three_workers(monkeypatch):
    """Fork three workers whatever this machine's cores: the order and the fallbacks are
    what is checked. Yields the PIDs forked.

    Earlier tests in this process leave idle daemon threads (the tab's pools, readers), so
    the writer would not fork here; these tests let it, as the report command does once it
    has ended its own idle readers. Other children of this process (a test's server) are
    not ours to count: each forked PID is checked, not "any child".
    """
    monkeypatch.setattr(coc, "usable_cores", lambda: 4)
    monkeypatch.setattr(coc, "other_threads_running", lambda: False)
    monkeypatch.setattr(coc, "MIN_PARALLEL_SECONDS", 0.0)  # however quick the chunks
    monkeypatch.delenv("TB_DIAGNOSTICS_SERIAL_WRITE", raising=False)
    pids: list[int] = []
    real_fork = os.fork

    def recording_fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recording_fork)
    return pids


def _none_left(pids: list[int]) -> bool:
    """Every PID forked has been reaped (waitpid on it fails: no such child)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


def _body(k: int) -> bytes:
    return f"[{k}]".encode() * (k % 7 + 1)


@linux_only
def test_chunks_come_in_order_and_equal_one_process(three_workers):
    n = 50
    assert list(coc.chunks_on_cores(_body, n)) == [_body(k) for k in range(n)]
    assert len(three_workers) == 3
    assert _none_left(three_workers)


def _fail_in_worker(k: int) -> None:
    """A worker's failure on chunk 5 or 22: an error it reports."""
    if k in (5, 22):
        raise MemoryError("worker only")


def _die_in_worker(k: int) -> None:
    """A worker's death on chunk 9: killed, it reports nothing."""
    if k == 9:
        os.kill(os.getpid(), signal.SIGKILL)


@linux_only
@pytest.mark.parametrize("failure", [_fail_in_worker, _die_in_worker],
                         ids=["fails on a chunk", "dies"])
def test_a_workers_chunk_it_fails_or_dies_on_is_encoded_here(three_workers, failure):
    parent = os.getpid()

    def encode(k: int) -> bytes:
        if os.getpid() != parent:
            failure(k)
        return _body(k)

    assert list(coc.chunks_on_cores(encode, 40)) == [_body(k) for k in range(40)]
    assert len(three_workers) == 3
    assert _none_left(three_workers)


@linux_only
def test_an_error_is_raised_here_and_no_worker_is_left(three_workers):
    def encode(k: int) -> bytes:
        if k == 17:
            raise ValueError("chunk 17")
        return _body(k)

    got = []
    with pytest.raises(ValueError, match="chunk 17"):
        for body in coc.chunks_on_cores(encode, 40):
            got.append(body)
    assert got == [_body(k) for k in range(17)]
    assert len(three_workers) == 3
    assert _none_left(three_workers)


@linux_only
def test_a_reader_that_stops_early_leaves_no_process(three_workers):
    chunks = coc.chunks_on_cores(_body, 200)
    assert [next(chunks) for _ in range(5)] == [_body(k) for k in range(5)]
    chunks.close()
    assert len(three_workers) == 3
    assert _none_left(three_workers)


def test_serial_cases_do_not_fork(monkeypatch):
    def no_fork():
        raise AssertionError("forked")

    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.setattr(coc, "usable_cores", lambda: 4)
    expected = [_body(k) for k in range(40)]
    assert list(coc.chunks_on_cores(_body, coc.MIN_CHUNKS - 1)) == expected[:coc.MIN_CHUNKS - 1]
    monkeypatch.setenv("TB_DIAGNOSTICS_SERIAL_WRITE", "1")
    assert list(coc.chunks_on_cores(_body, 40)) == expected
    monkeypatch.delenv("TB_DIAGNOSTICS_SERIAL_WRITE")
    monkeypatch.setattr(coc, "usable_cores", lambda: 1)
    assert list(coc.chunks_on_cores(_body, 40)) == expected
    monkeypatch.setattr(coc, "usable_cores", lambda: 4)
    monkeypatch.setattr(coc.threading, "active_count", lambda: 2)  # another thread runs
    assert coc.other_threads_running()
    assert list(coc.chunks_on_cores(_body, 40)) == expected


@linux_only
@pytest.mark.parametrize("indent", [0, 2])
def test_the_report_json_is_the_same_bytes_with_workers(three_workers, monkeypatch, indent):
    n = 40 * 64 + 5
    keys, cols = _columns(n)
    doc = {"spans": [{"span": "1", "steps": LazyRows.from_columns(keys, cols, n),
                      "numbers": list(range(70_000))}]}
    forked = b"".join(json_chunks(doc, rows_per_chunk=64, indent=indent))
    monkeypatch.setenv("TB_DIAGNOSTICS_SERIAL_WRITE", "1")
    serial = b"".join(json_chunks(doc, rows_per_chunk=64, indent=indent))
    assert forked == serial
    expected = {"spans": [{"span": "1", "steps": _as_list(keys, cols),
                           "numbers": list(range(70_000))}]}
    assert msgspec.json.decode(forked) == msgspec.json.decode(msgspec.json.encode(expected))
    assert len(three_workers) == 3
    assert _none_left(three_workers)


@linux_only
def test_a_list_quick_to_encode_is_encoded_here(three_workers, monkeypatch):
    # Chunk 0 is encoded here and timed: the rest at its pace under MIN_PARALLEL_SECONDS
    # is not worth a fork (of a process that may hold gigabytes); over it, workers help.
    import time

    monkeypatch.setattr(coc, "MIN_PARALLEL_SECONDS", 0.1)
    assert list(coc.chunks_on_cores(_body, 40)) == [_body(k) for k in range(40)]
    assert three_workers == []

    def slow(k: int) -> bytes:
        time.sleep(0.01)
        return _body(k)

    assert list(coc.chunks_on_cores(slow, 40)) == [_body(k) for k in range(40)]
    assert len(three_workers) == 3
    assert _none_left(three_workers)
