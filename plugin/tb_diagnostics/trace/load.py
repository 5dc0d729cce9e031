"""Read one trace file (local path or any fsspec URL) into a :class:`TraceModel`."""

from __future__ import annotations

import fsspec

from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.trace.build import build_model
from tb_diagnostics.trace.decode import decode, decompress
from tb_diagnostics.trace.model import TraceModel


def load_trace_bytes(raw: bytes, path: str) -> TraceModel:
    """Build the model from the file's bytes (gzip or plain JSON); ``path`` names it in errors."""
    return build_model(decode(decompress(raw, path), path), path)


def load_trace(url: str, display_path: str | None = None) -> TraceModel:
    """Open ``url`` read-only and build its model.

    Raises :class:`TraceLoadError` (naming ``display_path`` or the URL) when
    the file cannot be read or is not a usable trace.
    """
    shown = display_path or url
    try:
        with fsspec.open(url, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise TraceLoadError(shown, "file not found (deleted while reading?)") from None
    except PermissionError:
        raise TraceLoadError(shown, "permission denied") from None
    except OSError as exc:
        raise TraceLoadError(shown, f"cannot read file ({exc})") from None
    return load_trace_bytes(raw, shown)
