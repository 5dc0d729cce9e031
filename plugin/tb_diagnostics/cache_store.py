"""The cache's own directory and the names in it: the only place the cache writes or deletes.

``<root>/tb-diagnostics-cache-v<N>/`` (:data:`STORE_NAME`) is created with a
``CACHEDIR.TAG`` (the Cache Directory Tagging convention, https://bford.info/cachedir/,
which backup tools honour) saying what it is. Inside it the cache makes only entry
directories named by 32 hex digits and temporaries named ``.tbd-*.tmp``; these
functions list, size, sweep and delete only such names, and only in a directory that
holds the marker. Every file appears by one rename of a complete temporary, so a
reader never sees half of one, and a write that fails removes its temporary.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

#: Bumped whenever an entry's layout changes (with the code fingerprint, which changes
#: with any code, it keeps entries of another layout from ever being read).
CACHE_FORMAT = 3
STORE_NAME = f"tb-diagnostics-cache-v{CACHE_FORMAT}"
MARKER_NAME = "CACHEDIR.TAG"
MARKER_TEXT = (b"Signature: 8a477f597d28d172789f06886806bc55\n"
               b"# This directory is a cache of parsed traces written by tb-diagnostics.\n"
               b"# Its entries may be deleted at any time; see https://bford.info/cachedir/\n")
#: Every temporary the cache makes (directories in the store, files in an entry).
TMP_PREFIX = ".tbd-"
TMP_SUFFIX = ".tmp"
ENTRY_NAME = re.compile(r"[0-9a-f]{32}")
#: Temporaries of a writer killed mid-write are swept once they are this old.
STALE_TMP_S = 3600.0

Entry = tuple[Path, int, float]  # (directory, bytes, last use)


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


def replace_file(d: Path, name: str, data: bytes) -> int:
    """Write ``d/name`` whole (temporary, then rename); the bytes written."""
    fd, tmp = tempfile.mkstemp(dir=d, prefix=TMP_PREFIX, suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, d / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return len(data)


def publish(store: Path, d: Path, write: Callable[[Path], int]) -> int:
    """Have ``write`` fill a temporary directory (returning its bytes), then rename it to
    the entry ``d``, or add its files to the entry another process published meanwhile;
    the bytes added. Whatever fails, the temporary goes."""
    tmp = Path(tempfile.mkdtemp(dir=store, prefix=TMP_PREFIX, suffix=TMP_SUFFIX))
    moved: list[Path] = []
    try:
        written = write(tmp)
        try:
            os.rename(tmp, d)
            return written
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        # Another process built the same entry meanwhile (or results came first): keep
        # its files, add ours where missing, each whole by one rename.
        for p in tmp.iterdir():
            if not (d / p.name).exists():
                os.replace(p, d / p.name)
                moved.append(d / p.name)
        return written
    except BaseException:
        for p in moved:  # no half of a write left in someone else's entry
            with contextlib.suppress(OSError):
                p.unlink()
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def scan_store(store: Path, sweep_before: float | None) -> list[Entry]:
    """The store's entries; with ``sweep_before``, its temporaries older than that go
    (a killed writer's: a live writer's are younger)."""
    out: list[Entry] = []
    try:
        with os.scandir(store) as it:
            listing = list(it)
    except OSError:
        return out
    for e in listing:
        try:
            if ENTRY_NAME.fullmatch(e.name) and e.is_dir(follow_symlinks=False):
                size = _entry_size(Path(e.path), sweep_before)
                out.append((Path(e.path), size, e.stat(follow_symlinks=False).st_mtime))
            elif (sweep_before is not None and is_tmp(e.name)
                  and e.stat(follow_symlinks=False).st_mtime < sweep_before):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
        except OSError:
            continue  # evicted or swept by another process meanwhile
    return out


def _entry_size(d: Path, sweep_before: float | None) -> int:
    size = 0
    with os.scandir(d) as it:
        for e in it:
            st = e.stat(follow_symlinks=False)
            if sweep_before is not None and is_tmp(e.name) and st.st_mtime < sweep_before:
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
                continue
            size += st.st_size
    return size


def evict_oldest(entries: list[Entry], target: float) -> tuple[int, int]:
    """Delete least recently used entries until their total is at most ``target``;
    (bytes, entries) left."""
    total = sum(s for _, s, _ in entries)
    left = len(entries)
    for d, s, _ in sorted(entries, key=lambda e: e[2]):
        if total <= target:
            break
        shutil.rmtree(d, ignore_errors=True)
        total -= s
        left -= 1
    return total, left
