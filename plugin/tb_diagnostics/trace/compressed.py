"""Compressed trace files, told apart by their first bytes (never by the file's name).

gzip, bzip2 and xz are read with the standard library, zstd where the ``zstandard``
module is installed; each comes out in blocks of at most ``block`` bytes, so a small file
that inflates to gigabytes is stopped by the caller's limit after one block too many,
never held whole. A file of several members or streams one after another
(``cat a.gz b.gz``) is each of them in turn, as ``gzip -d`` reads it, whatever the
members' sizes. A zip archive, or zstd without the module, is named in the error.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any

from tb_diagnostics.trace.decode import GZIP_MAGIC

BZIP2_MAGIC = b"BZh"
XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
#: The most bytes a format's magic needs (what the first read must hold to tell).
MAGIC_BYTES = 6


class CorruptStream(Exception):
    """The compressed data is damaged or ends early (``detail`` says which)."""

    def __init__(self, fmt: str, detail: str) -> None:
        super().__init__(f"truncated {fmt} stream" if detail == "truncated"
                         else f"{fmt}: {detail}")
        self.fmt = fmt
        self.detail = detail

    @property
    def problem(self) -> str:
        """The sentence a user reads for this file."""
        if self.detail == "truncated":
            return (f"truncated {self.fmt} stream (the profiler may still be writing this "
                    "file)")
        return f"corrupt {self.fmt} data ({self.detail})"


class UnreadableFormat(Exception):
    """A compressed or archived file this engine does not open; the message says what it
    is and what to do with it."""


def sniff(head: bytes) -> str | None:
    """The compression of a file starting with ``head``; None for anything else."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(BZIP2_MAGIC) and head[3:4].isdigit() and head[3:4] != b"0":
        return "bzip2"
    if head.startswith(XZ_MAGIC):
        return "xz"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    if head.startswith(ZIP_MAGICS):
        return "zip"
    return None


def decompressed(fh: IO[bytes], first: bytes, block: int) -> Iterator[bytes] | None:
    """The decompressed blocks of a file whose first read gave ``first``; None where the
    file is not compressed (``first`` and the rest are the JSON)."""
    fmt = sniff(first)
    if fmt is None:
        return None
    if fmt == "zip":
        raise UnreadableFormat("a zip archive: unzip it, or open the archive as the log "
                               "dir zip://::FILE.zip")
    if fmt == "zstd":
        return _zstd(fh, first, block)
    new, magic, errors = _FORMATS[fmt]
    return _members(fh, first, block, fmt, new, magic, errors)


class _Gunzip:
    """zlib's decompressor in the shape of bz2's and lzma's (``needs_input``). Input
    held back by the output limit is fed again from ``unconsumed_tail``, and only while
    the member is not finished: after its end, zlib keeps that tail *and* copies it into
    ``unused_data``, and feeding it again would append it once more, for ever."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return self._d.decompress(data or self._d.unconsumed_tail, max_length)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    @property
    def needs_input(self) -> bool:
        return not self._d.unconsumed_tail


_FORMATS: dict[str, tuple[Callable[[], Any], bytes, tuple[type[Exception], ...]]] = {
    "gzip": (_Gunzip, GZIP_MAGIC, (zlib.error,)),
    "bzip2": (bz2.BZ2Decompressor, BZIP2_MAGIC, (OSError, ValueError)),
    "xz": (lambda: lzma.LZMADecompressor(format=lzma.FORMAT_XZ), XZ_MAGIC, (lzma.LZMAError,)),
}


def _members(fh: IO[bytes], data: bytes, block: int, fmt: str, new: Callable[[], Any],
             magic: bytes, errors: tuple[type[Exception], ...]) -> Iterator[bytes]:
    """Every member's output, at most ``block`` bytes per step: each step either
    consumes input or yields output, so the caller's limit bounds the work."""
    d = new()
    at_end = False  # the file has no more bytes: only what the decompressor holds is left
    while True:
        try:
            out = d.decompress(data, block)
        except errors as exc:
            raise CorruptStream(fmt, str(exc)) from None
        if out:
            yield out
        if d.eof:
            # The next member starts right after this one (or the file ends, perhaps
            # with zero padding, which gzip also ignores).
            data = d.unused_data
            while len(data) < len(magic):
                more = fh.read(block)
                if not more:
                    break
                data += more
            if not data.startswith(magic):
                return
            d, at_end = new(), False
            continue
        if not d.needs_input:
            data = b""  # more output is waiting for the input it already holds
            continue
        if at_end and not out:
            raise CorruptStream(fmt, "truncated")
        data = fh.read(block)
        at_end = not data


def _zstd(fh: IO[bytes], first: bytes, block: int) -> Iterator[bytes]:
    try:
        import zstandard
    except ImportError:
        raise UnreadableFormat("zstd-compressed: decompress it with `zstd -d`, or install "
                               "the zstandard module") from None
    import io

    class _Rest(io.RawIOBase):  # the first read, then the rest of the file
        def __init__(self) -> None:
            self._head = first

        def readable(self) -> bool:
            return True

        def readinto(self, buf: Any) -> int:
            if self._head:
                data, self._head = self._head[:len(buf)], self._head[len(buf):]
            else:
                data = fh.read(len(buf))
            buf[:len(data)] = data
            return len(data)

    reader = zstandard.ZstdDecompressor().stream_reader(
        io.BufferedReader(_Rest(), block), read_across_frames=True, closefd=False)
    try:
        while out := reader.read(block):
            yield out
    except zstandard.ZstdError as exc:
        raise CorruptStream("zstd", str(exc)) from None
