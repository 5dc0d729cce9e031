"""Read one trace file (local path or any fsspec URL) into a :class:`TraceModel`.

Files are decoded piecewise (:mod:`.stream`) so memory stays near the size of
the model rather than the file; a file that cannot be cut into pieces is
decoded whole, which also produces the precise message for a broken file.
"""

from __future__ import annotations

import os

from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.storage import is_local, local_path, open_binary
from tb_diagnostics.trace.build import ModelBuilder, build_model
from tb_diagnostics.trace.decode import decode, decompress
from tb_diagnostics.trace.model import TraceModel
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


def load_trace_bytes(raw: bytes, path: str) -> TraceModel:
    """Build the model from the file's bytes (gzip or plain JSON); ``path`` names it in errors."""
    return build_model(decode(decompress(raw, path), path), path)


def _open_error(shown: str, exc: OSError) -> TraceLoadError:
    if isinstance(exc, FileNotFoundError):
        return TraceLoadError(shown, "file not found (deleted while reading?)")
    if isinstance(exc, PermissionError):
        return TraceLoadError(shown, "permission denied")
    return TraceLoadError(shown, f"cannot read file ({exc})")


def load_trace(url: str, display_path: str | None = None) -> TraceModel:
    """Open ``url`` read-only and build its model.

    Raises :class:`TraceLoadError` (naming ``display_path`` or the URL) when
    the file cannot be read or is not a usable trace.
    """
    shown = display_path or url
    model = _load_on_cores(url, shown)
    if model is not None:
        return model
    try:
        with open_binary(url) as fh:
            builder = ModelBuilder(shown)
            for item in iter_event_batches(read_blocks(fh)):
                if not isinstance(item, list):
                    return builder.finish(item)
                builder.add(item)
                del item  # before the next batch is decoded (peak memory)
    except NotStreamable:
        pass  # decode it whole below: odd layouts load, broken files get exact messages
    except NotJSON as exc:
        raise TraceLoadError(shown, str(exc)) from None
    except TraceTooLarge as exc:
        raise TraceLoadError(shown, str(exc)) from None
    except OSError as exc:
        raise _open_error(shown, exc) from None
    try:
        with open_binary(url) as fh:
            # Whole-file decoding holds the text and its parse at once: same limit.
            raw = b"".join(read_blocks(fh, limit=whole_file_limit()))
    except TraceTooLarge as exc:
        raise TraceLoadError(shown, str(exc)) from None
    except NotStreamable as exc:  # corrupt or truncated gzip
        raise TraceLoadError(shown, _gzip_problem(str(exc))) from None
    except OSError as exc:
        raise _open_error(shown, exc) from None
    return build_model(decode(raw, shown), shown)


def _load_on_cores(url: str, shown: str) -> TraceModel | None:
    """A big local file decoded on several cores (:mod:`.parallel`), the same model as one
    core builds; None where it is loaded on one core (small, compressed, remote, in a
    pool's worker, under an inflate budget) or the parallel load gave up."""
    from tb_diagnostics.trace import parallel

    if not is_local(url):
        return None
    path = local_path(url)
    try:
        size = os.path.getsize(path) if os.path.isfile(path) else 0
    except OSError:
        return None
    workers = parallel.workers_for(size)
    if workers < 2 or size > max_trace_bytes() or inflate_budget_set():
        return None
    try:
        return parallel.load_parallel(path, shown, workers)
    except Exception:  # one core then loads it, or says precisely what is wrong
        return None


def _gzip_problem(detail: str) -> str:
    if "truncated" in detail:
        return "truncated gzip stream (the profiler may still be writing this file)"
    return f"corrupt gzip data ({detail.removeprefix('gzip: ')})"
