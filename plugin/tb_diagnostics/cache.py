"""A persistent cache of built models and analysis results, outside the log dir.

The second open of a trace should not parse it again. The cache root is
``$TB_DIAGNOSTICS_CACHE``, else ``$XDG_CACHE_HOME/tb-diagnostics``, else
``~/.cache/tb-diagnostics``; entries are keyed by the file's URL, size and mtime
and by a fingerprint of this package's code, so a rewritten trace or an upgraded
tool never reads a stale entry.

**The cache owns only what it wrote.** The root may be a shared directory full
of other data, so everything lives in one directory of its own,
``<root>/tb-diagnostics-cache-v<N>/`` (:data:`STORE_NAME`), marked by a
``CACHEDIR.TAG`` (the Cache Directory Tagging convention, which backup tools
honour) that it writes when it creates the directory. Eviction, the sweep of a
killed writer's temporaries and the size accounting look only at names the cache
itself makes there (entries: 32 hex digits; temporaries: :data:`TMP_PREFIX` …
``.tmp``); nothing else under the root is ever listed, sized or deleted, and a
store directory without the marker is neither written nor evicted from (the
cache is off, with one warning). Entries of earlier layouts, directly in the
root, are not read and are left alone. A cache root inside a local log dir is
refused (:func:`cache_for_logdir`): nothing is ever written into a log dir.

An entry is a directory: ``model.bin`` (the columns and their metadata, one file
read in one call: :mod:`tb_diagnostics.cache_format`) and one
``results-<variant>.json`` per threshold setting. Every write goes to a
temporary name and is renamed into place, so two processes sharing the cache
never see half an entry; a write that fails removes its temporary, and on a
full disk (ENOSPC, EDQUOT, EFBIG) writes are off for the rest of the process,
with one warning.

**Bookkeeping is O(1) amortized per write.** The total size is bounded, least
recently used first out, but sizing the cache means listing every entry, so it
is not done per write. Each process keeps running books per store (module
level: the pool's jobs each build a :class:`TraceCache`, but a worker process
lives on): bytes and writes since its last scan. It rescans (sizes, sweeps and
evicts) only when its own writes since then pass :data:`HEADROOM` of the bound,
or their count passes the number of entries the last scan saw (at least
:data:`MIN_WRITES_PER_SCAN`); each scan evicts down to ``1 - HEADROOM`` of the
bound. So a scan of E entries comes after at least ~E/10 writes, and P processes
writing at once exceed the bound by at most P headrooms (plus one entry each).
A shared on-disk index would be exact across processes, but it needs a lock
and is one more file to corrupt; the directory itself stays the only truth.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from tb_diagnostics.cache_format import model_from_buffer, model_parts
from tb_diagnostics.cache_store import (
    CACHE_FORMAT,
    MARKER_NAME,
    STALE_TMP_S,
    STORE_NAME,
    TMP_PREFIX,
    claim_store,
    evict_oldest,
    is_marked,
    publish,
    replace_file,
    scan_store,
)
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.output import decode_json, encode_json
from tb_diagnostics.storage import is_local, local_path
from tb_diagnostics.trace.model import TraceModel

_log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 4 << 30
#: The share of the bound one process may write between two scans (see the docstring).
HEADROOM = 0.1
MIN_WRITES_PER_SCAN = 64
#: A full disk or quota: writing again would only fail again.
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
MODEL_FILE = "model.bin"
__all__ = ["CACHE_FORMAT", "MODEL_FILE", "STALE_TMP_S", "STORE_NAME", "TMP_PREFIX",
           "CacheLocationError", "TraceCache", "cache_for_logdir", "default_cache_dir",
           "digest"]


class CacheLocationError(ValueError):
    """The cache root lies inside the log dir it would cache (one line, naming both)."""


def default_cache_dir() -> Path:
    env = os.environ.get("TB_DIAGNOSTICS_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tb-diagnostics"


try:
    # hashlib's blake2b itself, imported without hashlib, which loads OpenSSL (3.6 MB
    # resident) even for the hashes CPython implements on its own.
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - other Python implementations
    from hashlib import blake2b


def digest(text: str, size: int) -> str:
    """A hex digest of ``text``, ``size`` characters long (a key, not a secret). File names
    that are not UTF-8 reach here with surrogate escapes: they hash as their bytes."""
    return blake2b(text.encode("utf-8", "surrogateescape"), digest_size=size // 2).hexdigest()


def _results_head(body: bytes) -> bytes:
    """The first line of a results file: its format and its content's checksum."""
    checksum = blake2b(body, digest_size=16).hexdigest()
    return f"tb-diagnostics-results {CACHE_FORMAT} {checksum}".encode()


@cache
def code_fingerprint() -> str:
    """Changes whenever any module of this package changes (so does what it computes)."""
    pkg = Path(__file__).resolve().parent
    parts = []
    for p in sorted(pkg.rglob("*.py")):
        st = p.stat()
        parts.append(f"{p.relative_to(pkg)}:{st.st_size}:{st.st_mtime_ns}")
    return digest("\n".join(parts), 16)


def cache_for_logdir(logdir: str | os.PathLike[str] | None,
                     root: Path | str | None = None,
                     max_bytes: int = DEFAULT_MAX_BYTES) -> TraceCache:
    """The cache for analysing ``logdir``; raises :class:`CacheLocationError` when its root
    is the log dir or inside it (symlinks and ``..`` resolved), or when the log dir lies
    inside the cache's own directory. URLs cannot hold a local cache: not checked."""
    tc = TraceCache(root, max_bytes)
    if logdir is None or not is_local(os.fspath(logdir)):
        return tc
    text = local_path(os.fspath(logdir))
    ld = Path(text).expanduser().resolve()
    where = tc.root.expanduser().resolve()
    if where == ld or where.is_relative_to(ld):
        raise CacheLocationError(
            f"the cache directory {tc.root} is inside the log dir {text}, where nothing may "
            "be written: set TB_DIAGNOSTICS_CACHE to a directory outside it")
    if ld.is_relative_to(where / STORE_NAME):
        raise CacheLocationError(f"the log dir {text} is inside the cache directory "
                                 f"{where / STORE_NAME}, whose entries are evicted")
    return tc


@dataclass
class _Books:
    """One process's view of one store (see the module docstring)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    owned: bool | None = None  # the marker was found or written; None: not looked yet
    off: bool = False  # a full disk: no more writes in this process
    warned: bool = False
    scanning: bool = False
    bytes_since: int = 0
    writes_since: int = 0
    budget: int | None = None  # bytes until the next scan; None: not scanned yet
    entries_seen: int = 0


_BOOKS: dict[str, _Books] = {}
_BOOKS_LOCK = threading.Lock()


class TraceCache:
    """Built models and results on disk; every method is safe to call concurrently."""

    def __init__(self, root: Path | str | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self.store = self.root / STORE_NAME
        self._books_key = os.path.abspath(self.store)

    @staticmethod
    def for_logdir_or_none(logdir: str | None) -> TraceCache | None:
        """The default cache for ``logdir``, or None (with one warning) when it would lie
        inside it: the tab then runs without a cache rather than write into the log dir."""
        try:
            return cache_for_logdir(logdir)
        except CacheLocationError as exc:
            _log.warning("tb-diagnostics: %s; running without the cache", exc)
            return None

    # ---- keys --------------------------------------------------------------
    def entry(self, f: SpanFile) -> Path | None:
        """The entry directory for a file, or None when the file cannot be keyed safely."""
        if f.size is None or f.mtime is None:
            return None
        raw = f"{code_fingerprint()}|{f.url}|{f.size}|{f.mtime!r}"
        return self.store / digest(raw, 32)

    @property
    def _books(self) -> _Books:
        books = _BOOKS.get(self._books_key)
        if books is not None:
            return books
        with _BOOKS_LOCK:
            return _BOOKS.setdefault(self._books_key, _Books())

    # ---- models --------------------------------------------------------------
    def get_model(self, f: SpanFile) -> TraceModel | None:
        d = self.entry(f)
        if d is None or self._books.owned is False:
            return None
        try:
            with open(d / MODEL_FILE, "rb") as fh:
                raw = bytearray(os.fstat(fh.fileno()).st_size)
                complete = fh.readinto(raw) == len(raw)
        except OSError:
            return None  # none yet, or another process is evicting it: a miss, not damage
        try:
            model = model_from_buffer(raw, CACHE_FORMAT, f.relpath) if complete else None
        except Exception:  # any damage (a cut file, an edited header) is a miss
            model = None
        if model is None:
            # A damaged entry is dropped, so that the next put writes it anew (only from
            # a store that is marked as the cache's: nothing else is ever deleted).
            if is_marked(self.store):
                shutil.rmtree(d, ignore_errors=True)
            return None
        self._touch(d)
        return model

    def put_model(self, f: SpanFile, model: TraceModel) -> None:
        d = self.entry(f)
        if d is None or not self._writable():
            return
        parts = model_parts(model, CACHE_FORMAT)
        if parts is None:
            return

        def write(tmp: Path) -> int:
            with open(tmp / MODEL_FILE, "wb") as fh:
                return sum(fh.write(p) for p in parts)

        self._guarded(lambda: publish(self.store, d, write))

    # ---- results -------------------------------------------------------------
    def get_results(self, f: SpanFile, variant: str) -> Any | None:
        d = self.entry(f)
        if d is None or self._books.owned is False:
            return None
        p = d / f"results-{variant}.json"
        try:
            head, _, body = p.read_bytes().partition(b"\n")
        except OSError:
            return None
        # The first line is the format and the checksum of the rest: an edited, partial
        # or foreign file is a miss (and goes), never served.
        ok = head == _results_head(body)
        data = None
        if ok:
            try:
                data = decode_json(body)
            except msgspec.DecodeError:
                ok = False
        if not ok or not isinstance(data, dict):
            if is_marked(self.store):
                with contextlib.suppress(OSError):
                    p.unlink()
            return None
        self._touch(d)
        return data

    def put_results(self, f: SpanFile, variant: str, results: Any) -> None:
        d = self.entry(f)
        if d is None or not self._writable():
            return
        # encode_json: names that are not UTF-8 stay exact (msgspec alone refuses them).
        body = encode_json(results)
        data = _results_head(body) + b"\n" + body
        name = f"results-{variant}.json"
        if d.is_dir():
            self._guarded(lambda: replace_file(d, name, data))
        else:  # a new entry holding just these results: published whole, as models are
            self._guarded(lambda: publish(
                self.store, d, lambda tmp: (tmp / name).write_bytes(data)))

    # ---- writing ---------------------------------------------------------------
    def _writable(self) -> bool:
        """Whether this process may write: the store is ours and the disk was not full."""
        b = self._books
        if b.off or b.owned is False:
            return False
        if b.owned is None:
            try:
                b.owned = claim_store(self.store)
            except OSError as exc:
                if exc.errno in _FULL:
                    self._turn_off(exc)
                    return False
                raise
            if not b.owned:
                self._warn_once(f"{self.store} exists but holds no {MARKER_NAME} of "
                                "tb-diagnostics; it is not the cache's: caching is off")
        return bool(b.owned)

    def _guarded(self, write: Callable[[], int]) -> None:
        """Run a write; on a full disk turn writing off for this process (one warning)."""
        try:
            written = write()
        except OSError as exc:
            if exc.errno not in _FULL:
                raise
            self._turn_off(exc)
            return
        self._account(written)

    def _turn_off(self, exc: OSError) -> None:
        self._books.off = True
        self._warn_once(f"cannot write to the cache at {self.store} "
                        f"({exc.strerror or exc}): caching is off for the rest of this run")

    def _warn_once(self, message: str) -> None:
        b = self._books
        with b.lock:
            if b.warned:
                return
            b.warned = True
        _log.warning("tb-diagnostics: %s", message)

    def _touch(self, d: Path) -> None:
        try:
            now = time.time()
            os.utime(d, (now, now))
        except OSError:
            pass

    # ---- bookkeeping -----------------------------------------------------------
    def _account(self, written: int) -> None:
        """Add one write to this process's books; rescan when they say it is due."""
        b = self._books
        headroom = int(self.max_bytes * HEADROOM)
        with b.lock:
            b.bytes_since += written
            b.writes_since += 1
            budget = headroom if b.budget is None else b.budget
            due = (b.bytes_since > budget
                   or b.writes_since >= max(MIN_WRITES_PER_SCAN, b.entries_seen))
            if not due or b.scanning:
                return
            b.scanning = True
            b.bytes_since = b.writes_since = 0
        try:
            total, n = self.rescan()
        finally:
            with b.lock:
                b.scanning = False
        with b.lock:
            b.entries_seen = n
            b.budget = max(0, min(headroom, self.max_bytes - total))

    def entries(self) -> list[tuple[Path, int, float]]:
        """(entry, bytes, last use) of every complete entry."""
        return scan_store(self.store, sweep_before=None)

    def size(self) -> int:
        return sum(s for _, s, _ in self.entries())

    def rescan(self) -> tuple[int, int]:
        """Size the store, sweep a killed writer's temporaries (older than
        ``STALE_TMP_S``; a live writer's are younger) and evict least recently used entries
        down to ``1 - HEADROOM`` of the bound once it is passed; (bytes, entries) left.
        Does nothing to a store without the marker."""
        if not is_marked(self.store):
            return 0, 0
        entries = scan_store(self.store, sweep_before=time.time() - STALE_TMP_S)
        return evict_oldest(entries, self.max_bytes * (1 - HEADROOM))
