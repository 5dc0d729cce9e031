"""The cache's own directory and the names in it: the only place the cache writes or deletes.

``<root>/tb-diagnostics-cache-v<N>/`` (:data:`STORE_NAME`) is created with a
``CACHEDIR.TAG`` (the Cache Directory Tagging convention, https://bford.info/cachedir/,
which backup tools honour) saying what it is. Inside it the cache makes only plain
files, side by side (no directory per entry): ``<key>.model`` and
``<key>.<variant>.results`` (:data:`ENTRY_FILE`: the key is 32 hex digits), and
temporaries named ``.tbd-*.tmp``. An entry is the files of one key. These functions
list, size, sweep and delete only such names, and only in a directory that holds the
marker. Every file appears by one rename of a complete temporary, so a reader never
sees half of one, and a write that fails removes its temporary.

Why flat: on a journaling file system each directory is an inode and a directory
entry of its own, and renaming one into place updates two directories. Per new entry
the layout of format 3 (a temporary directory, its file, a directory rename, then a
temporary and a rename for the results) cost about 4x the metadata work of one
temporary file and one rename per file (``/tmp`` on ext4, 2,000 entries: 1.1 ms
against 0.28 ms for a model and its results), and that work was most of what a cold
report of small traces spent on the cache. A scan is also one listing instead of
one per entry.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

#: Bumped whenever an entry's layout changes (with the code fingerprint, which changes
#: with any code, it keeps entries of another layout from ever being read). 4: flat files.
CACHE_FORMAT = 4
STORE_NAME = f"tb-diagnostics-cache-v{CACHE_FORMAT}"
MARKER_NAME = "CACHEDIR.TAG"
MARKER_TEXT = (b"Signature: 8a477f597d28d172789f06886806bc55\n"
               b"# This directory is a cache of parsed traces written by tb-diagnostics.\n"
               b"# Its entries may be deleted at any time; see https://bford.info/cachedir/\n")
#: Every temporary the cache makes in the store.
TMP_PREFIX = ".tbd-"
TMP_SUFFIX = ".tmp"
MODEL_SUFFIX = ".model"
RESULTS_SUFFIX = ".results"
#: The names of an entry's files: the key, then ``.model`` or ``.<variant>.results``.
ENTRY_FILE = re.compile(r"([0-9a-f]{32})\.(?:model|[0-9A-Za-z_]{1,32}\.results)")
VARIANT_NAME = re.compile(r"[0-9A-Za-z_]{1,32}")
#: Temporaries of a writer killed mid-write are swept once they are this old.
STALE_TMP_S = 3600.0


class Entry(NamedTuple):
    """The files of one key: an entry, sized and dated as a whole."""

    key: str
    files: tuple[Path, ...]
    size: int
    last_use: float  # the newest modification time of its files (a read touches its file)


def is_tmp(name: str) -> bool:
    return name.startswith(TMP_PREFIX) and name.endswith(TMP_SUFFIX)


def is_marked(store: Path) -> bool:
    try:
        with open(store / MARKER_NAME, "rb") as fh:
            return fh.read(len(MARKER_TEXT) + 1) == MARKER_TEXT
    except OSError:
        return False


def claim_store(store: Path) -> bool:
    """Create the store with its marker, or find it marked; False when a directory of that
    name is someone else's (unmarked and not empty): it is then never written or evicted."""
    store.mkdir(parents=True, exist_ok=True)
    if is_marked(store):
        return True
    others = [n for n in os.listdir(store) if not is_tmp(n)]
    if MARKER_NAME in others:
        return is_marked(store)  # another process has just written it
    if others:
        return False
    # Written whole under a temporary name, then linked: a reader never sees half of it.
    fd, tmp = tempfile.mkstemp(dir=store, prefix=TMP_PREFIX, suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MARKER_TEXT)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, store / MARKER_NAME)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return is_marked(store)


def write_file(store: Path, name: str, parts: Iterable[Any]) -> int:
    """Write ``store/name`` whole from ``parts`` (buffers, in order): a temporary in the
    store, then one rename over whatever was there (another process's copy of the same
    key holds the same bytes); the bytes written. Whatever fails, the temporary goes."""
    fd, tmp = tempfile.mkstemp(dir=store, prefix=TMP_PREFIX, suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            written = sum(fh.write(p) for p in parts)
        os.replace(tmp, store / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return written


def scan_store(store: Path, sweep_before: float | None) -> tuple[list[Entry], int]:
    """The store's entries and the number of files they hold; with ``sweep_before``, its
    temporaries older than that go (a killed writer's: a live writer's are younger)."""
    files: dict[str, list[tuple[Path, int, float]]] = {}
    n_files = 0
    try:
        with os.scandir(store) as it:
            listing = list(it)
    except OSError:
        return [], 0
    for e in listing:
        try:
            m = ENTRY_FILE.fullmatch(e.name)
            if m and e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)
                files.setdefault(m.group(1), []).append((Path(e.path), st.st_size,
                                                         st.st_mtime))
                n_files += 1
            elif (sweep_before is not None and is_tmp(e.name)
                  and e.stat(follow_symlinks=False).st_mtime < sweep_before):
                if e.is_dir(follow_symlinks=False):  # none are made now; a tool's copy may
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
        except OSError:
            continue  # evicted or swept by another process meanwhile
    entries = [Entry(key, tuple(p for p, _, _ in fs), sum(s for _, s, _ in fs),
                     max(t for _, _, t in fs)) for key, fs in files.items()]
    return entries, n_files


def evict_oldest(entries: list[Entry], target: float) -> tuple[int, int]:
    """Delete least recently used entries (each with all its files) until their total is
    at most ``target``; (bytes, files) left."""
    total = sum(e.size for e in entries)
    left = sum(len(e.files) for e in entries)
    for e in sorted(entries, key=lambda e: e.last_use):
        if total <= target:
            break
        for p in e.files:
            with contextlib.suppress(OSError):  # already gone: another process evicted it
                os.unlink(p)
        total -= e.size
        left -= len(e.files)
    return total, left
