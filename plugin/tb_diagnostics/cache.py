"""A persistent cache of built models and analysis results, outside the log dir.

The second open of a trace should not parse it again. Entries live under the
user's cache directory (``$TB_DIAGNOSTICS_CACHE``, else
``$XDG_CACHE_HOME/tb-diagnostics``, else ``~/.cache/tb-diagnostics``), keyed by
the file's URL, size and mtime and by a fingerprint of this package's code, so
a rewritten trace or an upgraded tool never reads a stale entry.

An entry is a directory: ``model.npz`` (the columns, uncompressed so it loads
at disk speed), ``model.json`` (strings, lanes, metadata) and one
``results-<variant>.json`` per threshold setting. Entries are written into a
temporary directory and renamed into place, so two processes sharing the cache
never see half an entry; the total size is bounded, least recently used first
out.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.output import decode_json, encode_json
from tb_diagnostics.trace.model import Lane, MemoryEvents, TraceMeta, TraceModel

DEFAULT_MAX_BYTES = 4 << 30
#: Bumped whenever an entry's layout changes (with the code fingerprint, which changes
#: with any code, it keeps entries of another layout from ever being read).
CACHE_FORMAT = 2
#: Temporary files of a writer killed mid-write are swept once they are this old.
STALE_TMP_S = 3600.0
_ARRAY_FIELDS = [f.name for f in fields(TraceModel)
                 if f.name not in ("path", "strings", "lanes", "memory", "meta", "origin_us",
                                   "warnings")]
_MEMORY_FIELDS = [f.name for f in fields(MemoryEvents)]


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
    """A hex digest of ``text``, ``size`` characters long (a key, not a secret)."""
    # surrogateescape: a file name that is not UTF-8 keys by its bytes, as it is listed.
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


class TraceCache:
    """Built models and results on disk; every method is safe to call concurrently."""

    def __init__(self, root: Path | str | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.max_bytes = max_bytes

    # ---- keys --------------------------------------------------------------
    def entry(self, f: SpanFile) -> Path | None:
        """The entry directory for a file, or None when the file cannot be keyed safely."""
        if f.size is None or f.mtime is None:
            return None
        raw = f"{code_fingerprint()}|{f.url}|{f.size}|{f.mtime!r}"
        return self.root / digest(raw, 32)

    # ---- models --------------------------------------------------------------
    def get_model(self, f: SpanFile) -> TraceModel | None:
        d = self.entry(f)
        if d is None or not (d / "model.json").is_file():
            return None
        try:
            model = self._read_model(d, f)
        except FileNotFoundError:
            return None  # another process is replacing or evicting it: a miss, not damage
        except Exception:  # any damage (a truncated zip, an edited JSON) is a miss
            model = None
        if model is None:
            # A damaged entry is dropped, so that the next put writes it anew.
            shutil.rmtree(d, ignore_errors=True)
            return None
        self._touch(d)
        return model

    def _read_model(self, d: Path, f: SpanFile) -> TraceModel | None:
        """The entry's model, or None when it is not exactly what put_model wrote (the
        zip members' CRCs catch damaged bytes; the checks below, edited or partial files)."""
        meta = decode_json((d / "model.json").read_bytes())
        if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
            return None
        with np.load(d / "model.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        for k, n in meta["constant"].items():  # stored as their one value
            arrays[k] = np.broadcast_to(arrays[k], (n,))
        n_rows = meta["rows"]
        if any(arrays[k].ndim != 1 or arrays[k].shape[0] != n_rows for k in _ARRAY_FIELDS):
            return None
        strings = meta["strings"]
        if not isinstance(strings, list) or not all(isinstance(x, str) for x in strings):
            return None
        return TraceModel(
            path=f.relpath,
            strings=strings,
            lanes=[Lane(**ln) for ln in meta["lanes"]],
            memory=MemoryEvents(**{k: arrays[f"memory.{k}"] for k in _MEMORY_FIELDS}),
            meta=TraceMeta(**meta["meta"]),
            origin_us=float(meta["origin_us"]),
            warnings=[str(w) for w in meta["warnings"]],
            **{k: arrays[k] for k in _ARRAY_FIELDS},
        )

    def put_model(self, f: SpanFile, model: TraceModel) -> None:
        d = self.entry(f)
        if d is None:
            return
        meta = {
            "format": CACHE_FORMAT,
            "rows": len(model),
            "strings": model.strings,
            "lanes": [{"pid": ln.pid, "tid": ln.tid, "is_device": ln.is_device,
                       "label": ln.label} for ln in model.lanes],
            "meta": {k.name: getattr(model.meta, k.name) for k in fields(TraceMeta)},
            "origin_us": model.origin_us,
            "warnings": model.warnings,
        }
        arrays = {k: getattr(model, k) for k in _ARRAY_FIELDS}
        arrays.update({f"memory.{k}": getattr(model.memory, k) for k in _MEMORY_FIELDS})
        # Columns the trace never fills are one value viewed n times: keep them so.
        meta["constant"] = {k: int(a.shape[0]) for k, a in arrays.items()
                            if a.ndim == 1 and a.shape[0] and a.strides == (0,)}
        for k in meta["constant"]:
            arrays[k] = arrays[k][:1]

        def write(tmp: Path) -> None:
            with open(tmp / "model.npz", "wb") as fh:
                np.savez(fh, **arrays)
            (tmp / "model.json").write_bytes(encode_json(meta))

        self._publish(d, write)

    # ---- results -------------------------------------------------------------
    def get_results(self, f: SpanFile, variant: str) -> Any | None:
        d = self.entry(f)
        if d is None:
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
            with contextlib.suppress(OSError):
                p.unlink()
            return None
        self._touch(d)
        return data

    def put_results(self, f: SpanFile, variant: str, results: Any) -> None:
        d = self.entry(f)
        if d is None:
            return
        d.mkdir(parents=True, exist_ok=True)
        # encode_json: names that are not UTF-8 stay exact (msgspec alone refuses them).
        body = encode_json(results)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".results-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(_results_head(body) + b"\n" + body)
        os.replace(tmp, d / f"results-{variant}.json")
        self._evict()

    # ---- housekeeping ---------------------------------------------------------
    def _publish(self, d: Path, write) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".tmp-"))
        try:
            write(tmp)
            if d.exists():
                # Another process built the same entry meanwhile: keep its files,
                # add ours where missing (results may already sit beside them).
                # model.json last: readers take it as the mark of a complete model.
                for p in sorted(tmp.iterdir(), key=lambda p: p.name == "model.json"):
                    if not (d / p.name).exists():
                        os.replace(p, d / p.name)
            else:
                with contextlib.suppress(OSError):  # lost a race: theirs is as good
                    os.replace(tmp, d)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._evict()

    def _touch(self, d: Path) -> None:
        try:
            now = time.time()
            os.utime(d, (now, now))
        except OSError:
            pass

    def entries(self) -> list[tuple[Path, int, float]]:
        """(entry, bytes, last use) of every complete entry."""
        out = []
        if not self.root.is_dir():
            return out
        for d in self.root.iterdir():
            if d.name.startswith(".") or not d.is_dir():
                continue
            try:
                size = sum(p.stat().st_size for p in d.iterdir())
                out.append((d, size, d.stat().st_mtime))
            except OSError:
                continue
        return out

    def size(self) -> int:
        return sum(s for _, s, _ in self.entries())

    def _sweep(self) -> None:
        """Remove what a killed writer left: temporary directories and files older than
        ``STALE_TMP_S`` (a live writer's are younger)."""
        if not self.root.is_dir():
            return
        cutoff = time.time() - STALE_TMP_S
        with contextlib.suppress(OSError):
            for p in self.root.iterdir():
                if p.name.startswith(".tmp-") and p.stat().st_mtime < cutoff:
                    shutil.rmtree(p, ignore_errors=True)
                elif p.is_dir() and not p.name.startswith("."):
                    for q in p.glob(".results-*.tmp"):
                        with contextlib.suppress(OSError):
                            if q.stat().st_mtime < cutoff:
                                q.unlink()

    def _evict(self) -> None:
        self._sweep()
        entries = self.entries()
        total = sum(s for _, s, _ in entries)
        for d, s, _ in sorted(entries, key=lambda e: e[2]):
            if total <= self.max_bytes:
                break
            shutil.rmtree(d, ignore_errors=True)
            total -= s
