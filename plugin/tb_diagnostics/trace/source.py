"""The bytes of one trace file: opened once, as what it is, read with bounded waits.

A local trace is opened exactly once (``O_NOFOLLOW``, ``O_NONBLOCK``), refused unless
``fstat`` calls it a regular file, and every part of it (the stream, the whole-file
fallback, the parallel load's ranges in other processes) is read from that descriptor
with ``os.pread``: a file renamed over it meanwhile is never read, so two files cannot
be spliced into one model. Opening by path several times could not promise that.

A read that does not return (a stalled NFS or FUSE mount) must not hold a loader for
ever: reads run in a helper thread, and the loader waits at most
:func:`read_timeout` seconds for each one, then gives up on the file (the stuck thread is
a daemon and is abandoned; it ends when its read does).
"""

from __future__ import annotations

import itertools
import os
import queue
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

READ_TIMEOUT_ENV = "TB_DIAGNOSTICS_READ_TIMEOUT_S"
DEFAULT_READ_TIMEOUT_S = 60.0
#: Reads a helper runs ahead of its loader (:meth:`BoundedCalls.ahead`): 1 MiB of 256 KiB
#: blocks, enough that the next one is mostly read when the loader asks for it.
AHEAD_CALLS = 4
#: Without ``O_NONBLOCK`` opening a FIFO waits for a writer; it changes nothing for
#: regular files. ``O_NOFOLLOW``: a symbolic link swapped in after the scan is not
#: followed out of the log dir.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_KINDS = [(stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link (not followed)")]


class NotRegularFile(Exception):
    """The path is not a regular file (a FIFO, a device, a symbolic link…)."""


class ReadStalled(Exception):
    """A read of the file gave no answer within :func:`read_timeout` seconds."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"no data for {timeout:g} s (a stalled network file system?)")
        self.timeout = timeout


def read_timeout() -> float | None:
    """Seconds one read may take (``$TB_DIAGNOSTICS_READ_TIMEOUT_S``, default 60); None
    (wait for ever) where the variable is 0 or negative."""
    env = os.environ.get(READ_TIMEOUT_ENV)
    try:
        value = float(env) if env else DEFAULT_READ_TIMEOUT_S
    except ValueError:
        value = DEFAULT_READ_TIMEOUT_S
    if value != value:  # NaN
        value = DEFAULT_READ_TIMEOUT_S
    return value if value > 0 else None


class BoundedCalls:
    """Runs calls in a helper thread and waits for each at most ``timeout`` seconds.

    One helper per file being read, so a stalled file delays only its own loader. A
    queue handoff costs tens of microseconds, nothing next to a 256 KiB block; helpers
    are kept for the next file (starting a thread costs more than reading a small one),
    except one that stalled, which is abandoned."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._helper: _Helper | None = None
        self._stalled = False

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.timeout is None:
            return fn(*args)
        if self._stalled:  # the helper is still stuck in an earlier call
            raise ReadStalled(self.timeout)
        if self._helper is None:
            self._helper = _Helper.take()
        self._helper.todo.put((fn, args))
        try:
            ok, value = self._helper.done.get(timeout=self.timeout)
        except queue.Empty:
            self._stalled = True
            raise ReadStalled(self.timeout) from None
        if not ok:
            raise value
        return value

    def ahead(self, fn: Callable[..., Any], calls: Iterable[tuple[Any, ...]],
              depth: int = AHEAD_CALLS) -> Iterator[Any]:
        """``fn(*args)`` for each ``args`` of ``calls``, in order, the helper running up to
        ``depth`` of them ahead of the caller; each answer waited for at most the timeout.

        One handoff per call costs a wake-up of the helper and one of the caller: on a
        machine whose every core is busy (the parallel load's processes) each waits for a
        core, milliseconds; ahead, the next answer is mostly there already. The answers
        the caller did not take (it stopped early) are waited out, so that no later call
        reads one of them as its own."""
        if self.timeout is None:
            for args in calls:
                yield fn(*args)
            return
        if self._stalled:
            raise ReadStalled(self.timeout)
        if self._helper is None:
            self._helper = _Helper.take()
        helper = self._helper
        todo = iter(calls)
        pending = 0
        try:
            for args in itertools.islice(todo, depth):
                helper.todo.put((fn, args))
                pending += 1
            while pending:
                ok, value = self._answer(helper)
                pending -= 1
                if not ok:
                    raise value
                for args in itertools.islice(todo, 1):
                    helper.todo.put((fn, args))
                    pending += 1
                yield value
        finally:
            while pending and not self._stalled:
                try:
                    self._answer(helper)
                except ReadStalled:
                    break
                pending -= 1

    def _answer(self, helper: _Helper) -> tuple[bool, Any]:
        try:
            return helper.done.get(timeout=self.timeout)
        except queue.Empty:
            self._stalled = True
            raise ReadStalled(self.timeout or 0.0) from None

    def close(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.give_back(stuck=self._stalled)


#: Idle helpers, kept for the next file (at most as many as loaders run at once, here 16).
_IDLE: list[_Helper] = []
_IDLE_LOCK = threading.Lock()
_KEEP_IDLE = 16


def _forget_idle_helpers() -> None:
    # A forked child has none of its parent's threads: their helpers would never answer.
    global _IDLE_LOCK
    _IDLE.clear()
    _IDLE_LOCK = threading.Lock()


def end_idle_readers(timeout: float = 1.0) -> None:
    """End the idle helpers' threads (a later load starts new ones): a process about to
    fork workers (``chunks_on_cores``) then has no other thread."""
    with _IDLE_LOCK:
        idle = list(_IDLE)
        _IDLE.clear()
    for helper in idle:
        helper.todo.put(None)
    for helper in idle:
        helper.thread.join(timeout)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_idle_helpers)


class _Helper:
    """A daemon thread that runs the calls put in ``todo`` and answers in ``done``."""

    def __init__(self) -> None:
        self.todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="tb-diagnostics-read",
                                       daemon=True)
        self.thread.start()

    @staticmethod
    def take() -> _Helper:
        with _IDLE_LOCK:
            if _IDLE:
                return _IDLE.pop()
        return _Helper()

    def give_back(self, stuck: bool) -> None:
        if not stuck:
            with _IDLE_LOCK:
                if len(_IDLE) < _KEEP_IDLE:
                    _IDLE.append(self)
                    return
        # Ends once its call returns; a stuck helper's late answer is never read, as it
        # serves no one again.
        self.todo.put(None)

    def _serve(self) -> None:
        while True:
            job = self.todo.get()
            if job is None:
                return
            fn, args = job
            try:
                self.done.put((True, fn(*args)))
            except BaseException as exc:  # handed to the waiting loader, which raises it
                self.done.put((False, exc))


class PinnedReader:
    """A file-like reader of one descriptor at its own offset (``os.pread``): readers in
    several threads or processes sharing the descriptor never move each other's place."""

    def __init__(self, fd: int, calls: BoundedCalls, pos: int = 0) -> None:
        self._fd = fd
        self._calls = calls
        self._pos = pos

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = []
            while chunk := self.read(1 << 20):
                parts.append(chunk)
            return b"".join(parts)
        data = self._calls.call(pread_at, self._fd, n, self._pos)
        self._pos += len(data)
        return data

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            pos += self._pos
        elif whence != os.SEEK_SET:
            raise ValueError("PinnedReader seeks from the start or the current offset only")
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos


def pread_at(fd: int, n: int, offset: int) -> bytes:
    """``os.pread``; where there is none (Windows), a seek and a read under a lock, which
    keeps one process's readers of the descriptor apart."""
    pread = getattr(os, "pread", None)
    if pread is not None:
        return pread(fd, n, offset)
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, n)


_SEEK_LOCK = threading.Lock()


def describe_mode(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO"), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


class LocalTrace:
    """One local file, opened once; a context manager that closes it.

    Raises :class:`NotRegularFile` for anything but a regular file, ``OSError`` where the
    file cannot be opened."""

    def __init__(self, path: str) -> None:
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError:
            # A symbolic link (ELOOP under O_NOFOLLOW) or a socket (ENXIO) cannot even be
            # opened: say what it is rather than the errno.
            try:
                what = describe_mode(os.lstat(path).st_mode)
            except OSError:
                what = None
            if what is not None:
                raise NotRegularFile(_refusal(what)) from None
            raise
        try:
            st = os.fstat(fd)
            what = describe_mode(st.st_mode)
            if what is not None:
                raise NotRegularFile(_refusal(what))
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.path = path
        self.stat = st
        self.calls = BoundedCalls(read_timeout())

    @property
    def size(self) -> int:
        return self.stat.st_size

    def reader(self, pos: int = 0) -> PinnedReader:
        return PinnedReader(self.fd, self.calls, pos)

    def differs_from(self, size: int | None, mtime: float | None) -> bool:
        """Whether the open file is not the one a listing saw (``size``, ``mtime``)."""
        if size is None or mtime is None:
            return False
        return self.stat.st_size != size or self.stat.st_mtime != mtime

    def changed(self) -> bool:
        """Whether the file was written to since it was opened (its size or mtime moved)."""
        now = os.fstat(self.fd)
        return (now.st_size, now.st_mtime_ns) != (self.stat.st_size, self.stat.st_mtime_ns)

    def close(self) -> None:
        self.calls.close()
        os.close(self.fd)

    def __enter__(self) -> LocalTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _refusal(what: str) -> str:
    return f"is {what}" if what.endswith("(not followed)") else f"is {what}, not a regular file"
