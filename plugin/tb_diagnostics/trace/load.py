"""Read one trace file (local path or any fsspec URL) into a :class:`TraceModel`.

Files are decoded piecewise (:mod:`.stream`) so memory stays near the size of
the model rather than the file; a file that cannot be cut into pieces is
decoded whole, which also produces the precise message for a broken file.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from typing import IO

from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.storage import is_local, local_path, open_binary
from tb_diagnostics.trace.build import ModelBuilder, build_model
from tb_diagnostics.trace.compressed import CorruptStream, UnreadableFormat
from tb_diagnostics.trace.decode import decode
from tb_diagnostics.trace.model import TraceModel
from tb_diagnostics.trace.source import (
    BoundedCalls,
    LocalTrace,
    NotRegularFile,
    ReadStalled,
    read_timeout,
)
from tb_diagnostics.trace.stream import (
    NotJSON,
    NotStreamable,
    TraceTooLarge,
    inflate_budget_set,
    iter_event_batches,
    max_trace_bytes,
    read_blocks,
    whole_file_limit,
)

#: What a file opened for reading gives: a context manager of a binary reader.
Opener = Callable[[], contextlib.AbstractContextManager[IO[bytes]]]


def load_trace_bytes(raw: bytes, path: str) -> TraceModel:
    """Build the model from the file's bytes (compressed or plain JSON); ``path`` names it
    in errors. The bytes are read as a file's are: same formats, same limits."""
    return _load(lambda: contextlib.nullcontext(io.BytesIO(raw)), path, stream=False)


def _open_error(shown: str, exc: OSError) -> TraceLoadError:
    if isinstance(exc, FileNotFoundError):
        return TraceLoadError(shown, "file not found (deleted while reading?)")
    if isinstance(exc, PermissionError):
        return TraceLoadError(shown, "permission denied")
    return TraceLoadError(shown, f"cannot read file ({exc})")


class ListingOutdated(TraceLoadError):
    """The file is no longer the version a listing saw (another size or mtime): ``model``
    is the file as it is now, read whole from one descriptor; the caller uses it but keeps
    nothing under the listing's key (the same size and mtime may come back with the old
    content). A caller that does not catch it reports the file as changed."""

    def __init__(self, path: str, model: TraceModel) -> None:
        super().__init__(path, "changed since the log dir was listed (it is read again "
                               "once it is listed again)")
        self.model = model


def load_trace(url: str, display_path: str | None = None,
               expect: tuple[int | None, float | None] | None = None) -> TraceModel:
    """Open ``url`` read-only and build its model.

    ``expect`` is the (size, mtime) a listing saw: a local file that is no longer that
    one raises :class:`ListingOutdated`, which holds its model. Raises
    :class:`TraceLoadError` (naming ``display_path`` or the URL) when the file cannot be
    read, is not a regular file, changes while it is read, or is not a usable trace.
    """
    shown = display_path or url
    if not is_local(url):
        return _load(lambda: _remote(url), shown)
    try:
        source = LocalTrace(local_path(url))
    except NotRegularFile as exc:
        raise TraceLoadError(shown, str(exc)) from None
    except OSError as exc:
        raise _open_error(shown, exc) from None
    with source:
        outdated = expect is not None and source.differs_from(*expect)
        model = _load_on_cores(source, shown)
        if model is None:
            model = _load(lambda: contextlib.nullcontext(source.reader()), shown)
        try:
            changed = source.changed()
        except OSError as exc:
            raise _open_error(shown, exc) from None
    if changed:
        raise TraceLoadError(shown, "changed while it was being read (it is read again "
                                    "on the next look)")
    if outdated:
        raise ListingOutdated(shown, model)
    return model


@contextlib.contextmanager
def _remote(url: str) -> Iterator[IO[bytes]]:
    with open_binary(url) as fh:
        yield _TimedFile(fh, BoundedCalls(read_timeout()))


class _TimedFile:
    """A remote file whose reads wait at most the read timeout."""

    def __init__(self, fh: IO[bytes], calls: BoundedCalls) -> None:
        self._fh = fh
        self._calls = calls

    def read(self, n: int = -1) -> bytes:
        return self._calls.call(self._fh.read, n)


def _load(open_file: Opener, shown: str, stream: bool = True) -> TraceModel:
    """Stream the file into a model; a file that does not stream is decoded whole."""
    try:
        if stream:
            with open_file() as fh:
                builder = ModelBuilder(shown)
                for item in iter_event_batches(read_blocks(fh)):
                    if not isinstance(item, list):
                        return builder.finish(item)
                    builder.add(item)
                    del item  # before the next batch is decoded (peak memory)
    except NotStreamable:
        pass  # decode it whole below: odd layouts load, broken files get exact messages
    except (NotJSON, TraceTooLarge, UnreadableFormat, ReadStalled) as exc:
        raise TraceLoadError(shown, str(exc)) from None
    except CorruptStream as exc:
        raise TraceLoadError(shown, exc.problem) from None
    except OSError as exc:
        raise _open_error(shown, exc) from None
    try:
        with open_file() as fh:
            # Whole-file decoding holds the text and its parse at once: same limit.
            raw = b"".join(read_blocks(fh, limit=whole_file_limit()))
    except (TraceTooLarge, UnreadableFormat, ReadStalled) as exc:
        raise TraceLoadError(shown, str(exc)) from None
    except CorruptStream as exc:
        raise TraceLoadError(shown, exc.problem) from None
    except OSError as exc:
        raise _open_error(shown, exc) from None
    return build_model(decode(raw, shown), shown)


def _load_on_cores(source: LocalTrace, shown: str) -> TraceModel | None:
    """A big local file decoded on several cores (:mod:`.parallel`), the same model as one
    core builds; None where it is loaded on one core (small, compressed, in a pool's
    worker, under an inflate budget) or the parallel load gave up."""
    from tb_diagnostics.trace import parallel

    workers = parallel.workers_for(source.size)
    if workers < 2 or source.size > max_trace_bytes() or inflate_budget_set():
        return None
    try:
        return parallel.load_parallel(source, shown, workers)
    except ReadStalled as exc:  # one core would wait as long again
        raise TraceLoadError(shown, str(exc)) from None
    except Exception:  # one core then loads it, or says precisely what is wrong
        return None
