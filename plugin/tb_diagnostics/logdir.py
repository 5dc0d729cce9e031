"""Log directory → runs → workers → spans, as ``tensorboard_trace_handler`` lays them out.

``LOGDIR/<run>/<worker>.<timestamp>.pt.trace.json[.gz]``: a run is any
directory (at any depth) holding trace files, named by its path relative to
LOGDIR; a worker's files with different timestamps are its spans, one per
profiling cycle. Paths go through fsspec, so ``s3://``, ``gs://`` and
``memory://`` log dirs work where the backend is installed. Nothing here
writes.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

import fsspec

from tb_diagnostics.errors import LogDirError

TRACE_FILE = re.compile(r"^(?P<worker>.+?)(?:\.(?P<ts>\d+))?\.pt\.trace\.json(?:\.gz)?$")
ROOT_RUN = "."


@dataclass(frozen=True)
class SpanFile:
    """One trace file: one profiling cycle of one worker of one run."""

    run: str
    worker: str
    span: str
    url: str  # what fsspec opens
    relpath: str  # relative to the log dir, '/'-separated: what users see
    size: int | None
    mtime: float | None

    @property
    def order_key(self) -> tuple[int, str]:
        numeric = self.span.isascii() and self.span.isdigit()
        return (int(self.span), "") if numeric else (-1, self.span)


@dataclass
class Worker:
    name: str
    spans: list[SpanFile] = field(default_factory=list)


@dataclass
class Run:
    name: str
    workers: list[Worker] = field(default_factory=list)

    @property
    def files(self) -> list[SpanFile]:
        return [s for w in self.workers for s in w.spans]


@dataclass
class LogDir:
    logdir: str  # as the user gave it
    runs: list[Run]

    def run(self, name: str) -> Run | None:
        return next((r for r in self.runs if r.name == name), None)

    @property
    def files(self) -> list[SpanFile]:
        return [s for r in self.runs for s in r.files]


def parse_trace_name(filename: str) -> tuple[str, str] | None:
    """``worker0.1623143089861.pt.trace.json.gz`` → ``("worker0", "1623143089861")``.

    Without a timestamp the span is named by the file name. Returns None for
    files that are not profiler traces.
    """
    m = TRACE_FILE.match(filename)
    if not m:
        return None
    return m.group("worker"), m.group("ts") or filename


def scan_logdir(logdir: str) -> LogDir:
    """List every trace file below ``logdir``, grouped into runs, workers and spans.

    Raises :class:`LogDirError` when ``logdir`` does not exist or is not a directory.
    """
    try:
        fs, root = fsspec.core.url_to_fs(logdir)
    except (ValueError, ImportError) as exc:
        raise LogDirError(f"{logdir}: cannot open this location ({exc})") from None
    root = root.rstrip("/") or "/"
    try:
        if not fs.isdir(root):
            what = "is not a directory" if fs.exists(root) else "does not exist"
            raise LogDirError(f"{logdir}: {what}")
        found = fs.find(root, detail=True)
    except PermissionError:
        raise LogDirError(f"{logdir}: permission denied") from None
    except OSError as exc:
        raise LogDirError(f"{logdir}: cannot list ({exc})") from None

    runs: dict[str, dict[str, list[SpanFile]]] = {}
    for path, info in found.items():
        if info.get("type", "file") != "file":
            continue
        parsed = parse_trace_name(posixpath.basename(path))
        if parsed is None:
            continue
        worker, span = parsed
        rel = posixpath.relpath(path, root) if root != "/" else path.lstrip("/")
        run = posixpath.dirname(rel) or ROOT_RUN
        runs.setdefault(run, {}).setdefault(worker, []).append(SpanFile(
            run=run, worker=worker, span=span, url=_file_url(fs, path, logdir), relpath=rel,
            size=info.get("size"), mtime=_mtime(info)))

    out = []
    for run_name in sorted(runs):
        workers = [Worker(name=w, spans=sorted(spans, key=lambda s: s.order_key))
                   for w, spans in sorted(runs[run_name].items())]
        out.append(Run(name=run_name, workers=workers))
    return LogDir(logdir=logdir, runs=out)


def _file_url(fs: fsspec.AbstractFileSystem, path: str, logdir: str) -> str:
    """What fsspec opens for ``path``; a chained log dir (``zip://::logs.zip``,
    ``simplecache::s3://…``) keeps its outer layers, which ``unstrip_protocol`` drops."""
    url = fs.unstrip_protocol(path)
    if "::" not in logdir:
        return url
    head, _, tail = logdir.partition("::")
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
