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
from tb_diagnostics.trace.model import Lane, MemoryEvents, TraceMeta, TraceModel

DEFAULT_MAX_BYTES = 4 << 30
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
    return blake2b(text.encode(), digest_size=size // 2).hexdigest()


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
            meta = msgspec.json.decode((d / "model.json").read_bytes())
            with np.load(d / "model.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, msgspec.DecodeError, KeyError):
            return None  # a damaged entry is a miss; it will be rewritten
        self._touch(d)
        for k, n in meta.get("constant", {}).items():  # stored as their one value
            arrays[k] = np.broadcast_to(arrays[k], (n,))
        return TraceModel(
            path=f.relpath,
            strings=meta["strings"],
            lanes=[Lane(**ln) for ln in meta["lanes"]],
            memory=MemoryEvents(**{k: arrays[f"memory.{k}"] for k in _MEMORY_FIELDS}),
            meta=TraceMeta(**meta["meta"]),
            origin_us=meta["origin_us"],
            warnings=meta["warnings"],
            **{k: arrays[k] for k in _ARRAY_FIELDS},
        )

    def put_model(self, f: SpanFile, model: TraceModel) -> None:
        d = self.entry(f)
        if d is None:
            return
        meta = {
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
            (tmp / "model.json").write_bytes(msgspec.json.encode(meta))

        self._publish(d, write)

    # ---- results -------------------------------------------------------------
    def get_results(self, f: SpanFile, variant: str) -> Any | None:
        d = self.entry(f)
        if d is None:
            return None
        p = d / f"results-{variant}.json"
        try:
            data = msgspec.json.decode(p.read_bytes())
        except (OSError, msgspec.DecodeError):
            return None
        self._touch(d)
        return data

    def put_results(self, f: SpanFile, variant: str, results: Any) -> None:
        d = self.entry(f)
        if d is None:
            return
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".results-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(msgspec.json.encode(results))
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
                for p in tmp.iterdir():
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

    def _evict(self) -> None:
        entries = self.entries()
        total = sum(s for _, s, _ in entries)
        for d, s, _ in sorted(entries, key=lambda e: e[2]):
            if total <= self.max_bytes:
                break
            shutil.rmtree(d, ignore_errors=True)
            total -= s
