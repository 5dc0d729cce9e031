"""Bytes → typed events, decoding only the fields the model needs.

Kineto writes one JSON object per event with a free-form ``args`` map. A plain
``json.loads`` builds a dict for every event and every arg; here msgspec decodes
straight into slotted structs and skips every key we do not name, which is
several times faster and smaller.

Two struct families come from one field table. The *strict* one has exact
types and defaults that stand for "absent" (``-1``, ``NaN``), so the model
builder can turn a field into a numpy column with one list comprehension; every
well-formed trace takes this path. When a file has a field of the wrong type
(a string ``ts``, a float correlation id, ``null`` where a number belongs), it
is decoded again with a *lenient* family that accepts any JSON value, and each
event is normalised into a strict one, dropping what cannot be used.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec

from tb_diagnostics.errors import TraceLoadError

NAN = math.nan
ABSENT = -1


def _num(v: Any, default: float = NAN) -> float:
    """A finite number, else ``default`` (bools, strings, NaN, infinities are not numbers)."""
    if type(v) is float:
        return v if math.isfinite(v) else default
    if type(v) is int:
        return float(v)
    return default


def _id(v: Any) -> int:
    """A non-negative id that fits int64, else ABSENT (digit strings are accepted)."""
    if type(v) is str and v.isascii() and v.isdigit() and len(v) < 19:  # "²".isdigit()
        v = int(v)
    if type(v) is int and 0 <= v < 2**63:
        return v
    return ABSENT


def _link_id(v: Any) -> int:
    """An id that links events (correlation, External id, Python id): a non-negative int of
    any size, else ABSENT. Ids beyond int64 are renumbered by the model builder
    (:func:`~tb_diagnostics.trace.columns.link_ids`), not dropped: the links must hold."""
    if type(v) is str and v.isascii() and v.isdigit() and len(v) <= 40:  # "²".isdigit()
        v = int(v)
    if type(v) is int and v >= 0:
        return v
    return ABSENT


def _str(v: Any) -> str:
    return v if type(v) is str else ""


def _opt_str(v: Any) -> str | None:
    return v if type(v) is str else None


def _key(v: Any) -> int | str:
    """pid/tid: ints and strings are kept, anything else becomes a string."""
    if type(v) in (int, str):
        return v
    return "" if v is None else str(v)


NO_RAW = msgspec.Raw(b"")


def _raw(v: Any) -> msgspec.Raw:
    """A lenient value back to raw JSON text (lists only, as in well-formed traces)."""
    return msgspec.Raw(msgspec.json.encode(v)) if type(v) is list else NO_RAW


def _raw_scalar(v: Any) -> msgspec.Raw:
    """A lenient number or string back to raw JSON text (a kernel's registers, shared
    memory and occupancy; Kineto writes ``"inf"`` where a figure overflowed)."""
    return msgspec.Raw(msgspec.json.encode(v)) if type(v) in (int, float, str) else NO_RAW


def _id_or_str(v: Any) -> int | str:
    if type(v) is str:
        return v
    return _id(v)


# (python name, JSON key, strict type, default meaning "absent", sanitizer for bad input)
Field = tuple[str, str, Any, Any, Callable[[Any], Any]]

_ARG_FIELDS: list[Field] = [
    # In the order Kineto writes the keys (msgspec looks a key up from the field after
    # the last one found, so most keys are found at the first try: 7 % less decoding on
    # a deep CPU trace, 4 % on a GPU one).
    # null is a parent id some profilers write (no parent): None, not a wrong type.
    ("python_parent_id", "Python parent id", int | None, ABSENT, _link_id),
    ("python_id", "Python id", int, ABSENT, _link_id),
    ("external_id", "External id", int, ABSENT, _link_id),
    ("device", "device", int, ABSENT, _id),
    ("stream", "stream", int | str, ABSENT, _id_or_str),
    ("correlation", "correlation", int, ABSENT, _link_id),
    ("external_id_lc", "external id", int, ABSENT, _link_id),
    # A kernel's resources and the profiler's occupancy estimate, raw too: only kernels
    # have them, and the analysis reads each distinct combination once.
    ("registers", "registers per thread", msgspec.Raw, NO_RAW, _raw_scalar),
    ("shared_memory", "shared memory", msgspec.Raw, NO_RAW, _raw_scalar),
    ("grid", "grid", msgspec.Raw, NO_RAW, _raw),
    ("block", "block", msgspec.Raw, NO_RAW, _raw),
    ("occupancy", "est. achieved occupancy %", msgspec.Raw, NO_RAW, _raw_scalar),
    ("nbytes", "bytes", float, NAN, _num),
    # Kept as raw JSON text: the model only interns them, so building Python lists
    # for every op's shapes would be wasted work.
    ("concrete_inputs", "Concrete Inputs", msgspec.Raw, NO_RAW, _raw),
    ("input_type", "Input type", msgspec.Raw, NO_RAW, _raw),
    ("input_dims", "Input Dims", msgspec.Raw, NO_RAW, _raw),
    ("call_stack", "Call stack", str, "", _str),
    ("total_reserved", "Total Reserved", float, NAN, _num),
    ("total_allocated", "Total Allocated", float, NAN, _num),
    ("mem_bytes", "Bytes", float, NAN, _num),
    ("addr", "Addr", int, ABSENT, _id),  # a [memory] event's block address
    ("device_id", "Device Id", int, ABSENT, _id),
    ("device_type", "Device Type", int, ABSENT, _id),
    ("label", "name", str | None, None, _opt_str),  # the name carried by ph:M metadata events
]

_EVENT_FIELDS: list[Field] = [
    ("ph", "ph", str, "", _str),
    ("cat", "cat", str, "", _str),
    ("name", "name", str, "", lambda v: v if type(v) is str else ("" if v is None else str(v))),
    ("pid", "pid", int | str, "", _key),
    ("tid", "tid", int | str, "", _key),
    ("ts", "ts", float, NAN, _num),
    ("dur", "dur", float, NAN, _num),
    ("id", "id", int | str | None, None, lambda v: v if type(v) in (int, str) else None),
]

_TOP_FIELDS: list[tuple[str, str]] = [
    ("schema_version", "schemaVersion"),
    ("device_properties", "deviceProperties"),
    ("distributed_info", "distributedInfo"),
    ("base_time_ns", "baseTimeNanoseconds"),
    ("display_time_unit", "displayTimeUnit"),
    ("trace_name", "traceName"),
    ("record_shapes", "record_shapes"),
    ("profile_memory", "profile_memory"),
    ("with_stack", "with_stack"),
    ("cuda_runtime_version", "cuda_runtime_version"),
    ("cuda_driver_version", "cuda_driver_version"),
]


def _struct(name: str, fields: list[Field], lenient: bool, **kw: Any) -> type:
    spec = [(py, Any if lenient else t, msgspec.field(default=d, name=key))
            for py, key, t, d, _ in fields]
    return msgspec.defstruct(name, spec, gc=False, **kw)


Args = _struct("Args", _ARG_FIELDS, lenient=False)
Event = msgspec.defstruct(
    "Event",
    [(py, t, msgspec.field(default=d, name=key)) for py, key, t, d, _ in _EVENT_FIELDS]
    + [("args", Args, msgspec.field(default_factory=Args))],
    gc=False,
)
_ArgsLenient = _struct("ArgsLenient", _ARG_FIELDS, lenient=True)
_EventLenient = msgspec.defstruct(
    "EventLenient",
    [(py, Any, msgspec.field(default=d, name=key)) for py, key, _, d, _ in _EVENT_FIELDS]
    + [("args", Any, None)],
    gc=False,
)


#: Not a key of any trace: where the decoder leaves its counts of normalised events.
_PROBLEMS_KEY = "__tb_diagnostics_problems__"


def _top(name: str, event_t: type) -> type:
    return msgspec.defstruct(
        name,
        [("events", list[event_t], msgspec.field(default_factory=list, name="traceEvents"))]
        + [(py, Any, msgspec.field(default=None, name=key)) for py, key in _TOP_FIELDS]
        + [("problems", Any, msgspec.field(default=None, name=_PROBLEMS_KEY))],
    )


TraceFile = _top("TraceFile", Event)
_TraceFileLenient = _top("TraceFileLenient", _EventLenient)

_STRICT = msgspec.json.Decoder(TraceFile | list[Event])
_LENIENT = msgspec.json.Decoder(_TraceFileLenient | list[_EventLenient])
_LENIENT_EVENTS = msgspec.json.Decoder(list[_EventLenient])
_ANY = msgspec.json.Decoder()

GZIP_MAGIC = b"\x1f\x8b"


def decompress(raw: bytes, path: str) -> bytes:
    """Return the JSON bytes, sniffing gzip by its magic number, not the file name.

    People rename files; a ``.gz`` that holds plain JSON (or the reverse)
    still loads.
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


def decode(data: bytes, path: str, *, non_json_numbers: bool = True) -> Any:
    """Decode trace JSON bytes into a :data:`TraceFile` of strict :data:`Event` structs.

    Raises :class:`TraceLoadError` naming ``path`` for empty, truncated,
    malformed or wrongly shaped input.
    """
    if not data.strip():
        raise TraceLoadError(path, "empty file")
    try:
        try:
            doc = _STRICT.decode(data)
            # The problems field is ours, filled while decoding: never what a file says.
            if not isinstance(doc, list):
                doc.problems = None
        except msgspec.ValidationError:
            doc = _normalise(_decode_lenient(data, path))
        except msgspec.DecodeError as exc:
            if "UTF-8" not in str(exc):
                if non_json_numbers and _starts_non_json_number(data, exc):
                    return _decode_non_json_numbers(data, path)
                raise TraceLoadError(path, _describe_decode_error(exc)) from None
            # Names copied from C++ symbols can carry bytes that are not UTF-8: keep the
            # trace, with U+FFFD where those bytes were.
            return decode(data.decode("utf-8", "replace").encode("utf-8"), path,
                          non_json_numbers=non_json_numbers)
    except RecursionError:
        raise TraceLoadError(path, "JSON nested too deeply to be a trace") from None
    if isinstance(doc, list):
        doc = TraceFile(events=doc)  # the bare-array form of the Chrome trace format
    return doc


#: What Python's ``json.dumps`` writes for float("nan") and the infinities: not JSON.
_NON_JSON_NUMBER = re.compile(rb"-?Infinity|NaN")
#: A JSON string, or one of those tokens (outside any string, since strings match first).
_STRING_OR_NON_JSON_NUMBER = re.compile(rb'"(?:[^"\\]|\\.)*"|-?Infinity|NaN', re.S)
_BYTE_AT = re.compile(r"\(byte (\d+)\)")
NON_JSON_NUMBERS = "NaN or Infinity, which JSON does not have (read as null)"


def _starts_non_json_number(data: bytes, exc: msgspec.DecodeError) -> bool:
    """Whether the decoder stopped at a NaN or Infinity token."""
    at = _BYTE_AT.search(str(exc))
    return at is not None and _NON_JSON_NUMBER.match(data, int(at.group(1))) is not None


def _decode_non_json_numbers(data: bytes, path: str) -> Any:
    """Decode a file that holds NaN or Infinity where a number belongs (Python's json
    writes them): each is read as null (what the field's sanitizer makes of it) and
    counted in the notes."""
    count = 0

    def null(m: re.Match[bytes]) -> bytes:
        nonlocal count
        if m.group(0)[:1] == b'"':
            return m.group(0)
        count += 1
        return b"null"

    doc = decode(_STRING_OR_NON_JSON_NUMBER.sub(null, data), path, non_json_numbers=False)
    problems = Counter(doc.problems or {})
    problems[NON_JSON_NUMBERS] += count
    doc.problems = problems
    return doc


def _decode_lenient(data: bytes, path: str) -> Any:
    try:
        return _LENIENT.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceLoadError(path, _describe_shape(data, exc)) from None
    except msgspec.DecodeError as exc:  # pragma: no cover - the strict pass saw it first
        raise TraceLoadError(path, _describe_decode_error(exc)) from None


#: The note on events whose ts is not a number (the builder refuses a file of mostly those).
TS_NOT_A_NUMBER = "ts not a number"
#: The strict types of each event field, and how a wrong one is counted in the notes (a
#: dur that is not a number is counted by the model builder, with the missing ones: only
#: complete events have one).
_EVENT_TYPES = {
    "ph": ((str,), "ph not a string"), "cat": ((str,), "cat not a string"),
    "name": ((str,), "name not a string"),
    "pid": ((int, str), "pid neither a number nor a string"),
    "tid": ((int, str), "tid neither a number nor a string"),
    "ts": ((int, float), TS_NOT_A_NUMBER),
}


def normalise_events(events: list[Any]) -> tuple[list[Any], Counter[str]]:
    """Lenient events → strict ones, each field through its sanitizer; with a count of
    what had to be normalised (``"args not an object"``, ``"name not a string"``…)."""
    ev_fields = [(py, fix) for py, _, _, _, fix in _EVENT_FIELDS]
    arg_fields = [(py, fix) for py, _, _, _, fix in _ARG_FIELDS]
    problems: Counter[str] = Counter()
    out = []
    for e in events:
        a = e.args
        if isinstance(a, dict):
            try:
                a = msgspec.convert(a, _ArgsLenient)
            except msgspec.ValidationError:  # pragma: no cover - every field is Any
                a = None
        elif a is not None:
            problems["args not an object"] += 1
            a = None
        for key, (types, what) in _EVENT_TYPES.items():
            v = getattr(e, key)
            if isinstance(v, bool) or (v is not None and not isinstance(v, types)):
                problems[what] += 1
        args = Args(**{py: fix(getattr(a, py)) for py, fix in arg_fields}) if a else Args()
        out.append(Event(**{py: fix(getattr(e, py)) for py, fix in ev_fields}, args=args))
    return out, problems


def decode_events_lenient(data: bytes) -> tuple[list[Any], Counter[str]]:
    """A JSON array of events, whatever their fields hold (raises on invalid JSON)."""
    return normalise_events(_LENIENT_EVENTS.decode(data))


def _normalise(doc: Any) -> Any:
    events = doc if isinstance(doc, list) else doc.events
    out, problems = normalise_events(events)
    if isinstance(doc, list):
        return TraceFile(events=out, problems=problems)
    top = {py: getattr(doc, py) for py, _ in _TOP_FIELDS}
    return TraceFile(events=out, problems=problems, **top)


def _describe_decode_error(exc: msgspec.DecodeError) -> str:
    msg = str(exc)
    if "truncated" in msg:
        return "truncated JSON (the profiler may still be writing this file)"
    return f"not valid JSON ({msg})"


#: A JSON number with an exponent of three digits or more, and the key it belongs to.
_HUGE_NUMBER = re.compile(rb'"([^"\\]{1,64})"\s*:\s*(-?\d+(?:\.\d+)?[eE]\+?[1-9]\d{2,})')


def _describe_shape(data: bytes, exc: msgspec.ValidationError) -> str:
    try:
        top = _ANY.decode(data)
    except msgspec.ValidationError as err:  # e.g. 1e400: a number no float can hold
        huge = _HUGE_NUMBER.search(data)
        if huge:
            return (f"not a usable trace: {huge.group(1).decode('utf-8', 'replace')} is "
                    f"{huge.group(2).decode()}, a number no float can hold (at byte "
                    f"{huge.start(2)})")
        return f"not a usable trace: {err}"
    except msgspec.DecodeError:  # pragma: no cover - decoded twice already
        top = None
    if not isinstance(top, dict | list):
        return f"not a trace: the JSON is a {type(top).__name__}, not an object with traceEvents"
    if isinstance(top, dict) and not isinstance(top.get("traceEvents", []), list):
        return "not a trace: traceEvents is not a list"
    return f"not a trace: unexpected JSON shape ({exc})"
