"""The pure half of ``bench/run_json_readers.py``: the stretches of a trace every reader
gets, the pieces ours decodes, the rewrite pyarrow needs, and the Markdown tables the README
quotes. Nothing here imports a reader."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The block size of ``trace/stream.py``: the pieces ours decodes.
PIECE_BYTES = 1 << 18
#: Where a window's first whole event starts (Kineto writes ``ph`` first).
_EVENT_START = re.compile(rb'\{\s*"ph"')
#: The comma between two events: ``}`` and ``{`` around it (only between events in Kineto's
#: output, whose args hold no list of objects).
_BETWEEN = re.compile(rb"\}\s*,\s*\{")


def cut_windows(path: Path, total_mb: float, count: int,
                cut: Callable[[bytes, int], int]) -> list[bytes]:
    """``count`` stretches of whole events of ``path``, ``total_mb`` MB in all, spread evenly
    from its start to its end; each ends at ``cut(buf, limit)`` (the last clean cut between
    two events before ``limit``) and holds the events without the brackets around them."""
    size = path.stat().st_size
    each = int(total_mb * (1 << 20)) // count
    slack = 1 << 20  # read past the window: its first event starts a little way in
    out = []
    with path.open("rb") as fh:
        for i in range(count):
            at = max(0, (size - each) * i // max(count - 1, 1))
            fh.seek(at)
            raw = fh.read(each + slack)
            first = _EVENT_START.search(raw)
            if first is None:
                continue
            end = cut(raw, min(len(raw), first.start() + each))
            if end > first.start():
                out.append(raw[first.start():end])
    return out


def pieces_of(window: bytes, cut: Callable[[bytes, int], int],
              size: int = PIECE_BYTES) -> list[bytes]:
    """The window as ``[…]`` arrays of about ``size`` bytes each, split between events."""
    out = []
    pos = 0
    while pos < len(window):
        rest = len(window) - pos
        end = rest if rest <= size else cut(window[pos:pos + size], size)
        if end <= 0:
            end = rest
        out.append(b"[" + window[pos:pos + end] + b"]")
        nxt = window.find(b"{", pos + end)
        pos = len(window) if nxt < 0 else nxt
    return out


def to_ndjson(window: bytes) -> bytes:
    """The window's events one per line, as pyarrow's reader wants them."""
    return _BETWEEN.sub(b"}\n{", window)


def ratio_table(rows: list[dict[str, Any]]) -> str:
    """The results as a Markdown table: per file and reader, wall and CPU seconds, MB/s,
    and the wall as a multiple of ours (the whole path: decode, build and free)."""
    lines = ["| file | reader | rows | wall s | CPU s | MB/s | × ours |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = r["ours_wall"]
        for name, res in r["readers"].items():
            if "error" in res:
                lines.append(f"| {r['file']} | {name} | — | failed: {res['error']} | | | |")
                continue
            times = f"{res['wall']:.3f} | {res['cpu']:.3f}"
            speed = r["mb"] / res["wall"] if res["wall"] else float("inf")
            rel = f"{res['wall'] / ours:.2f}×" if ours else "—"
            lines.append(f"| {r['file']} | {name} | {res['rows']} | {times} | {speed:.0f} "
                         f"| {rel} |")
    return "\n".join(lines)


def whole_table(rows: list[dict[str, Any]]) -> str:
    """The whole-file results as a Markdown table (peak RSS as a multiple of the file)."""
    lines = ["| file | MB | reader | rows out | wall s | CPU s | peak RSS MB | RSS / file |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for name, res in r["readers"].items():
            if "error" in res:
                lines.append(f"| {r['file']} | {r['mb']:.0f} | {name} | — | failed: "
                             f"{res['error']} | | | |")
                continue
            lines.append(f"| {r['file']} | {r['mb']:.0f} | {name} | {res['rows']} | "
                         f"{res['wall']:.2f} | {res['cpu']:.2f} | {res['peak_mb']:.0f} | "
                         f"{res['peak_mb'] / r['mb']:.1f}× |")
    return "\n".join(lines)
