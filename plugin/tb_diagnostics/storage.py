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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
    """A ``file://`` URL, a plain path, or any path that exists here.

    ``::`` (fsspec's chaining) and ``://`` make a URL only where no such local path
    exists: a run named ``exp::lr=0.1`` is a directory, whatever characters it has. A
    ``file://`` URL is the innermost layer of any chain, so it is always local."""
    if url.startswith(LOCAL_SCHEME):
        return True
    if "::" not in url and "://" not in url:
        return True
    try:
        return os.path.lexists(os.path.expanduser(url))
    except (OSError, ValueError):  # ValueError: a NUL byte
        return False


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


@dataclass
class Listing:
    """What a scan found: the files, and the symbolic links it did not follow."""

    files: list[FoundFile] = field(default_factory=list)
    #: Relative paths of links skipped that are named like a wanted file or lead to a
    #: directory (which might hold some): the user is told, nothing vanishes silently.
    links: list[str] = field(default_factory=list)


#: A file name the caller wants listed (the others are never stat'ed).
NameFilter = Callable[[str], bool]


def find_files(root_url: str, wanted: NameFilter | None = None) -> list[FoundFile]:
    """Every file below ``root_url`` (recursively) whose name is ``wanted`` (default:
    all), directories and symbolic links aside; see :func:`list_files`."""
    return list_files(root_url, wanted).files


def list_files(root_url: str, wanted: NameFilter | None = None) -> Listing:
    """The files below ``root_url`` whose names are ``wanted``, and the links skipped.

    Only wanted names are stat'ed: a directory of 200,000 other files costs its listing,
    not 200,000 system calls. Anything that is neither a directory nor a link is listed,
    FIFOs and devices included: the loader refuses them with a message, and they do not
    vanish. Raises :class:`ScanError` when the root does not exist, is not a directory,
    or cannot be listed.
    """
    wanted = wanted or _everything
    if is_local(root_url):
        return _find_local(os.path.abspath(os.path.expanduser(local_path(root_url))), wanted)
    return _find_fsspec(root_url, wanted)


def _everything(name: str) -> bool:
    return True


def _find_local(root: str, wanted: NameFilter) -> Listing:
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
    out = Listing()
    pending = [root]
    while pending:
        here = pending.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue  # an unreadable subdirectory hides its files, as in a file browser
        for entry in entries:
            # is_symlink and is_dir(follow_symlinks=False) read the entry's type from the
            # listing (d_type), without a stat, on Linux and macOS.
            try:
                if entry.is_symlink():
                    # Not followed: a log dir must not reach outside itself. One stat per
                    # link tells whether it leads to a directory.
                    if wanted(entry.name) or entry.is_dir():
                        out.links.append(_rel(entry.path, root))
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                    continue
            except OSError:
                continue  # gone since the listing
            if not wanted(entry.name):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # deleted between listing and stat
            out.files.append(FoundFile(url=LOCAL_SCHEME + _posix(entry.path),
                                       relpath=_rel(entry.path, root),
                                       size=info.st_size, mtime=info.st_mtime))
    out.files.sort(key=lambda f: f.relpath)
    out.links.sort()
    return out


def _rel(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def _posix(path: str) -> str:
    return path.replace(os.sep, "/") if os.sep != "/" else path


def _find_fsspec(root_url: str, wanted: NameFilter) -> Listing:
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
    out = Listing()
    for path, info in found.items():
        rel = posixpath.relpath(path, root) if root != "/" else path.lstrip("/")
        if not wanted(posixpath.basename(path)):
            continue
        if info.get("islink"):
            out.links.append(rel)
            continue
        if info.get("type", "file") != "file":
            continue
        out.files.append(FoundFile(url=_file_url(fs, path, root_url), relpath=rel,
                                   size=info.get("size"), mtime=_mtime(info)))
    out.files.sort(key=lambda f: f.relpath)
    out.links.sort()
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
