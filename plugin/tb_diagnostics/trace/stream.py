"""Decode a trace in bounded pieces: read (and gunzip) a block, decode the whole events it
holds, turn them into columns, drop them, read on.

A trace is one JSON object whose ``traceEvents`` array holds nearly all the
bytes. Instead of materialising the file and a struct per event at once, the
array is cut between two events (a ``}`` , ``{`` boundary) and each piece is
decoded as its own array by msgspec; a cut in the wrong place (inside an
event's ``args``) cannot decode, so every piece is verified by decoding it,
and the next candidate boundary is tried. The keys around the array are
decoded at the end as ``prefix + [] + suffix``. Peak memory is then the
columns plus one block, not the file plus its parse.

Anything unexpected (no ``traceEvents`` key near the start, a piece that
does not decode, a file that ends early) raises :class:`NotStreamable`, and
the caller falls back to decoding the whole file, which gives the precise
error message or handles the odd layout.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import IO, Any

import msgspec

from tb_diagnostics.trace.compressed import MAGIC_BYTES, decompressed
from tb_diagnostics.trace.decode import Event, TraceFile, decode_events_lenient
from tb_diagnostics.trace.longstrings import STRING_CAP_BYTES, StringCap

#: 256 KiB: the decoded structs of one block are the parse's only per-event objects.
#: On the 50 MB benchmark trace: 2 MB lower peak than 1 MiB blocks for ~5 % more time;
#: smaller blocks gain no memory and cost time (per-block overhead).
BLOCK_BYTES = 1 << 18
#: Blocks read at once from a plain file (2 MiB): fewer hand-offs to the reader thread.
READ_AHEAD_BLOCKS = 8
#: How far into the file the ``traceEvents`` key may start (metadata keys precede it).
MAX_PREFIX_BYTES = 64 << 20

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_WS = b" \t\r\n"
_EVENTS = msgspec.json.Decoder(list[Event])
_TOP = msgspec.json.Decoder(TraceFile)


class NotStreamable(Exception):
    """This file cannot be decoded piecewise; decode it whole instead."""


class TraceTooLarge(Exception):
    """The JSON is larger than the configured limit (see :func:`max_trace_bytes`)."""


class OverBudget(Exception):
    """More JSON came out than the caller's :func:`inflate_budget` allows: the caller
    (the tab's loader) moves the file to the queue for big files."""


#: The bytes of JSON a load on this thread may inflate before :class:`OverBudget`.
_BUDGET: ContextVar[int | None] = ContextVar("tb_diagnostics_inflate_budget", default=None)


@contextlib.contextmanager
def inflate_budget(limit: int | None) -> Iterator[None]:
    """Within the block, reading more than ``limit`` bytes of JSON raises
    :class:`OverBudget` (a 1 MB gzip can inflate to gigabytes: its size on disk says
    little about the work it is)."""
    token = _BUDGET.set(limit)
    try:
        yield
    finally:
        _BUDGET.reset(token)


def inflate_budget_set() -> bool:
    """Whether this thread reads under an :func:`inflate_budget`."""
    return _BUDGET.get() is not None


def available_memory_bytes() -> int | None:
    """The memory this machine can still give (``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def max_trace_bytes() -> int:
    """The largest JSON text (after gunzip) the engine will stream.

    ``TB_DIAGNOSTICS_MAX_TRACE_MB`` sets it; by default it is 32768 MiB or twice the
    memory available, whichever is less (a streamed trace's model takes 0.3–1× its JSON):
    refusing with a message beats being killed by the out-of-memory killer halfway.
    """
    env = os.environ.get("TB_DIAGNOSTICS_MAX_TRACE_MB")
    if env:
        try:
            return int(float(env) * (1 << 20))
        except ValueError:
            pass
    limit = 32768 << 20
    avail = available_memory_bytes()
    return min(limit, 2 * avail) if avail else limit


def whole_file_limit() -> int:
    """The largest JSON text decoded whole (odd layouts): the text and its parse are held
    at once, about three times the JSON, so at most a third of the memory available."""
    avail = available_memory_bytes()
    limit = max_trace_bytes()
    return min(limit, avail // 3) if avail and not os.environ.get(
        "TB_DIAGNOSTICS_MAX_TRACE_MB") else limit


def read_blocks(fh: IO[bytes], block: int = BLOCK_BYTES,
                limit: int | None = None) -> Iterator[bytes]:
    """The file's JSON bytes in blocks, decompressed on the fly when its first bytes are
    gzip's, bzip2's, xz's (or zstd's, where the ``zstandard`` module is installed) magic,
    without a UTF-8 byte-order mark.

    Raises :class:`TraceTooLarge` once more than ``limit`` bytes (default
    :func:`max_trace_bytes`) have come out, and :class:`OverBudget` past the thread's
    :func:`inflate_budget`; :class:`NotJSON` for an archive or a compression it cannot read.
    """
    limit = max_trace_bytes() if limit is None else limit
    budget = _BUDGET.get()
    total = 0
    for out in _without_bom(_raw_blocks(fh, block)):
        total += len(out)
        if total > limit:
            raise TraceTooLarge(f"larger than the {limit / (1 << 20):.0f} MiB limit "
                                "(set TB_DIAGNOSTICS_MAX_TRACE_MB to analyse it)")
        if budget is not None and total > budget:
            raise OverBudget(total)
        yield out


_BOM = b"\xef\xbb\xbf"


def _without_bom(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The blocks with a leading UTF-8 byte-order mark dropped (JSON forbids it; editors
    on Windows write it)."""
    head = b""
    for out in blocks:
        head += out
        if len(head) >= len(_BOM) or not _BOM.startswith(head):
            break
    else:
        if head and head != _BOM:
            yield head
        return
    rest = head[len(_BOM):] if head.startswith(_BOM) else head
    del head
    if rest:
        yield rest
    del rest
    yield from blocks


def _raw_blocks(fh: IO[bytes], block: int) -> Iterator[bytes]:
    first = fh.read(block)
    while 0 < len(first) < MAGIC_BYTES:  # a magic number split over two short reads
        more = fh.read(block)
        if not more:
            break
        first += more
    inflated = decompressed(fh, first, block)
    if inflated is not None:
        yield from inflated
        return
    if first:
        yield first
    # Read several blocks per call and hand them on one by one: each read is a hand-off to
    # the reader thread (source.BoundedCalls), and on a busy machine every wake-up of it
    # can wait for a core; the blocks themselves are the same as one read per block.
    while more := fh.read(block * READ_AHEAD_BLOCKS):
        if len(more) <= block:
            yield more
            continue
        view = memoryview(more)
        for at in range(0, len(more), block):
            yield bytes(view[at:at + block])
        del view, more


def _cut(buf: bytes, limit: int | None = None) -> int:
    """Index just past the last ``} , {`` in ``buf`` (a boundary between two events, unless
    the braces are inside a name such as ``{lambda()#1}``, which the decode of the piece
    then reveals), or -1 when there is none yet. The events before it are ``buf[:index]``.
    Only ``buf[:limit]`` is searched (no copy of it is made)."""
    pos = len(buf) if limit is None else limit
    while True:
        brace = buf.rfind(b"{", 0, pos)
        if brace <= 0:
            return -1
        pos = brace
        j = brace - 1
        while j >= 0 and buf[j] in _WS:
            j -= 1
        if j < 0 or buf[j] != 0x2C:  # ","
            continue
        j -= 1
        while j >= 0 and buf[j] in _WS:
            j -= 1
        if j < 0 or buf[j] != 0x7D:  # "}"
            continue
        return j + 1


#: How many bytes of a block :func:`_blank` looks at before it scans the whole block.
_BLANK_HEAD = 64
#: The most of a pending piece that is scanned for open strings on a block of white space.
_SCAN_LIMIT = 1 << 20
_ESCAPE = re.compile(rb"\\.", re.S)


def _blank(data: bytes) -> bool:
    """Nothing but JSON white space (``translate`` is 5× faster than ``strip`` here, which
    counts on a gigabyte of spaces). A block of events shows a non-space byte in its first
    few: those are looked at first, so that the whole block is scanned only when it may
    be blank (a full scan of every block was 7 % of the load of a 500 MB trace)."""
    return not data[:_BLANK_HEAD].translate(None, _WS) and not data.translate(None, _WS)


def _outside_string(buf: bytes) -> bool:
    """Whether ``buf``, which starts outside any JSON string, also ends outside one."""
    return _ESCAPE.sub(b"", buf).count(b'"') % 2 == 0


class NotJSON(Exception):
    """The file's first bytes are not JSON (zeros, binary data): no need to read the rest."""


def _check_start(block: bytes) -> None:
    head = block.lstrip(_WS)[:1]
    if head and head not in (b"{", b"["):
        raise NotJSON(f"not JSON: the file starts with byte 0x{head[0]:02x}, not {{ or [")


def iter_event_batches(blocks: Iterable[bytes]) -> Iterator[list[Any] | Any]:
    """Yield lists of decoded events, then, last, the :data:`TraceFile` of the other keys."""
    buf = b""
    prefix = None
    # After a piece fails to decode (a cut past the end of the array, among the keys that
    # follow it), the rest is kept whole and split once, from the right, at the end.
    cutting = True
    rest: list[bytes] = []  # once not cutting: blocks kept for one join at the end
    problems: Counter[str] = Counter()  # events normalised on the way (notes)
    # Engaged once a pending piece outgrows twice the string cap without a clean cut
    # (one event holding a giant string), released when that piece has decoded.
    long_strings: StringCap | None = None
    cut_strings = 0
    outside = None  # the pending piece last found to end outside any string
    for block in blocks:
        if not cutting:
            rest.append(block)
            continue
        if prefix is None and not buf:
            _check_start(block)
        if long_strings is not None:
            long_strings.feed(buf, block)
        elif _blank(block) and (buf is outside or _blank(buf) or (
                len(buf) < _SCAN_LIMIT and _outside_string(buf))):
            # White space outside any string: JSON ignores it, so one space of it is kept
            # (a gzip of a gigabyte of spaces stays a few bytes here).
            if not buf.endswith(b" "):
                buf += b" "
            outside = buf
            continue
        else:
            buf += block
        if prefix is None:
            head = buf.lstrip(_WS)
            if head.startswith(b"["):  # the bare-array form
                prefix, buf = b"", head[1:]
            else:
                m = _EVENTS_KEY.search(buf)
                if m is None:
                    if len(buf) > MAX_PREFIX_BYTES:
                        raise NotStreamable("no traceEvents key near the start")
                    continue
                prefix, buf = buf[: m.start()] + b'"traceEvents":', buf[m.end():]
        limit = long_strings.open_string_at(buf) if long_strings is not None else None
        events, end = _decode_before_last_cut(buf, problems, limit=limit)
        if long_strings is None and (end < 0 or (end == 0 and
                                                 len(buf) > 2 * STRING_CAP_BYTES)):
            # No cut decodes, or a large piece has none: perhaps one event with a giant
            # string, whose text may even look like event boundaries. Follow the piece
            # string by string (cutting what outgrows the cap) and retry before it.
            long_strings = StringCap()
            pending, buf = buf, bytearray()
            long_strings.feed(buf, pending)
            del pending
            events, end = _decode_before_last_cut(buf, problems,
                                                  limit=long_strings.open_string_at(buf))
        if end == 0 and len(buf) > MAX_PREFIX_BYTES:
            end = -1  # one enormous event: stop rescanning it on every block
        if end < 0:
            # No piece decodes: the cuts are past the end of the array (among the keys
            # after it) or inside odd args. Keep the rest whole; split it at the end.
            cutting = False
        elif end > 0:
            yield events
            # Drop this batch before decoding the next: two batches alive would double
            # the structs' share of peak memory.
            del events
            before = len(buf)
            buf = buf[end:].lstrip(_WS)[1:]  # drop the "," between two events
            if long_strings is not None:
                # Unless a giant string is still arriving, the rest of the piece is plain
                # again (and starts outside any string): back to the fast path.
                if not long_strings.dropping:
                    cut_strings += long_strings.cut
                    long_strings, buf = None, bytes(buf)
                else:
                    long_strings.shift(before - len(buf))
    if prefix is None:
        if not buf.strip(_WS):
            raise NotJSON("empty file (nothing but white space)")
        raise NotStreamable("no traceEvents array")
    if rest:
        buf = b"".join([buf, *rest])
        rest.clear()
    if long_strings is not None:
        cut_strings += long_strings.cut
    if cut_strings:
        problems[f"a string longer than {STRING_CAP_BYTES >> 20} MiB cut to its first "
                 f"{STRING_CAP_BYTES >> 20} MiB"] += cut_strings
    events, top = _finish(prefix, buf, problems)
    if events:
        yield events
    top.problems = problems
    yield top


def _decode_events(data: bytes, problems: Counter[str]) -> list[Any]:
    """A piece's events; valid JSON with an event of the wrong shape (``"args": "oops"``)
    is decoded leniently, that event normalised and counted, not the file rejected."""
    try:
        return _EVENTS.decode(data)
    except msgspec.ValidationError:
        events, found = decode_events_lenient(data)
        problems.update(found)
        return events


def _decode_before_last_cut(buf: bytes, problems: Counter[str], tries: int = 4,
                            limit: int | None = None) -> tuple[list[Any], int]:
    """Decode the events before the last clean cut in ``buf[:limit]``: (events, cut),
    (_, 0) when there is no cut yet, (_, -1) when none of the last ``tries`` candidate
    cuts decodes."""
    limit = len(buf) if limit is None else limit
    for _ in range(tries):
        end = _cut(buf, limit)
        if end <= 0:
            return [], 0
        try:
            return _decode_events(_as_array(buf, end), problems), end
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            limit = end - 1
    return [], -1


def _as_array(buf: bytes, end: int) -> bytes:
    """``[`` + ``buf[:end]`` + ``]``, in one copy rather than two."""
    return b"".join((b"[", memoryview(buf)[:end], b"]"))


def _finish(prefix: bytes, tail: bytes, problems: Counter[str]) -> tuple[list[Any], Any]:
    """Split the tail into its last events and the keys after the array (``]`` from the right)."""
    pos = len(tail)
    for _ in range(64):
        close = tail.rfind(b"]", 0, pos)
        if close < 0:
            break
        pos = close
        try:
            if prefix:
                top = _TOP.decode(prefix + b"[]" + tail[close + 1:])
            else:
                if tail[close + 1:].strip(_WS):
                    continue
                top = TraceFile()
            body = tail[:close].strip(_WS)
            events = _decode_events(b"[" + body + b"]", problems) if body else []
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
        return events, top
    raise NotStreamable("no end of the traceEvents array (truncated file?)")
