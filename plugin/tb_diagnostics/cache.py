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
cache is off, with one warning). Entries of earlier layouts are never read; a
marked store of an earlier format is removed by the rescans once idle, name by name
(:mod:`tb_diagnostics.cache_retire`), and format 2's unmarked entries, directly in the
root, are left alone. A cache root inside a local log dir is
refused (:func:`cache_for_logdir`): nothing is ever written into a log dir.

An entry is the files of one key, side by side in the store (no directory per entry,
see :mod:`tb_diagnostics.cache_store`): ``<key>.model`` (the columns and their
metadata, one file read in one call: :mod:`tb_diagnostics.cache_format`) and one
``<key>.<variant>.results`` per threshold setting. Every write goes to a temporary
name and is renamed into place, so two processes sharing the cache never see half a
file; a write that fails removes its temporary, and on a full disk (ENOSPC, EDQUOT,
EFBIG) writes are off for the rest of the process, with one warning.

**Which models are kept.** A model is read back only when its results are not
(other thresholds, the tab's views, the HTML report), and then the analysis runs
anyway; what the entry saves is the parse minus the read. Measured on this
package's small synthetic traces and the shared real ones (``/tmp`` on ext4, a
2-core VM): a parse costs about 1 ms plus 4-8 µs per row, a read of the entry
0.2-0.3 ms whatever the size, and a write one new file (0.06-0.8 ms of inode
allocation, the dominant cost of a cold report of small traces) plus ~0.1 ms to
lay the columns out. At 20 rows (a trace of two small steps) a reuse saves 0.8 ms,
about what the write cost; at 1,000 it saves 5-9 ms, six to ten times the costliest
write measured. A report run again with the same settings reads the results, so
only a fraction of the models written is ever read back: a model is written from
:data:`MIN_MODEL_ROWS` rows up, where one reuse in six to ten repays the writes;
smaller ones are parsed again when needed (their results are still kept).

**Bookkeeping is O(1) amortized per write.** The total size is bounded, least
recently used first out; each process keeps running books per store and rescans
(sizes, sweeps and evicts) only when its own writes since the last scan pass
:data:`HEADROOM` of the bound or the number of files that scan saw (at least
:data:`MIN_WRITES_PER_SCAN`): :mod:`tb_diagnostics.cache_books` says why.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from tb_diagnostics.cache_books import Books, books_for, record_write
from tb_diagnostics.cache_format import model_from_buffer, model_parts
from tb_diagnostics.cache_retire import retire_old_stores
from tb_diagnostics.cache_store import (
    CACHE_FORMAT,
    MARKER_NAME,
    MODEL_SUFFIX,
    RESULTS_SUFFIX,
    STALE_TMP_S,
    STORE_NAME,
    TMP_PREFIX,
    VARIANT_NAME,
    Entry,
    claim_store,
    evict_oldest,
    is_marked,
    scan_store,
    write_file,
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
#: Models of fewer rows (trace events) are not cached: parsing one again costs little
#: more than writing it did (see "Which models are kept" in the module docstring).
MIN_MODEL_ROWS = 1000
#: A full disk or quota: writing again would only fail again.
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
__all__ = ["CACHE_FORMAT", "STALE_TMP_S", "STORE_NAME", "TMP_PREFIX", "CacheLocationError",
           "Entry", "TraceCache", "cache_for_logdir", "default_cache_dir", "digest"]


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


class CacheSpec(NamedTuple):
    """A cache's configuration, small and picklable, for the pool's workers."""

    root: str
    max_bytes: int
    min_model_rows: int


class TraceCache:
    """Built models and results on disk; every method is safe to call concurrently."""

    def __init__(self, root: Path | str | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 min_model_rows: int = MIN_MODEL_ROWS) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.max_bytes = max_bytes
        self.min_model_rows = min_model_rows
        self.store = self.root / STORE_NAME
        self._books_key = os.path.abspath(self.store)

    def spec(self) -> CacheSpec:
        """What another process needs to open this same cache, configured alike."""
        return CacheSpec(str(self.root), self.max_bytes, self.min_model_rows)

    @staticmethod
    def from_spec(spec: CacheSpec) -> TraceCache:
        return TraceCache(spec.root, max_bytes=spec.max_bytes,
                          min_model_rows=spec.min_model_rows)

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
    def key(self, f: SpanFile) -> str | None:
        """The file's entry key (32 hex digits), or None when it cannot be keyed safely."""
        if f.size is None or f.mtime is None:
            return None
        return digest(f"{code_fingerprint()}|{f.url}|{f.size}|{f.mtime!r}", 32)

    def model_path(self, f: SpanFile) -> Path | None:
        key = self.key(f)
        return None if key is None else self.store / f"{key}{MODEL_SUFFIX}"

    def results_path(self, f: SpanFile, variant: str) -> Path | None:
        key = self.key(f)
        if key is None:
            return None
        if not VARIANT_NAME.fullmatch(variant):  # a name the store's pattern would not own
            variant = digest(variant, 16)
        return self.store / f"{key}.{variant}{RESULTS_SUFFIX}"

    def entry_files(self, f: SpanFile) -> list[Path]:
        """The files the file's entry has now (its model, its results), for inspection."""
        key = self.key(f)
        return [] if key is None else sorted(
            p for p in self.store.glob(f"{key}.*") if p.name.endswith(
                (MODEL_SUFFIX, RESULTS_SUFFIX)))

    @property
    def _books(self) -> Books:
        return books_for(self._books_key)

    # ---- models --------------------------------------------------------------
    def get_model(self, f: SpanFile) -> TraceModel | None:
        p = self.model_path(f)
        if p is None or self._books.owned is False:
            return None
        try:
            with open(p, "rb") as fh:
                raw = bytearray(os.fstat(fh.fileno()).st_size)
                complete = fh.readinto(raw) == len(raw)
        except OSError:
            return None  # none yet, or another process is evicting it: a miss, not damage
        try:
            model = model_from_buffer(raw, CACHE_FORMAT, f.relpath) if complete else None
        except Exception:  # any damage (a cut file, an edited header) is a miss
            model = None
        if model is None:
            # A damaged file is dropped, so that the next put writes it anew (only from
            # a store that is marked as the cache's: nothing else is ever deleted).
            self._drop(p)
            return None
        self._touch(p)
        return model

    def put_model(self, f: SpanFile, model: TraceModel) -> None:
        """Keep the model, unless it is too small to be worth a file (``min_model_rows``)."""
        if len(model) < self.min_model_rows:
            return
        p = self.model_path(f)
        if p is None or not self._writable():
            return
        parts = model_parts(model, CACHE_FORMAT)
        if parts is None:
            return
        self._guarded(lambda: write_file(self.store, p.name, parts))

    # ---- results -------------------------------------------------------------
    def get_results(self, f: SpanFile, variant: str) -> Any | None:
        p = self.results_path(f, variant)
        if p is None or self._books.owned is False:
            return None
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
            self._drop(p)
            return None
        self._touch(p)
        return data

    def put_results(self, f: SpanFile, variant: str, results: Any) -> None:
        p = self.results_path(f, variant)
        if p is None or not self._writable():
            return
        # encode_json: names that are not UTF-8 stay exact (msgspec alone refuses them).
        body = encode_json(results)
        self._guarded(lambda: write_file(self.store, p.name,
                                         (_results_head(body), b"\n", body)))

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

    def _touch(self, p: Path) -> None:
        """Mark a file as used now: eviction goes by its entry's newest file."""
        with contextlib.suppress(OSError):
            os.utime(p)

    def _drop(self, p: Path) -> None:
        """Delete a damaged file of an entry, only from a store marked as the cache's."""
        if is_marked(self.store):
            with contextlib.suppress(OSError):
                p.unlink()

    # ---- bookkeeping -----------------------------------------------------------
    def _account(self, written: int) -> None:
        """Add one write to this process's books; rescan when they say it is due."""
        # The schedule's constants are read here, at each write, from this module.
        record_write(self._books, written, max_bytes=self.max_bytes,
                     headroom=int(self.max_bytes * HEADROOM),
                     min_writes=MIN_WRITES_PER_SCAN, rescan=self.rescan)

    def entries(self) -> list[Entry]:
        """Every entry: its key, its files, their bytes and its last use."""
        return scan_store(self.store, sweep_before=None)[0]

    def size(self) -> int:
        return sum(e.size for e in self.entries())

    def rescan(self) -> tuple[int, int]:
        """Size the store, sweep a killed writer's temporaries (older than
        ``STALE_TMP_S``; a live writer's are younger) and evict least recently used entries
        down to ``1 - HEADROOM`` of the bound once it is passed; (bytes, files) left.
        Does nothing to a store without the marker."""
        if not is_marked(self.store):
            return 0, 0
        entries, _ = scan_store(self.store, sweep_before=time.time() - STALE_TMP_S)
        # An upgrade's old store is read by nothing: it goes with the rescans (cache_retire).
        retire_old_stores(self.root)
        return evict_oldest(entries, self.max_bytes * (1 - HEADROOM))
