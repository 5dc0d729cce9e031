"""A span, or a time range of it, as a Chrome-trace JSON file for ui.perfetto.dev.

The profiler's file already is Chrome-trace JSON; what an export adds is the cut
(one step out of a span of hundreds) and a file that loads anywhere: strict JSON,
gzip-able. Events are copied byte for byte (``ph``, ``pid``/``tid`` as recorded,
``ts``/``dur`` in µs, ``args`` kept), so Perfetto shows what the profiler wrote, not
our model of it; the file's other keys (``baseTimeNanoseconds``, ``deviceProperties``,
``distributedInfo``…) are kept too, so our own loader reads the export back with the
same clock.

Which events a range keeps, in the file's own clock ``[lo, hi)``:

- complete events (``ph: X``) that overlap it: ``ts < hi`` and ``ts + dur > lo``
  (an event of no duration: ``lo <= ts < hi``);
- every other event with a time (instants, flows' ``s``/``f``, counters) at
  ``lo <= ts < hi``;
- metadata (``ph: M``: process and thread names, sort order), always.
"""

from __future__ import annotations

import gzip
import math
import threading
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.storage import open_binary
from tb_diagnostics.trace.model import TraceModel
from tb_diagnostics.trace.stream import TraceTooLarge, read_blocks, whole_file_limit

#: Overlaps shorter than this (µs) are rounding, not overlap: the profiler writes
#: times to the nanosecond, and the model's clock is the file's shifted by a float.
EPS_US = 5e-4


class _Head(msgspec.Struct, gc=False):
    """What the cut reads of an event; anything else stays in its raw bytes."""

    ph: Any = ""
    ts: Any = None
    dur: Any = None


class _TypedHead(msgspec.Struct, gc=False):
    """The same, for the usual file whose times are all numbers: no per-event checks."""

    ph: str = ""
    ts: float = math.nan
    dur: float = math.nan


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw] | list[msgspec.Raw])
_EVENTS_RAW = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS_HEAD = msgspec.json.Decoder(list[_Head])
_EVENTS_TYPED = msgspec.json.Decoder(list[_TypedHead])


def file_clock_offset(model: TraceModel) -> float:
    """What to add to a model time (µs since the model origin) to get the file's ``ts``.

    The model's origin is the earliest event's ``ts`` plus ``baseTimeNanoseconds`` (as
    µs) where the file has one (:mod:`.build`), so the file's clock is that less the base.
    """
    return model.origin_us - (model.meta.base_time_ns or 0.0) / 1000.0


def read_json_bytes(url: str, shown: str) -> bytes:
    """The trace file's JSON text (decompressed), within the loader's size limit."""
    try:
        with open_binary(url) as fh:
            return b"".join(read_blocks(fh, limit=whole_file_limit()))
    except TraceTooLarge as exc:
        raise TraceLoadError(shown, str(exc)) from None
    except OSError as exc:
        raise TraceLoadError(shown, f"cannot read file ({exc})") from None


def _numbers(values: list[Any]) -> np.ndarray:
    """Floats of ``values``; NaN where one is not a finite number (a string, null)."""
    nan = math.nan
    out = np.fromiter((v if type(v) in (int, float) else nan for v in values),
                      dtype=np.float64, count=len(values))
    out[~np.isfinite(out)] = nan
    return out


@dataclass(frozen=True)
class _Heads:
    """What the cut reads of every event, as columns (NaN: no finite number)."""

    ts: np.ndarray
    dur: np.ndarray
    is_x: np.ndarray
    is_meta: np.ndarray


def _heads(events: bytes | msgspec.Raw) -> _Heads:
    """The heads of the raw ``traceEvents`` array, whole-array."""
    try:
        typed = _EVENTS_TYPED.decode(events)
        ts = np.array([h.ts for h in typed], dtype=np.float64)
        dur = np.array([h.dur for h in typed], dtype=np.float64)
        heads: list[Any] = typed
    except msgspec.ValidationError:  # a time that is a string or null somewhere
        heads = _EVENTS_HEAD.decode(events)
        ts = _numbers([h.ts for h in heads])
        dur = _numbers([h.dur for h in heads])
    ph = [h.ph for h in heads]
    return _Heads(ts=ts, dur=dur, is_x=np.array([p == "X" for p in ph], dtype=bool),
                  is_meta=np.array([p == "M" for p in ph], dtype=bool))


def _kept(h: _Heads, lo: float, hi: float) -> np.ndarray:
    """Positions of the events of ``[lo, hi)`` by the module's rule, whole-array."""
    spans = h.is_x & (h.dur > 0)  # NaN compares false: no duration, an instant's rule
    with np.errstate(invalid="ignore"):
        overlap = (h.ts < hi - EPS_US) & (h.ts + h.dur > lo + EPS_US)
        inside = (h.ts >= lo - EPS_US) & (h.ts < hi - EPS_US)
    return np.flatnonzero(h.is_meta | np.where(spans, overlap, inside))


def _not_strict(shown: str, exc: Exception) -> TraceLoadError:
    return TraceLoadError(shown, "cannot export: the file is not strict JSON with a "
                          f"traceEvents array ({exc}); Perfetto would not load it either")


class ParsedTrace:
    """A trace file's JSON decoded once: every export of it (the span, any step) is cut
    from this without decoding the file again (the server keeps the last one exported).

    It holds the file's text and views into it (each event's raw bytes), and the events'
    times as columns once a range is first asked for."""

    def __init__(self, data: bytes, shown: str) -> None:
        self.data = data
        self.shown = shown
        try:
            top = _TOP.decode(data)  # parses all of it: strict JSON, or the error below
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _not_strict(shown, exc) from None
        self._events: list[msgspec.Raw] | None = None  # each event's bytes, once cut
        if isinstance(top, list):  # the bare-array form
            self._rest: dict[str, msgspec.Raw] = {}
            self._raw: bytes | msgspec.Raw | None = data
            self._events = top
        else:
            self._rest = {k: v for k, v in top.items() if k != "traceEvents"}
            self._raw = top.get("traceEvents")
        # The whole span of a file in the usual form is the file itself.
        self._is_whole_file = isinstance(top, dict) and "traceEvents" in top
        self._heads: _Heads | None = None
        self._lock = threading.Lock()  # two requests at once decode the events once

    def cut(self, file_range: tuple[float, float] | None = None) -> bytes:
        """The Chrome-trace JSON of every event, or those of ``file_range`` (the file's
        clock, µs), with the file's other keys."""
        if file_range is None and self._is_whole_file:
            return self.data
        kept = events = self._event_bytes()
        if file_range is not None and events:
            kept = [events[i] for i in _kept(self._columns(), *file_range).tolist()]
        parts = [b'{"traceEvents":[', b",".join(bytes(r) for r in kept), b"]"]
        for k, v in self._rest.items():
            parts += [b",", msgspec.json.encode(k), b":", bytes(v)]
        parts.append(b"}")
        return b"".join(parts)

    def _event_bytes(self) -> list[msgspec.Raw]:
        with self._lock:
            if self._events is None:
                try:
                    self._events = (_EVENTS_RAW.decode(self._raw) if self._raw is not None
                                    else [])
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    raise _not_strict(self.shown, exc) from None
            return self._events

    def _columns(self) -> _Heads:
        with self._lock:
            if self._heads is None:
                assert self._raw is not None  # events exist only with their array
                try:
                    self._heads = _heads(self._raw)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    raise _not_strict(self.shown, exc) from None  # an event not an object
            return self._heads


def chrome_trace(data: bytes, shown: str, file_range: tuple[float, float] | None = None
                 ) -> bytes:
    """The Chrome-trace JSON of ``data`` (a trace file's JSON text): every event, or those
    of ``file_range`` (the file's clock, µs), with the file's other keys."""
    return ParsedTrace(data, shown).cut(file_range)


def gzipped(data: bytes) -> bytes:
    """``data`` gzip-compressed (level 6: a 200 MB trace in seconds, ~10x smaller)."""
    return gzip.compress(data, compresslevel=6, mtime=0)


def read_trace(url: str, shown: str) -> ParsedTrace:
    """The trace file at ``url``, read and decoded once (:class:`ParsedTrace`)."""
    return ParsedTrace(read_json_bytes(url, shown), shown)


def export_file(url: str, shown: str, file_range: tuple[float, float] | None,
                suffix: str = "", parsed: ParsedTrace | None = None) -> tuple[bytes, str]:
    """The trace file at ``url`` (or ``file_range`` of it) as gzipped Chrome-trace JSON,
    and a file name for it: the trace's own name with ``suffix`` (``.step12``). ``parsed``:
    the file already decoded (:func:`read_trace`), so this reads nothing."""
    data = (parsed or read_trace(url, shown)).cut(file_range)
    base = shown.rsplit("/", 1)[-1]
    for end in (".gz", ".json", ".pt.trace"):
        base = base.removesuffix(end)
    return gzipped(data), f"{base}{suffix}.pt.trace.json.gz"
