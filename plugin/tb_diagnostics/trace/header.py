"""A trace's device from the first bytes of its file, without decoding its events.

The compare picker wants every run's device before any run is analysed. Kineto writes
``deviceProperties`` (one entry per GPU the process could see) at the top of the JSON,
before ``traceEvents``, so the first few KiB of the (decompressed) file name the device;
reading them costs one small read per file however large the trace. What that can and
cannot tell, said in :attr:`HeaderDevice.why`:

- a list of GPUs before the events: the machine's GPUs (``cuda``, or ``rocm`` by the
  same rule as :attr:`TraceModel.device_kind`). It is not proof that the run used one
  (a CPU-only profile on a GPU machine lists them too); the analysis of the span, once
  loaded, has the last word;
- an empty list: the profiler saw no GPU, so nothing ran on one: ``cpu``;
- a whole file within the bound: its model is built and gives exactly the analysis'
  device (small traces, e.g. without ``deviceProperties`` at all);
- no ``deviceProperties`` before the events of a larger file (2021 traces; files
  re-serialised with the key last), a file cut short, broken or unreadable: unknown
  (``kind`` None), never a guess.

At most ``limit`` decompressed bytes are read (default :data:`HEADER_BYTES`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.storage import is_local, local_path, open_binary
from tb_diagnostics.trace.categories import is_amd_device
from tb_diagnostics.trace.compressed import CorruptStream, UnreadableFormat
from tb_diagnostics.trace.load import load_trace_bytes
from tb_diagnostics.trace.source import LocalTrace, NotRegularFile, ReadStalled
from tb_diagnostics.trace.stream import NotJSON, TraceTooLarge, read_blocks

#: Decompressed bytes read at most: Kineto's header (``schemaVersion``,
#: ``deviceProperties`` of 8 GPUs, ``distributedInfo`` of 300 ranks) is under 20 KiB, and
#: a few tools put a metadata object of tens of KiB before it.
HEADER_BYTES = 256 << 10
_BLOCK = 64 << 10
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class HeaderDevice:
    """A trace's device as its first bytes tell it."""

    kind: str | None  # "cuda", "rocm", "cpu"; None: unknown
    name: str | None  # deviceProperties' name where every entry has that one
    count: int  # entries in deviceProperties (GPUs the process saw); 0 where none or unknown
    source: str  # "header" (deviceProperties), "trace" (whole file read), "unknown"
    why: str  # one line: what it was read from, or why it is unknown

    def as_json(self) -> dict[str, Any] | None:
        """What /runs gives (None where unknown)."""
        if self.kind is None:
            return None
        return {"kind": self.kind, "name": self.name, "count": self.count,
                "from": self.source, "why": self.why}


def unknown(why: str) -> HeaderDevice:
    return HeaderDevice(kind=None, name=None, count=0, source="unknown", why=why)


def properties_kind(props: list[dict[str, Any]]) -> str | None:
    """``rocm`` or ``cuda`` for a non-empty ``deviceProperties`` list (AMD parts carry
    ``gcnArchName`` or an AMD name, as in :attr:`TraceModel.device_kind`); ``cpu`` for an
    empty one."""
    if not props:
        return "cpu"
    return "rocm" if any(is_amd_device(p) for p in props) else "cuda"


def from_properties(props: Any) -> HeaderDevice:
    """The device a ``deviceProperties`` value names (anything but a list of objects is
    unknown)."""
    if not isinstance(props, list) or not all(isinstance(p, dict) for p in props):
        return unknown("deviceProperties is not a list of devices")
    if not props:
        return HeaderDevice(kind="cpu", name=None, count=0, source="header",
                            why="deviceProperties is empty: the profiler saw no GPU")
    names = sorted({str(p["name"]) for p in props if p.get("name")})
    # Mixed GPUs: the header cannot say which one the run used; the kind still holds.
    name = names[0] if len(names) == 1 else None
    return HeaderDevice(kind=properties_kind(props), name=name, count=len(props),
                        source="header",
                        why=f"deviceProperties lists {len(props)} GPU{'s' * (len(props) > 1)}"
                            " (the machine's: the run's own use is read when it is opened)")


def device_of_prefix(text: bytes, complete: bool, shown: str = "trace") -> HeaderDevice:
    """The device the first bytes ``text`` of a trace's JSON name; ``complete``: they are
    the whole file (then its model is built, giving the analysis' own device)."""
    if complete:
        return _whole(text, shown)
    s = text.decode("utf-8", errors="replace")  # the cut may split a character
    try:
        for key, value in _top_level(s):
            if key == "deviceProperties":
                return from_properties(value)
            if key == "traceEvents":
                return unknown("no deviceProperties before the events")
    except ValueError:
        pass  # cut short inside a value, or not an object: what came before said nothing
    return unknown(f"no deviceProperties in the first {len(text) >> 10} KiB")


def _top_level(s: str) -> Iterator[tuple[str, Any]]:
    """The top-level keys of the JSON object ``s`` starts, in order, with their values
    (``traceEvents``' value is never decoded: its key ends the walk). Raises ValueError
    where ``s`` is not an object or ends inside a key or a value."""
    i = _WS.match(s, 0).end()
    if s[i:i + 1] != "{":
        raise ValueError("not a JSON object")
    i += 1
    while True:
        i = _WS.match(s, i).end()
        if s[i:i + 1] == "}":
            return
        key, i = _DECODER.raw_decode(s, i)
        if not isinstance(key, str):
            raise ValueError("a key that is not a string")
        i = _WS.match(s, i).end()
        if s[i:i + 1] != ":":
            raise ValueError("no ':' after a key")
        i = _WS.match(s, i + 1).end()
        if key == "traceEvents":
            yield key, None
            return
        value, i = _DECODER.raw_decode(s, i)
        yield key, value
        i = _WS.match(s, i).end()
        if s[i:i + 1] != ",":
            return
        i += 1


def _whole(text: bytes, shown: str) -> HeaderDevice:
    try:
        model = load_trace_bytes(text, shown)
    except TraceLoadError as exc:
        return unknown(f"not a usable trace ({exc})")
    except Exception as exc:  # the scan thread goes on whatever one small file holds
        return unknown(f"not a usable trace ({type(exc).__name__}: {exc})")
    props = model.meta.device_properties
    return HeaderDevice(kind=model.device_kind, name=model.device_name,
                        count=len(props) if isinstance(props, list) else 0, source="trace",
                        why="the whole file was read")


def read_header_device(url: str, shown: str | None = None,
                       limit: int = HEADER_BYTES) -> HeaderDevice:
    """The device of the trace at ``url`` (a local path or an fsspec URL) from at most
    ``limit`` decompressed bytes of it. Never raises for a file that cannot be read: it
    is unknown, and why says so."""
    shown = shown or url
    try:
        with _opened(url) as fh:
            text, complete = _head(fh, limit)
    except NotRegularFile as exc:
        return unknown(str(exc))
    except (CorruptStream, UnreadableFormat, NotJSON, ReadStalled) as exc:
        return unknown(getattr(exc, "problem", None) or str(exc))
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in a path, a bad URL
        return unknown(f"cannot read ({exc})")
    except ImportError as exc:  # an fsspec backend that is not installed
        return unknown(f"cannot open ({exc})")
    except Exception as exc:  # a broken filesystem backend must not stop the scan
        return unknown(f"cannot read ({type(exc).__name__}: {exc})")
    return device_of_prefix(text, complete, shown)


@contextlib.contextmanager
def _opened(url: str) -> Iterator[IO[bytes]]:
    # Local files as the loader opens them (regular files only, no link followed, reads
    # with a timeout); the log dir is only ever read.
    if is_local(url):
        with LocalTrace(local_path(url)) as source:
            yield source.reader()  # type: ignore[misc]
        return
    with open_binary(url) as fh:
        yield fh


def _head(fh: IO[bytes], limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` decompressed bytes, and whether they are the whole file."""
    parts: list[bytes] = []
    total = 0
    blocks = read_blocks(fh, block=_BLOCK, limit=1 << 62)
    try:
        for out in blocks:
            parts.append(out)
            total += len(out)
            if total > limit:
                return b"".join(parts)[:limit], False
    except TraceTooLarge:  # not with this limit; kept for a lower global cap
        return b"".join(parts)[:limit], False
    finally:
        blocks.close()
    return b"".join(parts), True
