"""Where trace files live: local paths through the standard library, everything else
(``s3://``, ``gs://``, ``zip://::logs.zip``, ``memory://``) through fsspec.

Local log dirs are by far the common case, and importing fsspec costs about 10 MB of
resident memory (it pulls in asyncio, ssl and certifi) before the first byte of a trace
is read. So fsspec is imported only for URLs that need it; both paths produce the same
listing (``file://`` URLs, sizes, mtimes) and never follow symbolic links.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

LOCAL_SCHEME = "file://"


@dataclass(frozen=True)
class FoundFile:
    """One file under a scanned root."""

    url: str  # what :func:`open_binary` opens
    relpath: str  # relative to the root, '/'-separated
    size: int | None
    mtime: float | None


def is_local(url: str) -> bool:
    """A plain path or a ``file://`` URL, without fsspec's ``::`` chaining."""
    if "::" in url:
        return False
    return url.startswith(LOCAL_SCHEME) or "://" not in url


def local_path(url: str) -> str:
    return url[len(LOCAL_SCHEME):] if url.startswith(LOCAL_SCHEME) else url


@contextmanager
def open_binary(url: str) -> Iterator[IO[bytes]]:
    """Open ``url`` for reading bytes (read-only: nothing in a log dir is ever written)."""
    if is_local(url):
        with open(local_path(url), "rb") as fh:
            yield fh
        return
    import fsspec

    # The OpenFile context keeps a chained URL's outer layers (zip://::…) open too.
    with fsspec.open(url, "rb") as fh:
        yield fh


class ScanError(Exception):
    """The root cannot be listed; the message says why (without the root's name)."""


def find_files(root_url: str) -> list[FoundFile]:
    """Every regular file below ``root_url``, recursively.

    Raises :class:`ScanError` when the root does not exist, is not a directory, or
    cannot be listed.
    """
    if is_local(root_url):
        return _find_local(os.path.abspath(os.path.expanduser(local_path(root_url))))
    return _find_fsspec(root_url)


def _find_local(root: str) -> list[FoundFile]:
    try:
        st = os.stat(root)
    except FileNotFoundError:
        raise ScanError("does not exist") from None
    except PermissionError:
        raise ScanError("permission denied") from None
    except OSError as exc:
        raise ScanError(f"cannot list ({exc})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise ScanError("is not a directory")
    if not os.access(root, os.R_OK | os.X_OK):
        raise ScanError("permission denied")
    out = []
    pending = [root]
    while pending:
        here = pending.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue  # an unreadable subdirectory hides its files, as in a file browser
        for entry in entries:
            # Symbolic links are not followed: a log dir must not reach outside itself.
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # deleted between listing and stat
                rel = os.path.relpath(entry.path, root).replace(os.sep, "/")
                out.append(FoundFile(url=LOCAL_SCHEME + _posix(entry.path), relpath=rel,
                                     size=info.st_size, mtime=info.st_mtime))
    out.sort(key=lambda f: f.relpath)
    return out


def _posix(path: str) -> str:
    return path.replace(os.sep, "/") if os.sep != "/" else path


def _find_fsspec(root_url: str) -> list[FoundFile]:
    import posixpath

    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(root_url)
    except (ValueError, ImportError) as exc:
        raise ScanError(f"cannot open this location ({exc})") from None
    root = root.rstrip("/") or "/"
    try:
        if not fs.isdir(root):
            raise ScanError("is not a directory" if fs.exists(root) else "does not exist")
        found = fs.find(root, detail=True)
    except PermissionError:
        raise ScanError("permission denied") from None
    except OSError as exc:
        raise ScanError(f"cannot list ({exc})") from None
    out = []
    for path, info in found.items():
        if info.get("type", "file") != "file" or info.get("islink"):
            continue
        rel = posixpath.relpath(path, root) if root != "/" else path.lstrip("/")
        out.append(FoundFile(url=_file_url(fs, path, root_url), relpath=rel,
                             size=info.get("size"), mtime=_mtime(info)))
    out.sort(key=lambda f: f.relpath)
    return out


def _file_url(fs: Any, path: str, root_url: str) -> str:
    """What fsspec opens for ``path``; a chained log dir (``zip://::logs.zip``,
    ``simplecache::s3://…``) keeps its outer layers, which ``unstrip_protocol`` drops."""
    url = fs.unstrip_protocol(path)
    if "::" not in root_url:
        return url
    head, _, tail = root_url.partition("::")
    if "://" in head and not head.split("://", 1)[1]:  # zip://::archive.zip: fs is the zip
        return f"{url}::{tail}"
    return url


def _mtime(info: dict) -> float | None:
    for key in ("mtime", "LastModified", "updated", "created"):
        v = info.get(key)
        if isinstance(v, int | float):
            return float(v)
        if hasattr(v, "timestamp"):
            return float(v.timestamp())
    return None
