"""The JSON of a long list encoded on every core, written in order (issue 28: a span of a
million steps spent 15 s of its 57 s in one core encoding its step rows while the other
cores idled).

:func:`chunks_on_cores` gives ``encode(0)``, ``encode(1)``, … ``encode(n - 1)`` in order.
This process encodes chunks 0 and 1 and times them. Where the list is worth it, it then
forks workers that share the process's memory copy-on-write (the packed columns the
chunks are read from are not copied): with W processes in all, worker w encodes chunks
2 + w, 2 + w + W, … and sends each down its own pipe, while this process encodes chunks
2, 2 + W, … and reads the others' as their turn comes. A worker runs at most one chunk
ahead (its pipe holds one), so memory stays at a chunk per process whatever the reader's
speed, and the bytes are the same as encoding in one process: the same function encodes
each chunk.

It encodes in this process alone where the rest of the list would take less than
:data:`MIN_PARALLEL_SECONDS` at the pace of the quicker of chunks 0 and 1, where fork is
not the platform's way (Windows, macOS: forking there is unsafe with system frameworks
loaded), on one core, for few chunks, where another thread runs (a fork copies only the
forking thread, not what the others hold locked), and under
``TB_DIAGNOSTICS_SERIAL_WRITE=1``. A worker that fails on a chunk says so and this process
encodes that chunk itself, so an error is raised here, as it would be without workers; a
worker that dies is replaced by this process too.
"""

from __future__ import annotations

import gc
import os
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

#: Fewer chunks than this are encoded here: forking costs a few ms per GB of the process.
MIN_CHUNKS = 16
#: Workers at most (the lists are written a chunk at a time: more would wait on the pipe).
MAX_WORKERS = 7
#: A list whose chunks would take less than this in all, at its first chunk's pace, is
#: encoded here: a fork of a process holding a span of 10⁶ steps (1.4 GB) and the pages
#: it then copies on write cost 45-90 ms, more than the 7 MB lists of step numbers and
#: the 48 MB what-if rows of that span take on one core (16-100 ms).
MIN_PARALLEL_SECONDS = 0.2

_HEADER = struct.Struct("<q")  # a chunk's length, or -1: "encode it yourself"
_FAILED = -1


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def other_threads_running() -> bool:
    """Whether a thread besides this one is alive: a fork would copy the locks it holds."""
    return threading.active_count() > 1


def _workers_for(n: int) -> int:
    if (n < MIN_CHUNKS or not sys.platform.startswith("linux")
            or os.environ.get("TB_DIAGNOSTICS_SERIAL_WRITE") == "1"
            or other_threads_running()):
        return 0
    return max(0, min(usable_cores() - 1, MAX_WORKERS, n - 1))


def chunks_on_cores(encode: Callable[[int], bytes], n: int) -> Iterator[bytes]:
    """``encode(k)`` for k = 0 … n - 1, in order, encoded by forked workers and this
    process together where that is possible (see the module docstring)."""
    workers = _workers_for(n)
    if not workers:
        for k in range(n):
            yield encode(k)
        return
    # The first two chunks here, timed: where the rest would take less than
    # MIN_PARALLEL_SECONDS at the quicker one's pace (the first may pay for warming up),
    # they are encoded here too.
    paces = []
    for k in range(2):
        started = time.perf_counter()
        body = encode(k)
        paces.append(time.perf_counter() - started)
        yield body
    if min(paces) * (n - 2) < MIN_PARALLEL_SECONDS:
        for k in range(2, n):
            yield encode(k)
        return
    total = workers + 1
    pipes: list[tuple[int, IO[bytes] | None]] = []
    finished = False
    try:
        for w in range(1, total):
            pid, fh = _fork_worker(encode, range(2 + w, n, total))
            pipes.append((pid, fh))
        for k in range(2, n):
            w = (k - 2) % total
            if w == 0:
                yield encode(k)
                continue
            pid, fh = pipes[w - 1]
            body = _read_chunk(fh) if fh is not None else None
            if body is None:  # the worker failed on it, or is gone: encode it here
                if fh is not None:
                    fh.close()
                    pipes[w - 1] = (pid, None)
                    _reap(pid, kill=True)
                yield encode(k)
            else:
                yield body
        finished = True
    finally:
        # Read to the end, each worker has written its last chunk and is exiting; stopped
        # early (the reader closed us, an error), it is killed.
        for pid, fh in pipes:
            if fh is not None:
                fh.close()
                _reap(pid, kill=not finished)


def _fork_worker(encode: Callable[[int], bytes], ks: range) -> tuple[int, IO[bytes]]:
    read, write = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(write, 1031, 1 << 20)  # F_SETPIPE_SZ: a chunk in flight, not 64 KB
    except (ImportError, OSError):
        pass
    for stream in (sys.stdout, sys.stderr):  # else both would write what they buffer
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    pid = os.fork()
    if pid == 0:  # the worker: never returns
        code = 0
        try:
            os.close(read)
            # A collection would write to every tracked object's header, copying the
            # shared pages; the chunks' objects hold no cycles.
            gc.disable()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            out = os.fdopen(write, "wb", buffering=0)
            for k in ks:
                try:
                    body = encode(k)
                except BaseException:  # the parent encodes it, and raises
                    out.write(_HEADER.pack(_FAILED))
                    break
                out.write(_HEADER.pack(len(body)))
                out.write(body)
        except BaseException:  # a closed pipe: the parent stopped reading
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    return pid, os.fdopen(read, "rb")


def _read_chunk(fh: IO[bytes]) -> bytes | None:
    head = fh.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    if size < 0:
        return None
    body = fh.read(size)
    return body if len(body) == size else None


def _reap(pid: int, kill: bool) -> None:
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError, OSError):
        pass
