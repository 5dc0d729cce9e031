"""Stores of earlier cache formats: what an upgrade leaves behind, and how it goes.

An upgrade bumps :data:`~tb_diagnostics.cache_store.CACHE_FORMAT`, and the new code never
reads an entry of the old layout (its key includes the code's fingerprint anyway). Left
alone, the old store keeps up to the old bound (4 GiB by default) on the user's disk for
good: nothing reads it, nothing evicts it. :func:`retire_old_stores` removes it, with the
same care the cache takes with its own store:

- only ``<root>/tb-diagnostics-cache-v<M>/`` with ``M`` below the current format, and only
  when it holds this cache's ``CACHEDIR.TAG`` (a directory of that name without it is
  someone else's and is never touched);
- only names the old layout made there: format 3's entry directories (32 hex digits)
  holding ``model.bin``, ``results-<variant>.json`` and temporaries, and temporaries
  ``.tbd-*.tmp``; an entry holding anything else is left whole, and so is the store;
- only what has not been used for :data:`IDLE_BEFORE_RETIRE_S`: an older installation
  sharing the cache root (another virtualenv) touches its entries when it reads them,
  and keeps the ones it uses;
- the marker and the directory go last, once nothing else is left in it.

Format 2 wrote entries straight into the root, unmarked: they cannot be told from
someone else's files, so they stay (the module docstring of :mod:`tb_diagnostics.cache`).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

from tb_diagnostics.cache_store import CACHE_FORMAT, MARKER_NAME, is_marked, is_tmp

#: An old store's entry is retired once unused this long (an hour, the stale-temporary
#: age: a live process of an older version reads and touches its entries within it).
IDLE_BEFORE_RETIRE_S = 3600.0
OLD_STORE = re.compile(r"tb-diagnostics-cache-v([0-9]{1,4})")
#: Format 3's layout: one directory per entry, named by the key.
V3_ENTRY_DIR = re.compile(r"[0-9a-f]{32}")
V3_ENTRY_FILE = re.compile(r"model\.bin|results-[0-9A-Za-z_]{1,32}\.json")


def retire_old_stores(root: Path, now: float | None = None) -> int:
    """Remove what this cache wrote in stores of earlier formats under ``root``, idle for
    :data:`IDLE_BEFORE_RETIRE_S`; the bytes freed. Never raises for a file system error:
    what cannot be removed now stays for the next rescan."""
    cutoff = (time.time() if now is None else now) - IDLE_BEFORE_RETIRE_S
    freed = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        m = OLD_STORE.fullmatch(name)
        if not m or int(m.group(1)) >= CACHE_FORMAT:
            continue
        store = root / name
        if store.is_symlink() or not store.is_dir() or not is_marked(store):
            continue
        freed += _retire_store(store, cutoff)
    return freed


def _retire_store(store: Path, cutoff: float) -> int:
    freed = 0
    kept = False
    try:
        listing = list(os.scandir(store))
    except OSError:
        return 0
    for e in listing:
        if e.name == MARKER_NAME:
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if V3_ENTRY_DIR.fullmatch(e.name) and e.is_dir(follow_symlinks=False):
                gone = _retire_entry(Path(e.path), cutoff)
                if gone is None:
                    kept = True
                else:
                    freed += gone
            elif is_tmp(e.name) and not e.is_dir(follow_symlinks=False) \
                    and st.st_mtime < cutoff:
                os.unlink(e.path)
                freed += st.st_size
            else:
                kept = True  # not a name the old layout made, or still in use
        except OSError:
            kept = True
    if not kept:
        with contextlib.suppress(OSError):
            os.unlink(store / MARKER_NAME)
            os.rmdir(store)
    return freed


def _retire_entry(d: Path, cutoff: float) -> int | None:
    """Remove one format-3 entry directory; its bytes, or None when it is kept (used
    lately, or holding a name the old layout did not make)."""
    files = list(os.scandir(d))
    stats = [f.stat(follow_symlinks=False) for f in files]
    if max((s.st_mtime for s in stats), default=d.stat().st_mtime) >= cutoff:
        return None
    if not all(f.is_file(follow_symlinks=False)
               and (V3_ENTRY_FILE.fullmatch(f.name) or is_tmp(f.name)) for f in files):
        return None
    for f in files:
        os.unlink(f.path)
    os.rmdir(d)
    return sum(s.st_size for s in stats)
