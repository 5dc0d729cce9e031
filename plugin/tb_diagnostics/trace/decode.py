"""Bytes → typed events, decoding only the fields the model needs.

Kineto writes one JSON object per event with a free-form ``args`` map. A plain
``json.loads`` builds a dict for every event and every arg; here msgspec decodes
straight into slotted structs and skips every key we do not name, which is both
faster and several times smaller in memory.

Two struct families are generated from one field table: a *strict* one whose
fields are typed (the fast path, taken by every well-formed trace) and a
*lenient* one whose fields accept any JSON value (the fallback when a file has,
say, a string ``ts``; the model builder then drops what it cannot use).
"""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import msgspec

from tb_diagnostics.errors import TraceLoadError

# (python name, JSON key, strict type). Unknown keys are skipped by msgspec.
_ARG_FIELDS: list[tuple[str, str, Any]] = [
    ("correlation", "correlation", int | str | None),
    ("external_id", "External id", int | str | None),
    ("external_id_lc", "external id", int | str | None),
    ("python_id", "Python id", int | None),
    ("python_parent_id", "Python parent id", int | None),
    ("call_stack", "Call stack", str | None),
    ("nbytes", "bytes", int | float | None),
    ("mem_bytes", "Bytes", int | float | None),
    ("total_allocated", "Total Allocated", int | float | None),
    ("total_reserved", "Total Reserved", int | float | None),
    ("device_type", "Device Type", int | None),
    ("device_id", "Device Id", int | None),
    ("device", "device", int | None),
    ("stream", "stream", int | str | None),
    ("input_dims", "Input Dims", list | None),
    ("input_type", "Input type", list | None),
    ("grid", "grid", list | None),
    ("label", "name", str | None),  # the name carried by ph:M metadata events
    ("block", "block", list | None),
]

_EVENT_FIELDS: list[tuple[str, str, Any]] = [
    ("ph", "ph", str),
    ("cat", "cat", str | None),
    ("name", "name", str),
    ("pid", "pid", int | str | None),
    ("tid", "tid", int | str | None),
    ("ts", "ts", float | None),
    ("dur", "dur", float | None),
    ("id", "id", int | str | None),
    ("bp", "bp", str | None),
]

_TOP_FIELDS: list[tuple[str, str, Any]] = [
    ("schema_version", "schemaVersion", int | str | None),
    ("device_properties", "deviceProperties", list | None),
    ("distributed_info", "distributedInfo", dict | None),
    ("base_time_ns", "baseTimeNanoseconds", int | float | None),
    ("display_time_unit", "displayTimeUnit", str | None),
    ("trace_name", "traceName", str | None),
    ("record_shapes", "record_shapes", int | bool | None),
    ("profile_memory", "profile_memory", int | bool | None),
    ("with_stack", "with_stack", int | bool | None),
    ("cuda_runtime_version", "cuda_runtime_version", int | str | None),
    ("cuda_driver_version", "cuda_driver_version", int | str | None),
]


def _defaults(ftype: Any) -> Any:
    if ftype is str:
        return ""
    return None


def _make_structs(lenient: bool) -> tuple[type, type, type]:
    def spec(fields: list[tuple[str, str, Any]]) -> list[tuple[str, Any, Any]]:
        out = []
        for pyname, key, ftype in fields:
            t = Any if lenient else ftype
            out.append((pyname, t, msgspec.field(default=_defaults(ftype), name=key)))
        return out

    suffix = "Lenient" if lenient else "Strict"
    args_t = msgspec.defstruct(f"Args{suffix}", spec(_ARG_FIELDS), gc=False)
    ev_fields = [*spec(_EVENT_FIELDS), ("args", Any if lenient else args_t | None, None)]
    if lenient:
        # In lenient mode args stay typed so lookups by attribute keep working;
        # their own fields are already Any.
        ev_fields[-1] = ("args", args_t | None, None)
    event_t = msgspec.defstruct(f"Event{suffix}", ev_fields, gc=False)
    top_fields = [
        ("events", list[event_t], msgspec.field(default_factory=list, name="traceEvents")),
        *spec(_TOP_FIELDS),
    ]
    top_t = msgspec.defstruct(f"TraceFile{suffix}", top_fields)
    return args_t, event_t, top_t


_, EventStrict, TraceFileStrict = _make_structs(lenient=False)
_, EventLenient, TraceFileLenient = _make_structs(lenient=True)

_STRICT_DECODER = msgspec.json.Decoder(TraceFileStrict | list[EventStrict])
_LENIENT_DECODER = msgspec.json.Decoder(TraceFileLenient | list[EventLenient])
_SHAPE_DECODER = msgspec.json.Decoder()

GZIP_MAGIC = b"\x1f\x8b"


def decompress(raw: bytes, path: str) -> bytes:
    """Return the JSON bytes, sniffing gzip by its magic number, not the file name.

    People rename files; a ``.gz`` that holds plain JSON (or the reverse)
    should still load.
    """
    if not raw.startswith(GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except EOFError:
        raise TraceLoadError(
            path, "truncated gzip stream (the profiler may still be writing this file)"
        ) from None
    except (OSError, zlib.error) as exc:
        raise TraceLoadError(path, f"corrupt gzip data ({exc})") from None


def decode(data: bytes, path: str) -> Any:
    """Decode trace JSON bytes into a ``TraceFile*`` struct.

    Raises :class:`TraceLoadError` naming ``path`` for empty, truncated,
    malformed or wrongly shaped input.
    """
    if not data.strip():
        raise TraceLoadError(path, "empty file")
    try:
        doc = _STRICT_DECODER.decode(data)
    except msgspec.ValidationError:
        doc = _decode_lenient(data, path)
    except msgspec.DecodeError as exc:
        raise TraceLoadError(path, _describe_decode_error(exc)) from None
    if isinstance(doc, list):
        # The bare-array form of the Chrome trace format.
        doc = TraceFileLenient(events=doc)
    return doc


def _decode_lenient(data: bytes, path: str) -> Any:
    try:
        return _LENIENT_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceLoadError(path, _describe_shape(data, exc)) from None
    except msgspec.DecodeError as exc:
        raise TraceLoadError(path, _describe_decode_error(exc)) from None


def _describe_decode_error(exc: msgspec.DecodeError) -> str:
    msg = str(exc)
    if "truncated" in msg:
        return "truncated JSON (the profiler may still be writing this file)"
    return f"not valid JSON ({msg})"


def _describe_shape(data: bytes, exc: msgspec.ValidationError) -> str:
    try:
        top = _SHAPE_DECODER.decode(data)
    except msgspec.DecodeError:
        top = None
    if not isinstance(top, dict | list):
        return f"not a trace: the JSON is a {type(top).__name__}, not an object with traceEvents"
    if isinstance(top, dict) and not isinstance(top.get("traceEvents", []), list):
        return "not a trace: traceEvents is not a list"
    return f"not a trace: unexpected JSON shape ({exc})"
