"""The Python API: analyse a log dir, a run or one trace file from a notebook or a script.

>>> import tb_diagnostics
>>> report = tb_diagnostics.analyze("./log", run="train_cnn-bs32-cpu")
>>> report.steps_frame()          # one row per step (pandas)
>>> report.findings_frame()       # one row per finding
>>> report                        # in a notebook: the step chart and findings inline

A :class:`Report` wraps the document ``tb-diagnostics report --format json`` prints,
built by the same engine (:func:`tb_diagnostics.engine.build_document`), with the same
cache; every view here is a reshaping of that document, except :meth:`Report.to_html`'s
dispatch chains, which open each span's analysis again (from the cache when it has them).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# The records and DataFrames live in api_frames; their column orders stay importable here.
from tb_diagnostics.api_frames import FINDING_COLUMNS as FINDING_COLUMNS
from tb_diagnostics.api_frames import STEP_COLUMNS as STEP_COLUMNS
from tb_diagnostics.api_frames import ReportFrames
from tb_diagnostics.errors import LogDirError

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from tb_diagnostics.analysis.verdict import Thresholds
    from tb_diagnostics.cache import TraceCache
    from tb_diagnostics.logdir import LogDir

__all__ = ["Report", "analyze"]


@dataclass
class Report(ReportFrames):
    """The analysis of a log dir (or of one run, or one trace file).

    ``document`` is exactly what ``tb-diagnostics report --format json`` prints for the
    same path and run. The other members reshape it: :meth:`steps` and :meth:`findings`
    as flat records (and DataFrames), :meth:`to_markdown`, the HTML a notebook shows,
    and :meth:`compare` against another report.
    """

    document: dict[str, Any]
    logdir: LogDir = field(repr=False)
    thresholds: Thresholds | None = field(default=None, repr=False)
    cache: TraceCache | None = field(default=None, repr=False)
    _chains: dict[str, Any] | None = field(default=None, init=False, repr=False)

    # ---- renderings ----------------------------------------------------------------------
    def to_markdown(self) -> str:
        """The Markdown summary ``tb-diagnostics export --format markdown`` writes."""
        from tb_diagnostics.report.text import render_markdown

        return render_markdown(self.document)

    def to_text(self) -> str:
        """The text report ``tb-diagnostics report`` prints."""
        from tb_diagnostics.report.text import render_text

        return render_text(self.document)

    def _dispatch_chains(self) -> dict[str, Any]:
        if self._chains is None:
            from tb_diagnostics.report.html import dispatch_chains

            self._chains = dispatch_chains(self.logdir, self.document, self.thresholds,
                                           self.cache)
        return self._chains

    def to_html(self) -> str:
        """The self-contained HTML page ``tb-diagnostics export --format html`` writes."""
        from tb_diagnostics.report.html import render_html

        return render_html(self.document, self._dispatch_chains())

    def _repr_html_(self) -> str:
        """The report as one HTML fragment (its style scoped to it, its colours the
        notebook's theme, no script): the verdict of each run and the top findings first,
        each run's chart, step table and findings folded under it."""
        from tb_diagnostics.report.notebook import render_fragment

        # Without the dispatch chains: those need each span analysed again, which a
        # cell's display must not cost (to_html() has them).
        return render_fragment(self.document)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        spans = list(self._spans())
        n_steps = sum(len(s["steps"]) for _, _, s in spans)
        return (f"<tb_diagnostics.Report of {self.document['logdir']!r}: "
                f"{len(self.document['runs'])} run(s), {len(spans)} span(s), {n_steps} "
                f"step(s), {len(self.findings())} finding(s)>")

    # ---- comparing -----------------------------------------------------------------------
    def run_document(self, run: str | None = None) -> dict[str, Any]:
        """The document of one run: ``run``, or the only one there is."""
        runs = self.document["runs"]
        if run is None:
            if len(runs) != 1:
                names = ", ".join(r["run"] for r in runs) or "none"
                raise ValueError(f"{self.document['logdir']} holds {len(runs)} runs "
                                 f"({names}): name one with run=")
            return runs[0]
        for r in runs:
            if r["run"] == run:
                return r
        raise ValueError(f"no run {run!r} in {self.document['logdir']}")

    def compare(self, other: Report, *, run: str | None = None, other_run: str | None = None,
                with_times: bool = True) -> dict[str, Any]:
        """The compare document (``tb-diagnostics compare --format json``) with this report
        as the baseline and ``other`` as the candidate.

        Each side must hold one run, or name it (``run``, ``other_run``). ``with_times``
        adds the ops and kernels that changed most (it reads the traces again, from the
        cache when it is on).
        """
        from tb_diagnostics.report.compare import compare_runs

        base, cand = self.run_document(run), other.run_document(other_run)
        times: list[dict[str, dict[str, float]] | None] = [None, None]
        if with_times:
            from tb_diagnostics.report.optimes import run_times

            times = [run_times(rep.logdir, doc, rep.thresholds, rep.cache)
                     for rep, doc in ((self, base), (other, cand))]
        return compare_runs(base, cand, baseline_logdir=self.document["logdir"],
                            candidate_logdir=other.document["logdir"],
                            baseline_times=times[0], candidate_times=times[1])


# ---- analyze -------------------------------------------------------------------------------
def _thresholds(given: Thresholds | Mapping[str, float] | None) -> Thresholds | None:
    from tb_diagnostics.analysis.verdict import Thresholds

    if given is None or isinstance(given, Thresholds):
        return given
    return Thresholds(**dict(given))


def _cache(given: bool | str | os.PathLike[str] | TraceCache | None,
           logdir: str) -> TraceCache | None:
    """The cache asked for; raises CacheLocationError when it lies inside ``logdir``."""
    from tb_diagnostics.cache import TraceCache, cache_for_logdir

    if given is None or given is False:
        return None
    if isinstance(given, TraceCache):
        cache_for_logdir(logdir, given.root)
        return given
    return cache_for_logdir(logdir, None if given is True else os.fspath(given))


def _is_file(path: str) -> bool:
    from tb_diagnostics.storage import is_local, local_path

    if is_local(path):
        return os.path.isfile(os.path.expanduser(local_path(path)))
    import fsspec

    try:
        fs, p = fsspec.core.url_to_fs(path)
        return bool(fs.isfile(p))
    except (ValueError, ImportError, OSError):
        return False  # scan_logdir then says what is wrong with it


def _single_file(path: str) -> LogDir:
    """A log dir of one run (``.``) holding just this trace file."""
    from tb_diagnostics.logdir import ROOT_RUN, LogDir, Run, SpanFile, Worker, parse_trace_name
    from tb_diagnostics.storage import LOCAL_SCHEME, is_local, local_path

    if is_local(path):
        full = os.path.abspath(os.path.expanduser(local_path(path)))
        st = os.stat(full)
        # A file named on the command line is read where its link leads (only a log dir's
        # contents are not followed), so the loader, which never follows one, gets the target.
        target = os.path.realpath(full)
        url, size, mtime = LOCAL_SCHEME + target.replace(os.sep, "/"), st.st_size, st.st_mtime
        parent, name = os.path.dirname(full), os.path.basename(full)
    else:
        import fsspec

        from tb_diagnostics.storage import _mtime

        fs, p = fsspec.core.url_to_fs(path)
        info = fs.info(p)
        url, size, mtime = path, info.get("size"), _mtime(info)
        parent, name = path.rsplit("/", 1)[0], posixpath.basename(p)
    worker, span = parse_trace_name(name) or (name.split(".", 1)[0], name)
    f = SpanFile(run=ROOT_RUN, worker=worker, span=span, url=url, relpath=name, size=size,
                 mtime=mtime)
    return LogDir(logdir=parent, runs=[Run(name=ROOT_RUN, workers=[Worker(worker, [f])])])


def _main_is_a_script() -> bool:
    """Whether ``__main__`` is a file that spawned workers would import (and so re-run,
    unless guarded); notebooks, the REPL and ``python -c`` have none."""
    import sys

    main = sys.modules.get("__main__")
    return bool(getattr(main, "__file__", None)) and "ipykernel" not in sys.modules


def analyze(path: str | os.PathLike[str], run: str | None = None, *,
            thresholds: Thresholds | Mapping[str, float] | None = None,
            cache: bool | str | os.PathLike[str] | TraceCache = True,
            executor: Executor | str | None = None, workers: int | None = None) -> Report:
    """Analyse a log dir, a run directory or one trace file into a :class:`Report`.

    ``path`` is local or an fsspec URL (``s3://…``, ``gs://…``, ``memory://…``). ``run``
    keeps one run of a log dir (its path relative to ``path``, as ``--run``).
    ``thresholds`` is a :class:`~tb_diagnostics.analysis.verdict.Thresholds` or a mapping
    of its fields (``{"compute_bound": 0.9}``). ``cache``: True uses the engine's cache
    (``$TB_DIAGNOSTICS_CACHE``, else ``~/.cache/tb-diagnostics``), False none, a path or a
    :class:`~tb_diagnostics.cache.TraceCache` that one. ``executor`` is any
    :class:`concurrent.futures.Executor`, or ``"local"`` / ``"dask://HOST:PORT"``; by
    default several files are analysed in a local pool of up to ``workers`` processes
    (``workers=1``: all in this process). The pool spawns fresh interpreters, which import
    the calling script again; so, unless ``workers`` is given, a script (a ``__main__``
    with a file, as opposed to a notebook or the REPL) is analysed in this process, and a
    script that asks for ``workers=N`` calls this under ``if __name__ == "__main__":``.

    Raises :class:`~tb_diagnostics.errors.LogDirError` when the path cannot be listed or
    holds no such run, :class:`~tb_diagnostics.cache.CacheLocationError` when the cache
    lies inside it; a trace that cannot be read is that span's ``errors`` entry.
    """
    from tb_diagnostics.engine import build_document
    from tb_diagnostics.executors import open_executor
    from tb_diagnostics.logdir import scan_logdir

    text = os.fspath(path)
    one_file = _is_file(text)
    logdir = _single_file(text) if one_file else scan_logdir(text)
    if run is not None and logdir.run(run) is None:
        known = ", ".join(r.name for r in logdir.runs) or "none"
        raise LogDirError(f"no run {run!r} in {text} (runs: {known})")
    th = _thresholds(thresholds)
    # A single file's log dir is the directory that holds it.
    tc = _cache(cache, os.path.dirname(text) if one_file else text)
    if workers is None and executor is None and _main_is_a_script():
        workers = 1  # an unguarded script would be re-run by every spawned worker
    with contextlib.ExitStack() as stack:
        pool = executor
        if executor is None or isinstance(executor, str):
            pool = stack.enter_context(open_executor(executor))
        doc = build_document(logdir, run=run, thresholds=th, cache=tc, workers=workers,
                             executor=pool)
    from tb_diagnostics.lazy_rows import plain  # numpy: not at import (test_import_is_cheap)

    plain(doc)  # the step lists as lists (lazy_rows): a notebook's json.dumps, pandas
    return Report(document=doc, logdir=logdir, thresholds=th, cache=tc)
