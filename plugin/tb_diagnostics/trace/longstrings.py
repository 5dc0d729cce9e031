"""Cut over-long JSON strings while a trace streams, before they are ever held whole.

A trace whose one event carries a 3 GiB name would otherwise be buffered until the
name ends, then copied and decoded: several times its size in memory for one string
nobody can read. :class:`StringCap` follows the pending (not yet decoded) bytes of
the stream, string by string, and keeps only the first :data:`STRING_CAP_BYTES` of
any string, dropping the rest as it arrives. The stream engages it only when a
pending piece has grown past twice the cap without a clean cut, so ordinary traces
never pay for the scan.
"""

from __future__ import annotations

#: 1 MiB: far above any real name (demangled kernel names run to a few KiB, Python
#: stacks to tens), far below what would strain memory.
STRING_CAP_BYTES = 1 << 20
#: Appended to a cut string so that whoever reads it sees it was cut.
CUT_MARK = "…".encode()


class StringCap:
    """The scan state of one pending piece, which starts outside any JSON string."""

    def __init__(self, cap: int = STRING_CAP_BYTES) -> None:
        self.cap = cap
        self.pos = 0  # bytes of the piece scanned so far
        self.start = -1  # where the open string's content starts, -1 outside strings
        self.dropping = False  # past the cap of the open string: its bytes are dropped
        self.escaped = False  # while dropping: the last dropped byte opened an escape
        self.cut = 0  # strings cut so far

    def open_string_at(self, buf: bytes | bytearray) -> int:
        """Where the open string's opening quote is, or ``len(buf)`` outside strings: no
        clean cut between events can lie past it."""
        return self.start - 1 if self.start >= 0 else len(buf)

    def shift(self, dropped: int) -> None:
        """The first ``dropped`` bytes of the piece were decoded and removed."""
        self.pos -= dropped
        if self.start >= 0:
            self.start -= dropped

    def feed(self, buf: bytearray, block: bytes) -> None:
        """Append ``block`` to ``buf`` (the pending piece), cutting every string that
        grows past the cap; ``buf`` is changed in place."""
        if self.dropping:
            close = _closing_quote(block, 0, 0, self.escaped)
            if close < 0:
                self.escaped = _ends_in_escape(block, self.escaped)
                return
            self.dropping = False
            self.pos = len(buf) + 1
            self.start = -1
            buf += block[close:]
        else:
            buf += block
        self._scan(buf)

    def _scan(self, buf: bytearray) -> None:
        while True:
            if self.start < 0:
                quote = buf.find(b'"', self.pos)
                if quote < 0:
                    self.pos = len(buf)
                    return
                self.start = self.pos = quote + 1
            close = _closing_quote(buf, self.pos, self.start)
            if close < 0:
                if len(buf) - self.start > self.cap:
                    self.escaped = _backslash_run(buf, len(buf), self.start) % 2 == 1
                    del buf[_safe_cut(buf, self.start, self.start + self.cap):]
                    buf += CUT_MARK
                    self.dropping = True
                    self.cut += 1
                self.pos = len(buf)
                return
            if close - self.start > self.cap:
                keep = _safe_cut(buf, self.start, self.start + self.cap)
                buf[keep:close] = CUT_MARK
                close = keep + len(CUT_MARK)
                self.cut += 1
            self.pos = close + 1
            self.start = -1


def _closing_quote(data: bytes | bytearray, pos: int, floor: int,
                   escaped: bool = False) -> int:
    """The first unescaped ``"`` at or after ``pos`` in a string whose content starts at
    ``floor``; ``escaped``: the byte before ``floor`` opened an escape (a backslash that
    was itself not escaped), for a string continued from bytes already dropped."""
    while True:
        quote = data.find(b'"', pos)
        if quote < 0:
            return -1
        run = _backslash_run(data, quote, floor)
        if run == quote - floor:
            run += escaped
        if run % 2 == 0:
            return quote
        pos = quote + 1


def _backslash_run(data: bytes | bytearray, end: int, floor: int) -> int:
    """How many backslashes come just before ``data[end]``, not looking below ``floor``."""
    j = end - 1
    while j >= floor and data[j] == 0x5C:  # "\\"
        j -= 1
    return end - 1 - j


def _ends_in_escape(data: bytes | bytearray, escaped: bool) -> bool:
    """Whether string content ``data`` ends in a backslash that opens an escape, given
    whether the byte before it did."""
    run = _backslash_run(data, len(data), 0)
    if run == len(data):
        run += escaped
    return run % 2 == 1


def _safe_cut(buf: bytes | bytearray, start: int, cut: int) -> int:
    """``cut`` moved back so that the kept ``buf[start:cut]`` ends neither inside a UTF-8
    character nor inside an escape such as ``\\u00e9`` (either would not decode)."""
    while cut > start and (buf[cut] & 0xC0) == 0x80:
        cut -= 1
    # An escape is at most six bytes (\uXXXX); a surrogate pair's first half is dropped
    # too, as its second half is gone.
    tail = bytes(buf[max(start, cut - 12):cut])
    k = tail.rfind(b"\\")
    while k >= 0:
        run = 1
        while k - run >= 0 and tail[k - run] == 0x5C:
            run += 1
        if run % 2 == 1:  # tail[k] opens an escape
            size = 6 if tail[k + 1:k + 2] == b"u" else 2
            at = cut - len(tail) + k
            if cut - at < size or (size == 6 and tail[k + 2:k + 3] in (b"d", b"D")
                                   and tail[k + 3:k + 4] in b"89abAB"):
                cut = at
                tail = tail[:k]
                k = tail.rfind(b"\\")
                continue
        break
    return cut
