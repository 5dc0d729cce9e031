"""One entry point from a span file to its model, analysis and summary, with caching.

The CLI, the tab's data provider and the benchmark all go through here, so a
figure is computed the same way (and cached the same way) everywhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from tb_diagnostics.analysis import SpanAnalysis, Thresholds
from tb_diagnostics.cache import CacheSpec, TraceCache, digest
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import LogDir, SpanFile
from tb_diagnostics.opening import analysed_spans, open_analysis, open_model

__all__ = ["MAX_WORKERS", "analysed_spans", "build_document", "open_analysis", "open_model",
           "span_summary", "summarise_files"]

if TYPE_CHECKING:
    from concurrent.futures import Executor

_log = logging.getLogger(__name__)

#: Upper bound of worker processes, whatever the core count: each holds a model in memory.
MAX_WORKERS = 8


def thresholds_variant(thresholds: Thresholds | None) -> str:
    """The cache key of a result's settings: the thresholds and any peak overrides (the
    figures change with the file, so its size and modification time are in the key)."""
    from tb_diagnostics.analysis.cost.peaks import overrides_version

    th = asdict(thresholds or Thresholds())
    return digest(repr(sorted(th.items())) + overrides_version(), 12)


def span_summary(f: SpanFile, thresholds: Thresholds | None = None,
                 cache: TraceCache | None = None,
                 analysis: SpanAnalysis | None = None) -> dict[str, Any]:
    """The span's report document (steps, verdicts, findings, errors), cached by thresholds.

    ``analysis``, when the caller already holds the span's analysis (the tab
    does), is used on a cache miss instead of opening the model again.
    """
    from tb_diagnostics.report.document import span_document

    variant = thresholds_variant(thresholds) if cache is not None else ""
    if cache is not None:
        hit = cache.get_results(f, variant)
        if hit is not None:
            return hit
    listed = True  # the file is the version the scan listed: its results may be kept
    owned = analysis is None  # opened here for this report alone: released on the way
    try:
        if analysis is None:
            from tb_diagnostics.trace.load import ListingOutdated

            try:
                analysis = open_analysis(f, thresholds, cache)
            except ListingOutdated as exc:
                # Rewritten since the scan: reported as it is now, and kept under no key
                # (the listing's size and mtime name another version).
                analysis, listed = SpanAnalysis(exc.model, thresholds), False
        doc = span_document(f, analysis, owned=owned)
    except TraceLoadError as exc:
        return span_document(f, None, str(exc))  # not cached: the file may be mid-write
    except (MemoryError, RecursionError, ValueError, TypeError, KeyError, IndexError,
            ArithmeticError, AttributeError) as exc:
        # A bug or a trace this engine cannot take: that file's error, never the report's.
        _log.debug("analysing %s failed", f.relpath, exc_info=True)
        return span_document(f, None, f"{f.relpath}: could not be analysed "
                                      f"({type(exc).__name__}: {exc})")
    if cache is not None and listed:
        with contextlib.suppress(OSError):
            cache.put_results(f, variant, doc)
    return doc


def build_document(logdir: LogDir, run: str | None = None,
                   thresholds: Thresholds | None = None, *, cache: TraceCache | None = None,
                   workers: int | None = None, executor: Executor | None = None,
                   progress: Callable[[int, int, SpanFile], None] | None = None,
                   ) -> dict[str, Any]:
    """Analyse every span of ``logdir`` (or of one run) into the report document.

    Files are analysed in parallel (see :func:`summarise_files`); ``report`` only
    assembles their documents (:func:`~tb_diagnostics.report.document.logdir_document`).
    """
    from tb_diagnostics.report.document import logdir_document

    runs = [r for r in logdir.runs if run is None or r.name == run]
    files = [f for r in runs for f in r.files]
    done = summarise_files(files, thresholds, cache=cache, workers=workers, executor=executor,
                           progress=progress)
    return logdir_document(logdir, runs, done)


#: What a worker's job returns: the span's document, and the debug records it logged.
JobResult = tuple[dict[str, Any], list[logging.LogRecord]]


def _summary_job(f: SpanFile, thresholds: Thresholds | None,
                 cache_spec: CacheSpec | None, debug: bool = False) -> JobResult:
    """The span's document, in a worker. With ``debug`` (the caller logs at DEBUG: the
    CLI's ``--debug``) the worker's own debug records come back too, tracebacks
    formatted, for the caller to log: a spawned worker has no handler of its own."""
    cache = TraceCache.from_spec(cache_spec) if cache_spec is not None else None
    if not debug:
        return span_summary(f, thresholds, cache), []
    with _captured_debug() as records:
        summary = span_summary(f, thresholds, cache)
    return summary, records


class _Capture(logging.Handler):
    """Keeps each record as it can cross a process: message and traceback as text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args = record.getMessage(), None
        if record.exc_info:
            # A traceback object does not pickle; its text does, and a formatter prints it.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        self.records.append(record)


@contextlib.contextmanager
def _captured_debug() -> Iterator[list[logging.LogRecord]]:
    log = logging.getLogger("tb_diagnostics")
    capture, level = _Capture(), log.level
    log.addHandler(capture)
    log.setLevel(logging.DEBUG)
    try:
        yield capture.records
    finally:
        log.removeHandler(capture)
        log.setLevel(level)


def _unpack(result: JobResult) -> dict[str, Any]:
    """The job's document; its worker's debug records are logged here, where the CLI's
    ``--debug`` handler prints them."""
    summary, records = result
    for record in records:
        logging.getLogger(record.name).handle(record)
    return summary


def default_workers(n_files: int) -> int:
    return max(1, min(n_files, os.cpu_count() or 1, MAX_WORKERS))


def summarise_files(files: Iterable[SpanFile], thresholds: Thresholds | None = None,
                    cache: TraceCache | None = None, workers: int | None = None,
                    executor: Executor | None = None,
                    progress: Callable[[int, int, SpanFile], None] | None = None,
                    ) -> dict[str, dict[str, Any]]:
    """Summaries of many files (keyed by relpath), in a bounded pool of processes.

    Each job returns a compact summary, never a model, so only small results
    cross process boundaries. ``executor`` may be any
    :class:`concurrent.futures.Executor` (a Dask client's, for instance);
    by default a process pool of :func:`default_workers` is used when there is
    more than one file, and the work stays in this process otherwise. A worker of that
    pool that dies (killed by the out-of-memory killer, say) costs at most the file it
    was analysing, which is then reported with a one-line error.
    """
    files = list(files)
    out: dict[str, dict[str, Any]] = {}
    total = len(files)
    done = 0

    def finished(f: SpanFile, summary: dict[str, Any]) -> None:
        nonlocal done
        out[f.relpath] = summary
        done += 1
        if progress:
            progress(done, total, f)

    # Cached summaries are answered here: a warm run starts no process at all.
    todo = []
    variant = thresholds_variant(thresholds)
    for f in files:
        hit = cache.get_results(f, variant) if cache is not None else None
        if hit is not None:
            finished(f, hit)
        else:
            todo.append(f)
    n_workers = min(workers, MAX_WORKERS) if workers else default_workers(len(todo))
    # The whole configuration travels, not only the root: a worker's writes and evictions
    # keep the caller's bound and model threshold.
    cache_spec = cache.spec() if cache is not None else None
    # --debug: the workers send their tracebacks back (a spawned worker prints nothing).
    debug = _log.isEnabledFor(logging.DEBUG)
    # An in-memory filesystem exists only in this process: no pool can see it.
    in_memory = any(f.url.startswith("memory://") for f in todo)
    if executor is None and (n_workers <= 1 or len(todo) <= 1 or in_memory):
        for f in todo:
            finished(f, span_summary(f, thresholds, cache))
        return out
    if executor is not None:
        from concurrent.futures import as_completed

        futures = {executor.submit(_summary_job, f, thresholds, cache_spec, debug): f
                   for f in todo}
        for fut in as_completed(futures):
            finished(futures[fut], _unpack(fut.result()))
        return out
    # A worker killed mid-file (the out-of-memory killer, a SIGKILL) breaks the whole pool
    # and every file in flight with it. Those files are retried once in a fresh pool; what
    # breaks that one too runs one file per process, so only the file that kills its
    # process again is reported as such, and every other file is still analysed.
    left = _pool_round(todo, thresholds, cache_spec, n_workers, finished, debug)
    if left:
        _log.debug("a worker died: %d file(s) retried in a fresh pool", len(left))
        left = _pool_round(left, thresholds, cache_spec, n_workers, finished, debug)
    if left:
        _log.debug("a worker died again: %d file(s) retried one per process", len(left))
        _one_per_process(left, thresholds, cache_spec, n_workers, finished, debug)
    return out


def _pool_round(files: list[SpanFile], thresholds: Thresholds | None, cache_spec: CacheSpec | None,
                n_workers: int, finished: Callable[[SpanFile, dict[str, Any]], None],
                debug: bool = False) -> list[SpanFile]:
    """Run the files' jobs in a fresh pool; the files it did not finish because the pool
    broke (a worker died), in their order."""
    # Imported here, not at the top: 2.4 MB resident that analysing one file never needs.
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    lost: set[int] = set()
    pool = ProcessPoolExecutor(max_workers=min(n_workers, len(files)),
                               mp_context=get_context("spawn"))
    try:
        futures = {}
        for k, f in enumerate(files):
            try:
                futures[pool.submit(_summary_job, f, thresholds, cache_spec, debug)] = k
            except BrokenProcessPool:  # it broke while the jobs were being handed out
                lost.update(range(k, len(files)))
                break
        for fut in as_completed(futures):
            k = futures[fut]
            try:
                summary = _unpack(fut.result())
            except BrokenProcessPool:
                lost.add(k)
                continue
            except Exception as exc:  # the job itself failed (a result that does not unpickle)
                _log.debug("the job of %s failed", files[k].relpath, exc_info=True)
                summary = _failed(files[k], f"could not be analysed ({type(exc).__name__}: "
                                            f"{exc})")
            finished(files[k], summary)
    finally:
        pool.shutdown(cancel_futures=True)
    return [files[k] for k in sorted(lost)]


def _one_file_job(conn: Any, f: SpanFile, thresholds: Thresholds | None,
                  cache_spec: CacheSpec | None, debug: bool = False) -> None:
    conn.send(_summary_job(f, thresholds, cache_spec, debug))
    conn.close()


def _one_per_process(files: list[SpanFile], thresholds: Thresholds | None,
                     cache_spec: CacheSpec | None, n_workers: int,
                     finished: Callable[[SpanFile, dict[str, Any]], None],
                     debug: bool = False) -> None:
    """Each file in a process of its own (``n_workers`` at a time): a process that dies
    costs only its file, which gets a one-line error saying how it died."""
    from multiprocessing import get_context
    from multiprocessing.connection import wait

    ctx = get_context("spawn")
    pending = list(files)
    running: dict[Any, tuple[Any, SpanFile]] = {}  # result pipe → (process, file)
    while pending or running:
        while pending and len(running) < n_workers:
            f = pending.pop(0)
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_one_file_job,
                               args=(send, f, thresholds, cache_spec, debug), daemon=True)
            proc.start()
            send.close()  # the child holds the only writer: its death is EOF here
            running[recv] = (proc, f)
        for recv in wait(list(running)):
            proc, f = running.pop(recv)
            try:
                summary = _unpack(recv.recv())
            except (EOFError, OSError):
                proc.join()
                summary = _failed(f, _death(proc.exitcode))
            else:
                proc.join()
            recv.close()
            finished(f, summary)


def _failed(f: SpanFile, problem: str) -> dict[str, Any]:
    """The span's document with one error line, ``problem`` in words."""
    from tb_diagnostics.report.document import span_document

    return span_document(f, None, f"{f.relpath}: {problem}")


def _death(exitcode: int | None) -> str:
    """How a process that returned no result ended, in words."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        if -exitcode == signal.SIGKILL:
            return f"the process analysing it was killed ({name}: out of memory?)"
        return f"the process analysing it was killed ({name})"
    return f"the process analysing it exited with status {exitcode} before it finished"
