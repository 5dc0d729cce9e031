"""Read one trace file (local path or any fsspec URL) into a :class:`TraceModel`.

Files are decoded piecewise (:mod:`.stream`) so memory stays near the size of
the model rather than the file; a file that cannot be cut into pieces is
decoded whole, which also produces the precise message for a broken file.
"""

from __future__ import annotations

from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.storage import open_binary
from tb_diagnostics.trace.build import ModelBuilder, build_model
from tb_diagnostics.trace.decode import decode, decompress
from tb_diagnostics.trace.model import TraceModel
from tb_diagnostics.trace.stream import (
    NotJSON,
    NotStreamable,
    TraceTooLarge,
    iter_event_batches,
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


def _gzip_problem(detail: str) -> str:
    if "truncated" in detail:
        return "truncated gzip stream (the profiler may still be writing this file)"
    return f"corrupt gzip data ({detail.removeprefix('gzip: ')})"
