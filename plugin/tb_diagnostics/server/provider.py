"""The data provider: what the routes ask, answered from the scan and the loader.

Routes name runs, workers and spans; they never pass paths. A name is looked
up in the scan, and anything not found there is a 404 with a sentence that
says what exists, so a bad link or a stale URL explains itself.
"""

from __future__ import annotations

import functools
from typing import Any

from tb_diagnostics.analysis import Thresholds
from tb_diagnostics.analysis.span_rows import warm as span_timeline_warm
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.server.devices import span_device
from tb_diagnostics.server.exports import LastExported
from tb_diagnostics.server.loader import Loaded, Progress, SpanLoader, key_of
from tb_diagnostics.server.present import load_and_summarise, step_detail
from tb_diagnostics.server.requests import (
    BadRequest,
    NotFound,
    RequestError,
    Unavailable,
    opt_float,
    parse_rows,
    step_index,
)
from tb_diagnostics.server.scan import FileNow, ScanCache, ScanResult, file_now
from tb_diagnostics.storage import is_local

#: The request errors are re-exported: callers and tests catch them from here.
__all__ = ["BadRequest", "DataProvider", "NotFound", "RequestError", "Unavailable"]

#: Per-span cache of step payloads (a user clicks between a few steps).
MAX_DETAILS = 24


class DataProvider:
    """Everything the tab's routes need, with no HTTP in it."""

    def __init__(self, logdir: str | None, problem: str | None = None,
                 thresholds: Thresholds | None = None, cache: TraceCache | None = None,
                 scan_max_age_s: float = 5.0, fresh_s: float = 1.0,
                 loader: SpanLoader | None = None) -> None:
        self.logdir = logdir
        self.fresh_s = fresh_s  # /runs lists files no older than this: reload finds new ones
        self.problem = problem  # why there is no log dir (e.g. --logdir_spec)
        self._scan = ScanCache(logdir, max_age_s=scan_max_age_s) if logdir else None
        work = functools.partial(load_and_summarise, thresholds=thresholds, cache=cache)
        self.loader = loader or SpanLoader(work)
        self._exports = LastExported()  # /chrome_trace: the last span's file, decoded

    # ---- cheap status -------------------------------------------------------
    def is_active(self) -> bool:
        """True when the log dir holds traces; never scans in the caller after the first look."""
        if self._scan is None:
            return False
        result = self._scan.peek()
        return bool(result and result.has_traces)

    def _latest(self, max_age_s: float | None) -> ScanResult | None:
        """The scan (the last one at once when ``max_age_s`` is None, else one no older),
        with the loader's summary bound grown to hold every file it lists: a run of more
        spans than the bound would otherwise evict its own summaries while it loads."""
        assert self._scan is not None
        result = self._scan.peek() if max_age_s is None else self._scan.get(max_age_s)
        if result is None and max_age_s is None:
            result = self._scan.get(max_age_s=0.0)
        if result is not None and result.logdir is not None:
            self.loader.hold_summaries(len(result.logdir.files))
        return result

    # ---- routes -------------------------------------------------------------
    def runs(self) -> dict[str, Any]:
        """The run → worker → span tree, the log dir's status and known load errors."""
        out: dict[str, Any] = {"logdir": self.logdir, "status": "ok", "message": None,
                               "runs": [], "errors": [], "loading": self.loader.progress(),
                               "notes": []}
        if self._scan is None:
            out.update(status="no_logdir", message=self.problem)
            return out
        result = self._latest(self.fresh_s)
        if result is None:
            out.update(status="scanning", message=f"still listing {self.logdir}")
            return out
        if result.error:
            out.update(status="error", message=result.error)
            return out
        tree = result.logdir
        out["notes"] = tree.notes if tree else []  # e.g. symbolic links not followed
        if not tree or not tree.runs:
            out.update(status="empty",
                       message=f"no PyTorch profiler traces (*.pt.trace.json[.gz]) under "
                               f"{self.logdir}")
            return out
        out["runs"] = [
            {"run": r.name, "workers": [
                {"worker": w.name, "spans": [
                    {"span": s.span, "file": s.relpath, "size": s.size, "mtime": s.mtime,
                     "state": self.loader.peek(s), **self._device(s)}
                    for s in w.spans]}
                for w in r.workers]}
            for r in tree.runs
        ]
        listed = {f.url: key_of(f) for f in tree.files}
        out["errors"] = [{"file": e.file.relpath, "run": e.file.run, "worker": e.file.worker,
                          "span": e.file.span, "message": e.error}
                         for e in self.loader.errors() if _still_current(e, listed)]
        return out

    def _device(self, f: SpanFile) -> dict[str, Any]:
        """``device`` (the analysis' once loaded, else the file header's) and
        ``device_note`` (why there is none), without starting a load."""
        assert self._scan is not None
        device, note = span_device(self.loader.device_of(f), self._scan.devices.get(f))
        return {"device": device, "device_note": note}

    def span(self, run: str, worker: str, span: str) -> tuple[int, dict[str, Any]]:
        """The span's summary (200), its load progress (202) or its load error (200)."""
        now = self._locate(run, worker, span)
        if now.problem:
            return 200, _error(self.loader.refuse(now.file, now.problem))
        got = self.loader.get(now.file)
        if isinstance(got, Progress):
            return 202, {"status": "loading", "progress": got.to_dict()}
        if got.error:
            return 200, _error(got)
        return 200, {"status": "ready", "summary": got.tab_summary}

    def step(self, run: str, worker: str, span: str, step: str,
             highlight: str | None = None) -> tuple[int, dict[str, Any]]:
        """One step's dispatch tree and timeline (202 while the span loads)."""
        now = self._locate(run, worker, span)
        rows = parse_rows(highlight)
        if now.problem:
            return 200, _error(self.loader.refuse(now.file, now.problem))
        f = now.file
        got = self.loader.get(f, need_analysis=True)
        if isinstance(got, Progress):
            return 202, {"status": "loading", "progress": got.to_dict()}
        if got.error:
            return 200, _error(got)
        analysis = got.analysis
        if analysis is None:  # evicted between the two looks: reload
            return 202, {"status": "loading", "progress": Progress(file=f).to_dict()}
        index = step_index(analysis.windows, step)
        span_timeline_warm(analysis)  # the whole-span timeline's layout, in the background
        key = (index, rows)
        detail = got.details.get(key)
        if detail is None:
            detail = step_detail(analysis, index, rows)
            if len(got.details) >= MAX_DETAILS:
                got.details.clear()
            got.details[key] = detail
        return 200, {"status": "ready", **detail}

    def view(self, name: str | None, run: str, worker: str, span: str,
             args: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """One page of a span's table view (``report/views``: ops, kernels, memory,
        modules), 202 while the span loads."""
        from tb_diagnostics.report.views import ViewParamError, ViewParams, all_views

        views = all_views()
        if not name or name not in views:
            raise BadRequest(f"name must be one of {', '.join(sorted(views))}, not {name!r}")
        try:
            params = ViewParams.from_query(args)
        except ViewParamError as exc:
            raise BadRequest(str(exc)) from None
        code, got = self._analysis(run, worker, span)
        if isinstance(got, dict):  # loading, or an error
            return code, got
        try:
            doc = views[name].document(got, params)
        except ViewParamError as exc:
            raise BadRequest(str(exc)) from None
        return 200, {"status": "ready", "view": name, **doc}

    def span_timeline(self, run: str, worker: str, span: str, t0: str | None,
                      t1: str | None, width: str | None) -> tuple[int, dict[str, Any]]:
        """The span's timeline in ``[t0, t1]`` at ``width`` pixels, level of detail decided
        here (:mod:`~tb_diagnostics.analysis.span_timeline`); 202 while the span loads."""
        from tb_diagnostics.analysis.span_timeline import SpanTimelineError, span_timeline

        lo, hi = opt_float("t0", t0), opt_float("t1", t1)
        px = int(opt_float("width", width) or 1200)
        code, got = self._analysis(run, worker, span)
        if isinstance(got, dict):  # loading, or an error
            return code, got
        try:
            return 200, {"status": "ready", **span_timeline(got, lo, hi, px)}
        except SpanTimelineError as exc:
            raise BadRequest(str(exc)) from None

    def chrome_trace(self, run: str, worker: str, span: str, step: str | None
                     ) -> tuple[bytes, str]:
        """The span (or one step of it) as gzipped Chrome-trace JSON and its file name
        (:mod:`~tb_diagnostics.trace.chrome_export`); 409 until the span is loaded."""
        from tb_diagnostics.analysis.span_timeline import file_range
        from tb_diagnostics.errors import TraceLoadError
        from tb_diagnostics.trace.chrome_export import export_file

        _, got = self._analysis(run, worker, span)
        if isinstance(got, dict):
            raise Unavailable(got.get("error") or "the span is still loading: open it first")
        f = self._locate(run, worker, span).file
        index = step_index(got.windows, step) if step else None
        loaded = self.loader.get(f)  # the span's entry, kept: its file decoded rides on it
        try:
            parsed = self._exports.parsed(loaded) if isinstance(loaded, Loaded) else None
            return export_file(f.url, f.relpath, file_range(got, index),
                               "" if index is None else f".step{step}", parsed)
        except TraceLoadError as exc:
            raise Unavailable(str(exc)) from None

    def _analysis(self, run: str, worker: str, span: str) -> tuple[int, Any]:
        """(200, the span's analysis) or (code, the payload dict that says why there is
        none: 202 while it loads, 200 with its error)."""
        now = self._locate(run, worker, span)
        if now.problem:
            return 200, _error(self.loader.refuse(now.file, now.problem))
        got = self.loader.get(now.file, need_analysis=True)
        if isinstance(got, Progress):
            return 202, {"status": "loading", "progress": got.to_dict()}
        if got.error:
            return 200, _error(got)
        if got.analysis is None:  # evicted between the two looks: reload
            return 202, {"status": "loading", "progress": Progress(file=now.file).to_dict()}
        return 200, got.analysis

    def run_document(self, run: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The run as a report run document built from its spans' summaries, and the
        progress of the spans still loading (starting their loads)."""
        if self._scan is None:
            raise NotFound(self.problem or "TensorBoard has no --logdir")
        result = self._latest(None)
        found = result.logdir.run(run) if result and result.logdir else None
        if found is None:
            raise NotFound(f"no run {run!r} in {self.logdir}")
        workers, pending = [], []
        for w in found.workers:
            spans = []
            for listed in w.spans:
                now = file_now(listed)
                if not now.exists:
                    continue  # deleted since the scan
                if now.problem:  # a FIFO, a link swapped in: an error, like a bad file's
                    self.loader.refuse(now.file, now.problem)
                    continue
                got = self.loader.get(now.file)
                if isinstance(got, Progress):
                    pending.append(got.to_dict())
                elif not got.error:
                    spans.append(got.summary)
            workers.append({"worker": w.name, "spans": spans})
        return {"run": run, "workers": workers}, pending

    def run(self, run: str | None) -> tuple[int, dict[str, Any]]:
        """The run's ranks × steps table and run-level findings (202 while spans load).

        Built from the spans' summaries only (their ``distributed`` sections), like
        ``tb-diagnostics report``'s ``run["ranks"]`` and ``run["findings"]``.
        """
        from tb_diagnostics.report.distributed import add_run_analysis

        if not run:
            raise BadRequest("missing parameter 'run'")
        doc, pending = self.run_document(run)
        if pending:
            return 202, {"status": "loading", "progress": pending[0], "pending": len(pending)}
        doc = add_run_analysis(doc)
        return 200, {"status": "ready", "run": run, "ranks": doc["ranks"],
                     "findings": doc["findings"]}

    def progress(self) -> dict[str, Any]:
        return {"loading": self.loader.progress(), "cache": self.loader.stats()}

    # ---- lookups ------------------------------------------------------------
    def find(self, run: str | None, worker: str | None, span: str | None) -> SpanFile:
        """The span file named by the route's parameters, with its size and mtime as they
        are now, or NotFound/BadRequest."""
        return self._locate(run, worker, span).file

    def _locate(self, run: str | None, worker: str | None, span: str | None) -> FileNow:
        for name, value in (("run", run), ("worker", worker), ("span", span)):
            if not value:
                raise BadRequest(f"missing parameter {name!r}")
        if self._scan is None:
            raise NotFound(self.problem or "TensorBoard has no --logdir")
        result = self._latest(None)
        f = _lookup(result, run, worker, span)
        if f is None:  # maybe new since the last scan: look once more, fresh
            result = self._latest(0.0)
            f = _lookup(result, run, worker, span)
        if f is None:
            raise NotFound(_not_found(result, run, worker, span, self.logdir or ""))
        # The scan may be seconds old: the file is loaded as it is now (a file the profiler
        # just finished writing gets a fresh load, not its truncated version's error).
        now = file_now(f)
        if not now.exists:
            raise NotFound(f"{f.relpath}: no longer exists (deleted since the log dir "
                           "was listed)")
        return now

    def shutdown(self) -> None:
        self.loader.shutdown()


def _still_current(entry: Loaded, listed: dict[str, Any]) -> bool:
    """Whether an error is of a listed file as it is now: a run deleted since (even within
    the scan's second) or a file rewritten since its load failed no longer has that error.
    A local file is stat'ed (errors are few); a URL is compared with the scan."""
    f = entry.file
    if f.url not in listed:
        return False
    if not is_local(f.url):
        return key_of(f) == listed[f.url]
    now = file_now(f)
    return now.exists and key_of(now.file) == key_of(f)


def _error(entry: Loaded) -> dict[str, Any]:
    return {"status": "error", "file": entry.file.relpath, "error": entry.error}


def _lookup(result: ScanResult | None, run: str, worker: str, span: str) -> SpanFile | None:
    if result is None or result.logdir is None:
        return None
    r = result.logdir.run(run)
    w = next((w for w in r.workers if w.name == worker), None) if r else None
    return next((s for s in w.spans if s.span == span), None) if w else None


def _not_found(result: ScanResult | None, run: str, worker: str, span: str,
               logdir: str) -> str:
    tree = result.logdir if result else None
    r = tree.run(run) if tree else None
    if r is None:
        return f"no run {run!r} in {logdir}"
    w = next((w for w in r.workers if w.name == worker), None)
    if w is None:
        names = ", ".join(x.name for x in r.workers)
        return f"no worker {worker!r} in run {run!r} (workers: {names})"
    names = ", ".join(s.span for s in w.spans)
    return f"no span {span!r} for worker {worker!r} of run {run!r} (spans: {names})"
