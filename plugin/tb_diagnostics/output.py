"""What the tool writes out keeps a file's name exact where it can, and is always valid.

On POSIX a file name is bytes. Python lists a name that is not UTF-8 (Latin-1
``caf\\xe9``) as a str with surrogate escapes (``'caf\\udce9'``), which no UTF-8
writer accepts. Every output here handles such names the same way:

- JSON (the tab's routes, ``--format json``): the lone surrogate becomes the escape
  ``\\udce9``, valid JSON that decodes back to the same str (``json.loads``,
  ``JSON.parse``), so a name read from the JSON finds its file again;
- text, Markdown and HTML: each lone surrogate shows as U+FFFD.

A URL carries the original bytes percent-encoded (``run=caf%E9``): the tab's
``encodeName`` (static/app/names.js) writes them, the plugin's query parsing reads
them back with surrogate escapes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from tb_diagnostics.chunks_on_cores import chunks_on_cores
from tb_diagnostics.lazy_json import encodable
from tb_diagnostics.lazy_rows import LazyRows

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_RUN = re.compile("[\ud800-\udfff]+")


def encode_json(payload: Any, indent: int | None = None) -> bytes:
    """``payload`` as JSON (msgspec's: NaN and infinities become null), lone surrogates in
    any string or key as ``\\udcXX`` escapes; ``indent`` pretty-prints.

    Output without lone surrogates is exactly msgspec's, at msgspec's speed: the slower
    exact path runs only when msgspec refuses a string.
    """
    try:
        body = msgspec.json.encode(payload, enc_hook=_lazy_rows_as_list)
    except UnicodeEncodeError:
        return _encode_with_surrogates(payload, indent)
    return body if indent is None else msgspec.json.format(body, indent=indent)


def decode_json(body: bytes) -> Any:
    """JSON as :func:`encode_json` writes it: msgspec's decoder, or the standard library's
    where a lone ``\\udcXX`` escape makes msgspec refuse. Raises ``msgspec.DecodeError``
    on anything that is not JSON, as msgspec does."""
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        if b"\\ud" not in body.lower():
            raise
    try:
        return json.loads(body, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise msgspec.DecodeError(f"JSON is malformed: {exc}") from None


def _no_constant(name: str) -> Any:
    # msgspec refuses NaN and Infinity literals: so does the fallback.
    raise ValueError(f"{name} is not JSON")


def json_text(payload: Any) -> str:
    """The CLI's JSON: indented by 2, one trailing newline."""
    return encode_json(payload, indent=2).decode() + "\n"


#: Rows of a LazyRows encoded at once: their ~4 MB of indented JSON stay in the CPU's cache
#: through encoding, formatting and the cut (4096 rows wrote 10-20% slower at 10^5 steps).
ROWS_PER_CHUNK = 1024

#: A list of numbers this long (a finding's or a what-if's steps: one per step) is written
#: this many at a time too: in the document around the rows, 7 such lists of 10^6 steps
#: made 223 MB of indented JSON, held whole while the rows were written.
SCALARS_PER_CHUNK = 65536


#: ``indent="auto"`` writes a document with more step rows than this compact (issue 28):
#: a million steps are 4.1 GB indented and 1.6 GB compact, and the spaces cost more to
#: write than the analysis took; nobody reads such a file by eye, and every JSON reader
#: (jq, json.load, JSON.parse) takes either. 20,000 rows are about 80 MB indented.
INDENT_ROWS_AT_MOST = 20_000


def json_chunks(payload: Any, rows_per_chunk: int = ROWS_PER_CHUNK,
                indent: int | str = 2) -> Iterator[bytes]:
    """:func:`json_text`'s bytes, in pieces to write as they come: the document around its
    :class:`~tb_diagnostics.lazy_rows.LazyRows` (the step lists of a span of a million
    steps), then each such list ``rows_per_chunk`` rows at a time (and each long list of
    numbers :data:`SCALARS_PER_CHUNK` at a time), encoded by msgspec and indented where the
    list stands; never the whole list nor the whole JSON at once.

    ``indent``: 2 (msgspec's indent by two), 0 (compact: msgspec's bytes, no spaces), or
    ``"auto"``: 2 unless the lazy lists hold more than :data:`INDENT_ROWS_AT_MOST` rows.
    Either way the document decodes to the same value.
    """
    lazies: list[Sequence[Any]] = []
    while True:
        nonce = _nonce()
        lazies.clear()
        placed = _with_placeholders(payload, nonce, lazies)
        if indent == "auto":
            rows = sum(len(x) for x in lazies if isinstance(x, LazyRows))
            indent = 2 if rows <= INDENT_ROWS_AT_MOST else 0
        if indent not in (0, 2):
            raise ValueError(f"indent must be 0, 2 or 'auto', not {indent!r}")
        skeleton = encode_json(placed, indent=indent or None)
        marks = list(re.finditer(b'"' + nonce.encode() + rb'-(\d+)"', skeleton))
        # The nonce is random; should the payload hold it by chance, draw another.
        if len(marks) == len(lazies):
            break
    pos = 0
    for m in marks:
        yield skeleton[pos:m.start()]
        rows = lazies[int(m.group(1))]
        per_chunk = rows_per_chunk if isinstance(rows, LazyRows) else SCALARS_PER_CHUNK
        if indent:
            line = skeleton.rfind(b"\n", 0, m.start()) + 1
            text = skeleton[line:m.start()]
            yield from _list_chunks(rows, b" " * (len(text) - len(text.lstrip())),
                                    per_chunk)
        else:
            yield from _compact_chunks(rows, per_chunk)
        pos = m.end()
    yield skeleton[pos:]
    yield b"\n"


def _with_placeholders(obj: Any, nonce: str, lazies: list[Sequence[Any]]) -> Any:
    """``obj`` with each LazyRows and each list of more than :data:`SCALARS_PER_CHUNK`
    numbers as the string ``<nonce>-<n>`` (appended to ``lazies``); containers that hold
    none are the same objects, not copies."""
    t = type(obj)
    if isinstance(obj, LazyRows):
        lazies.append(obj)
        return f"{nonce}-{len(lazies) - 1}"
    if t is dict:
        out = {k: _with_placeholders(v, nonce, lazies) for k, v in obj.items()}
        return obj if all(out[k] is v for k, v in obj.items()) else out
    if t is list or t is tuple:
        if _SCALARS.issuperset(map(type, obj)):
            if len(obj) <= SCALARS_PER_CHUNK:
                return obj
            lazies.append(obj)
            return f"{nonce}-{len(lazies) - 1}"
        items = [_with_placeholders(v, nonce, lazies) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj, strict=True)) else items
    return obj


def _list_chunks(rows: Sequence[Any], pad: bytes, rows_per_chunk: int) -> Iterator[bytes]:
    """The JSON of ``rows`` indented by 2 as msgspec.json.format puts a list whose line
    starts with ``pad``: each chunk's formatted list without its brackets."""
    if not len(rows):
        yield b"[]"
        return
    yield b"[\n"
    n = len(rows)

    def chunk(k: int) -> bytes:
        lo = k * rows_per_chunk
        return _chunk_json(rows, lo, min(lo + rows_per_chunk, n), pad)

    for k, body in enumerate(chunks_on_cores(chunk, -(-n // rows_per_chunk))):
        if k:
            yield b",\n"
        yield body
    yield b"\n" + pad + b"]"


def _compact_chunks(rows: Sequence[Any], rows_per_chunk: int) -> Iterator[bytes]:
    """The compact JSON of ``rows`` (msgspec's bytes for the whole list), in chunks."""
    yield b"["
    n = len(rows)

    def chunk(k: int) -> bytes:
        lo = k * rows_per_chunk
        return _chunk_compact(rows, lo, min(lo + rows_per_chunk, n))

    for k, body in enumerate(chunks_on_cores(chunk, -(-n // rows_per_chunk))):
        if k:
            yield b","
        yield body
    yield b"]"


def _chunk_compact(rows: Sequence[Any], lo: int, hi: int) -> bytes:
    """Rows lo..hi-1 as items of a compact list, without its brackets."""
    if not isinstance(rows, LazyRows):
        return msgspec.json.encode(list(rows[lo:hi]))[1:-1]
    values = encodable(rows, lo, hi)
    if values is not None:
        try:
            return msgspec.json.encode(values, enc_hook=_lazy_rows_as_list)[1:-1]
        except (TypeError, ValueError, NotImplementedError, msgspec.EncodeError):
            pass  # a lone surrogate, a value msgspec refuses: the dicts say it as before
    return encode_json(rows.rows(lo, hi))[1:-1]


def _chunk_json(rows: Sequence[Any], lo: int, hi: int, pad: bytes) -> bytes:
    """Rows lo..hi-1 (of a LazyRows, or a list of numbers) as msgspec.json.format writes
    them as items of a list at ``pad``.

    msgspec formats the chunk nested in as many lists as the pad has indents, so its rows
    come out indented where they stand (not shifted after: a pass over every byte); the
    nesting's brackets, (depth + 1) * (depth + 2) bytes each side, are cut off.
    """
    depth, odd = divmod(len(pad), 2)
    if odd or pad.strip(b" "):  # not msgspec's indent: format flat, then shift
        body = _chunk_json(rows, lo, hi, b"")
        return pad + body.replace(b"\n", b"\n" + pad)
    cut = (depth + 1) * (depth + 2)
    if not isinstance(rows, LazyRows):  # numbers: as they are
        return msgspec.json.format(msgspec.json.encode(_nested(list(rows[lo:hi]), depth)),
                                   indent=2)[cut:-cut]
    # The rows as msgspec Structs from the columns (lazy_json), else as their dicts.
    values = encodable(rows, lo, hi)
    if values is not None:
        try:
            body = msgspec.json.encode(_nested(values, depth), enc_hook=_lazy_rows_as_list)
        except (TypeError, ValueError, NotImplementedError, msgspec.EncodeError):
            pass  # a lone surrogate, a value msgspec refuses: the dicts say it as before
        else:
            return msgspec.json.format(body, indent=2)[cut:-cut]
    return encode_json(_nested(rows.rows(lo, hi), depth), indent=2)[cut:-cut]


def _nested(values: list[Any], depth: int) -> list[Any]:
    # values inside depth lists: msgspec.json.format indents its items by 2 * (depth + 1).
    for _ in range(depth):
        values = [values]
    return values


def _lazy_rows_as_list(obj: Any) -> Any:
    # msgspec's enc_hook: an encoder that meets a LazyRows whole encodes it as the list.
    if isinstance(obj, LazyRows):
        return list(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def displayable(text: str) -> str:
    """``text`` with each lone surrogate (an undecodable byte of a file name) as U+FFFD, so
    it can be written as UTF-8 anywhere; a str without one is returned as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _string_literal(s: str) -> bytes:
    """The JSON literal of a str with lone surrogates: msgspec's escaping for the rest."""
    out = bytearray(b'"')
    pos = 0
    for m in _SURROGATE_RUN.finditer(s):
        out += msgspec.json.encode(s[pos:m.start()])[1:-1]
        out += "".join(f"\\u{ord(c):04x}" for c in m.group()).encode()
        pos = m.end()
    out += msgspec.json.encode(s[pos:])[1:-1]
    out += b'"'
    return bytes(out)


def _nonce() -> str:
    """32 random hex digits (not ``secrets``: it imports hashlib, which loads OpenSSL)."""
    return os.urandom(16).hex()


class _Placeholders:
    """Swaps each string msgspec refuses for ``<nonce>-<n>`` and keeps its exact literal."""

    def __init__(self) -> None:
        self.nonce = _nonce()
        self.literals: list[bytes] = []

    def swap(self, s: str) -> str:
        # isascii is a flag check in CPython: most strings stop there.
        if s.isascii():
            return s
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            self.literals.append(_string_literal(s))
            return f"{self.nonce}-{len(self.literals) - 1}"
        return s

    def walk(self, obj: Any) -> Any:
        # The payload is msgspec.to_builtins' output: exact builtin types only.
        t = type(obj)
        if t is str:
            return self.swap(obj)
        if t is dict:
            return {self.swap(k) if type(k) is str else k: self.walk(v)
                    for k, v in obj.items()}
        if t is list or t is tuple:
            # A list of numbers (a column, a timeline) holds no string: keep it whole.
            if _SCALARS.issuperset(map(type, obj)):
                return obj
            return [self.walk(v) for v in obj]
        return obj


#: The types that to_builtins leaves and that hold no string.
_SCALARS = frozenset({int, float, bool, type(None)})


def _encode_with_surrogates(payload: Any, indent: int | None) -> bytes:
    # Let msgspec encode (and format) everything else exactly as it always does, then put
    # the exact literals back in place of the placeholders. msgspec.json.format refuses
    # a lone \udcXX escape, hence formatting before the swap back.
    builtins = msgspec.to_builtins(payload, enc_hook=_lazy_rows_as_list)
    while True:
        ph = _Placeholders()
        body = msgspec.json.encode(ph.walk(builtins))
        if indent is not None:
            body = msgspec.json.format(body, indent=indent)
        # The nonce is random; should the payload hold it by chance, draw another.
        if body.count(ph.nonce.encode()) == len(ph.literals):
            break
    placeholder = re.compile(b'"' + ph.nonce.encode() + rb'-(\d+)"')
    return placeholder.sub(lambda m: ph.literals[int(m.group(1))], body)
