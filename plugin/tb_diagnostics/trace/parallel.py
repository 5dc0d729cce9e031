"""One big trace file decoded on several cores, into the very model one core builds.

The file is cut into byte ranges at event boundaries; each range is decoded and turned into
columns by its own process (:class:`ModelBuilder`), and the parts are merged in file
order. The result is *identical* to the one-core load, string table and thread numbering
included, because every range is decoded in exactly the pieces the one-core stream
(:func:`~tb_diagnostics.trace.stream.iter_event_batches`) would cut it into:

- the stream reads blocks of ``BLOCK_BYTES`` from the file's start and, after each block,
  decodes the events before the last ``},{`` in what it holds. A range therefore starts
  at such a cut, the last boundary in one block ``b``, with what the stream holds then
  (the rest of block ``b``) plus block ``b + 1``, the file's prefix (the keys before
  ``traceEvents``) in front so that the stream sees a whole document;
- the range before it reads up to block ``b`` and gets that block only up to the cut,
  followed by ``,{"ph":"M"}]}``: its last piece is cut at the same place, and the
  metadata event without a name, which nothing keeps, ends the array;
- the last range reads on to the end of the file and yields the keys around the array.

Strings and threads are numbered in order of first appearance, so taking the parts in
file order and numbering each part's new ones after the others' gives the one-core
numbers. A range whose edges do not decode (a boundary inside a string) makes the
parallel load give up, and the caller loads the file on one core.

Only local, uncompressed files of at least :data:`MIN_BYTES` are cut, and only in a
top-level process (a pool's worker already shares the cores with its siblings). Each part
holds only its columns, so the processes together stay near the one-core peak.

Every process reads the one descriptor the loader opened (the others inherit it), each at
its own offsets (``os.pread``): a file renamed over the path meanwhile is never read, so
the parts always come from one file.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tb_diagnostics.trace import stream
from tb_diagnostics.trace.build import ModelBuilder
from tb_diagnostics.trace.compressed import sniff
from tb_diagnostics.trace.model import TraceModel
from tb_diagnostics.trace.source import (
    BoundedCalls,
    LocalTrace,
    ReadStalled,
    pread_at,
    read_timeout,
)

#: Files smaller than this load on one core (starting processes costs ~0.5 s).
MIN_BYTES = 192 << 20
#: Bytes of file per process at least, and the most processes.
MIN_RANGE_BYTES = 96 << 20
MAX_WORKERS = 8
#: What each range read by another process has less than the last, read by this one (it
#: starts at once; another process first starts Python and imports the engine, then
#: pickles its part: ~0.4 s, some 30-60 MB of a trace's decoding).
HEAD_START_BYTES = 32 << 20
#: Closes the array after a range's last event: a metadata event that nothing keeps.
_END = b',{"ph":"M"}]}'
_EVENT_START = re.compile(rb'\s*\{\s*"[A-Za-z_][A-Za-z_ ]{0,39}"\s*:')
#: Blocks before a cut that must each hold an event boundary (no giant event near a cut).
_CHECKED_BLOCKS = 8
#: A range's process exits with this when a read of the file stalled.
_STALLED_EXIT = 75
#: Blocks a range's helper reads at once (see :func:`_blocks`).
AHEAD_BLOCKS = 8


class NotSplittable(Exception):
    """This file is loaded on one core."""


@dataclass(frozen=True)
class Range:
    """One range: ``first`` is None for the first range (it reads from the file's start),
    else ``(cut, block)``: it starts after the boundary ``cut`` in block ``block``. ``stop``
    is None for the last range, else the next range's ``(cut, block)``."""

    fd: int  # the loader's descriptor of the file (inherited by the range's process)
    prefix_len: int
    block: int
    first: tuple[int, int] | None
    stop: tuple[int, int] | None


def workers_for(size: int) -> int:
    """How many processes load a file of ``size`` bytes (1: the one-core load)."""
    env = os.environ.get("TB_DIAGNOSTICS_LOAD_WORKERS")
    if env is not None:
        try:
            cap = max(1, int(env))
        except ValueError:
            cap = 1
    else:
        cap = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                  else os.cpu_count() or 1, MAX_WORKERS)
    if size < MIN_BYTES or multiprocessing.parent_process() is not None:
        return 1
    return max(1, min(cap, size // MIN_RANGE_BYTES))


def _blocks(r: Range, calls: BoundedCalls) -> Any:
    """The blocks the range's stream reads (see the module's docstring)."""
    size = r.block

    def read(n: int, at: int) -> bytes:
        return calls.call(pread_at, r.fd, n, at)

    if r.first is None:
        pos = 0
    else:
        head = read(r.prefix_len, 0)
        cut, b = r.first
        pos = (b + 2) * size
        # What the stream holds after that cut: the "," between two events dropped.
        yield head + read(pos - cut, cut).lstrip(stream._WS)[1:]
    # The helper reads 2 MiB at a time, ahead of the range (BoundedCalls.ahead): one read
    # per block waited for a wake-up of the helper and of the range each, and a helper
    # running ahead one block at a time waits for the GIL for each (the range holds it
    # while it decodes: 5 ms a switch), slower than the range reads. The blocks are the
    # one-core stream's all the same, a copy of 256 KiB each.
    end = r.stop[1] * size if r.stop is not None else os.fstat(r.fd).st_size
    chunk = size * AHEAD_BLOCKS
    spans = [(r.fd, min(chunk, end - at), at) for at in range(pos, end, chunk)]
    reads = calls.ahead(pread_at, spans, depth=2)
    try:
        for (_, n, _), data in zip(spans, reads, strict=False):
            if not data:
                break
            if len(data) <= size:
                pos += len(data)
                yield data
            else:
                view = memoryview(data)
                for at in range(0, len(data), size):
                    block = bytes(view[at:at + size])
                    pos += len(block)
                    yield block
                del view
            if len(data) < n:
                break  # a short read (the end of the file): go on one block at a time
    finally:
        reads.close()  # the answers not taken are waited out before the next read
    while r.stop is None or pos < end:
        data = read(size, pos)
        if not data:
            return
        pos += len(data)
        yield data
    cut = r.stop[0]
    yield read(cut - pos, pos) + _END


def build_range(r: Range, shown: str, calls: BoundedCalls) -> tuple[dict[str, Any], Any]:
    """Decode one range into columns: (the builder's parts, the file's top-level keys)."""
    builder = ModelBuilder(shown)
    for item in stream.iter_event_batches(_blocks(r, calls)):
        if not isinstance(item, list):
            return builder.export(), item
        builder.add(item)
        del item
    raise NotSplittable("the range ended early")  # pragma: no cover - the stream yields top


def _child(r: Range, shown: str) -> dict[str, Any]:
    parts, top = build_range(r, shown, BoundedCalls(read_timeout()))
    parts["problems"] = Counter(getattr(top, "problems", None) or {})
    return parts


def plan(source: LocalTrace, workers: int) -> list[Range]:
    """The ranges of a file, or :class:`NotSplittable`."""
    size = source.size
    block = stream.BLOCK_BYTES
    n_blocks = -(-size // block)
    fh = source.reader()
    first = fh.read(block)
    if sniff(first) is not None:
        raise NotSplittable("compressed")
    m = stream._EVENTS_KEY.search(first)
    if m is None or first[:m.start()].lstrip(stream._WS)[:1] != b"{":
        raise NotSplittable("no traceEvents key in the first block")
    prefix_len = m.end()
    cuts: list[tuple[int, int]] = []
    # The ranges but the last go to fresh interpreters, which start, import and pickle
    # their part while this process builds the last: they are shorter, so that all end
    # together (the last was waited for 0.3-0.6 s of a 534 MB trace's 3 s ranges).
    extra = min(HEAD_START_BYTES // block, n_blocks // (4 * workers))
    shorter = [k * (n_blocks - extra) // workers for k in range(1, workers)]
    equal = [k * n_blocks // workers for k in range(1, workers)]
    for at in ([shorter, equal] if extra else [equal]):
        # Equal ranges where the shorter ones leave too few blocks between cuts, or a cut
        # of theirs has no clean boundary near it.
        try:
            if not _spaced(at, n_blocks):
                raise NotSplittable("too few blocks")
            cuts = [(_cut_in_block(fh, b, block), b) for b in at]
            break
        except NotSplittable:
            if at is equal:
                raise
    ranges = []
    edges: list[tuple[int, int] | None] = [None, *cuts, None]
    for k in range(workers):
        ranges.append(Range(source.fd, prefix_len, block, edges[k], edges[k + 1]))
    return ranges


def _spaced(at: list[int], n_blocks: int) -> bool:
    """Whether cuts after these blocks leave each range enough blocks around its edges
    (the checked blocks before the first, two between cuts, three after the last)."""
    return all(b >= _CHECKED_BLOCKS + 2 and b + 3 < n_blocks and (k == 0 or b > at[k - 1] + 2)
               for k, b in enumerate(at))


def _cut_in_block(fh: Any, b: int, block: int) -> int:
    """The one-core stream's cut after block ``b``: the last ``},{`` in it; the blocks
    before it and the one after must each hold a boundary and not be blank (the stream
    then cuts on every block there, never follows a giant string)."""
    fh.seek((b - _CHECKED_BLOCKS) * block)
    data = fh.read((_CHECKED_BLOCKS + 2) * block)
    pieces = [data[i * block:(i + 1) * block] for i in range(_CHECKED_BLOCKS + 2)]
    if any(len(p) < block or stream._blank(p) or stream._cut(p) <= 0 for p in pieces):
        raise NotSplittable("no clean boundary near a cut")
    at = pieces[_CHECKED_BLOCKS]
    cut = stream._cut(at)
    # An event starts after it (``{`` then a key), as every Kineto event does; a ``},{``
    # inside a string is seldom followed by that (and a range cut there does not decode).
    rest = at[cut:].lstrip(stream._WS)[1:]
    if not _EVENT_START.match(rest):
        raise NotSplittable("the boundary is not between two events")
    return b * block + cut


def load_parallel(source: LocalTrace | str, shown: str, workers: int) -> TraceModel:
    """The model of ``source`` (an open file, or a path to open) built by ``workers``
    processes (raises :class:`NotSplittable`, :class:`ReadStalled`, or what decoding a
    range raises: the caller then loads it on one core).

    The other ranges go to fresh interpreters (``python -m`` this module), never forks
    of this process (a server's threads) nor re-imports of its main module; they inherit
    the descriptor."""
    if isinstance(source, str):
        with LocalTrace(source) as opened:
            return load_parallel(opened, shown, workers)
    ranges = plan(source, workers)
    import tb_diagnostics

    env = dict(os.environ)
    root = str(Path(tb_diagnostics.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="tb-diagnostics-load-") as tmp:
        procs = []
        try:
            for k, r in enumerate(ranges[:-1]):
                out = os.path.join(tmp, f"part{k}.pickle")
                procs.append((subprocess.Popen(
                    [sys.executable, "-m", __name__, json.dumps(asdict(r)), shown, out],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, env=env, pass_fds=(source.fd,)), out))
            # The last range here: its stream yields the keys around the array.
            last, top = build_range(ranges[-1], shown, source.calls)
            builder = ModelBuilder(shown)
            known = [_rows(last)]  # the rows of the parts in hand
            problems: Counter[str] = Counter()
            for proc, out in procs:
                rc = proc.wait()
                if rc == _STALLED_EXIT:
                    raise ReadStalled(source.calls.timeout or 0.0)
                if rc != 0:
                    raise NotSplittable("a range did not decode")
                with open(out, "rb") as fh:
                    parts = pickle.load(fh)
                os.unlink(out)
                problems.update(parts.pop("problems"))
                known.append(_rows(parts))
                builder.merge(parts, _expected_rows(known, len(ranges)))
                del parts
        finally:
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    builder.merge(last, _expected_rows(known, len(ranges)))
    del last
    problems.update(getattr(top, "problems", None) or {})
    # The one-core stream counts cut giant strings once, after everything else.
    for key in [k for k in problems if k.startswith("a string longer than")]:
        problems[key] = problems.pop(key)
    top.problems = problems
    return builder.finish(top)


def _rows(part: dict[str, Any]) -> int:
    """The rows of an exported part (every column has them all)."""
    return max((n for *_, n in part["columns"].values()), default=0)


def _expected_rows(known: list[int], parts: int) -> int:
    """The rows the merged columns will hold: those known, and for each part not yet in
    hand a fifth more than the largest known (ranges are equal in bytes). Too many costs
    only address space (a buffer's untouched tail is never resident); too few, a copy."""
    return sum(known) + (parts - len(known)) * (max(known, default=0) * 6 // 5)


def _main(argv: list[str]) -> int:
    spec, shown, out = argv
    d = json.loads(spec)
    r = Range(**{**d, "first": tuple(d["first"]) if d["first"] else None,
                 "stop": tuple(d["stop"]) if d["stop"] else None})
    try:
        parts = _child(r, shown)
    except ReadStalled:
        os._exit(_STALLED_EXIT)  # a daemon thread is stuck in a read: do not wait for it
    with open(out + ".tmp", "wb") as fh:
        pickle.dump(parts, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
