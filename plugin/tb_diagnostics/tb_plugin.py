"""The TensorBoard plugin: a "Diagnostics" tab over the log dir's PyTorch profiler traces.

Registered through the ``tensorboard_plugins`` entry point. TensorBoard's
data server only reads event files, so the plugin reads ``*.pt.trace.json``
from ``context.logdir`` itself; that works with the default fast loader and
with ``--load_fast=false`` alike. Under ``--logdir_spec`` the log dir is
empty and the tab says so (torch-tb-profiler silently scanned the working
directory instead).

Routes (under ``/data/plugin/diagnostics``), each thin over
:class:`~tb_diagnostics.server.DataProvider`:

- ``/index.js``, ``/static/*``: the tab (plain ES modules, no build step);
- ``/runs``: runs → workers → spans, the log dir's status, known load errors;
- ``/span?run=&worker=&span=``: the span's summary (202 + progress while it loads);
- ``/step?run=&worker=&span=&step=N[&highlight=rows]``: one step's dispatch
  tree and timeline (``step=all`` for a span without ProfilerStep# events);
- ``/progress``: loads in flight and the cache's size;
- ``/run?run=``: the run's ranks × steps table and run-level findings (202 while loading).
- ``/timeline?run=&worker=&span=[&t0=&t1=&width=]``: the span's timeline in a time range,
  level of detail decided on the server (analysis/span_timeline.py);
- ``/chrome_trace?run=&worker=&span=[&step=N]``: the span or one step as a gzipped
  Chrome-trace JSON download, for ui.perfetto.dev.

Every route is GET (and HEAD) only: other methods get 405. Names travel exact: a
query's percent-escapes that are not UTF-8 (``run=caf%E9``, a Latin-1 directory)
come back as the surrogate-escaped str Python lists the name as, and the JSON
keeps such a name as ``\\udcXX`` escapes (:mod:`tb_diagnostics.output`).
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tb_diagnostics.cache import TraceCache
from tb_diagnostics.output import encode_json
from tb_diagnostics.server import DataProvider, RequestError

_log = logging.getLogger(__name__)

PLUGIN_NAME = "diagnostics"
STATIC_DIR = Path(__file__).resolve().parent / "static"
_JSON = "application/json"
_CONTENT_TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".txt": "text/plain",
    ".md": "text/plain",
    "": "text/plain",  # LICENSE
}


def resolve_logdir(context: base_plugin.TBContext) -> tuple[str | None, str | None]:
    """(log dir to read, or None; why there is none).

    ``context.logdir`` is the raw flag: expand ``~`` and make it absolute (a
    relative path is relative to where TensorBoard started); URLs stay as given.
    """
    raw = (context.logdir or "").strip()
    if raw:
        if "://" in raw:
            return raw, None
        return os.path.abspath(os.path.expanduser(raw)), None
    flags = context.flags
    if flags is not None and getattr(flags, "logdir_spec", ""):
        return None, ("TensorBoard was started with --logdir_spec, which the Diagnostics tab "
                      "does not read. Start it with --logdir DIR (the directory given to "
                      "tensorboard_trace_handler) to see the traces.")
    return None, "TensorBoard was started without --logdir."


class DiagnosticsPlugin(base_plugin.TBPlugin):
    """The Diagnostics tab."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        # Cheap on purpose: TensorBoard drops a plugin whose constructor raises,
        # and nothing is scanned or loaded until the first request.
        logdir, problem = resolve_logdir(context)
        # Parsed traces are cached outside the log dir (TB_DIAGNOSTICS_CACHE,
        # default ~/.cache/tb-diagnostics), shared with the CLI; nothing is
        # ever written into the log dir.
        self.provider = DataProvider(logdir, problem, cache=TraceCache.for_logdir_or_none(logdir))

    def get_plugin_apps(self) -> dict[str, Any]:
        apps = {
            "/index.js": self._serve_index,
            "/static/*": self._serve_static,
            "/runs": self._serve_runs,
            "/span": self._serve_span,
            "/step": self._serve_step,
            "/progress": self._serve_progress,
            "/run": self._serve_run,
            "/compare": self._serve_compare,
            "/view": self._serve_view,
            "/timeline": self._serve_timeline,
            "/chrome_trace": self._serve_chrome_trace,
        }
        return {route: _get_only(app) for route, app in apps.items()}

    def is_active(self) -> bool:
        try:
            return self.provider.is_active()
        except Exception:  # never break TensorBoard's plugin listing
            _log.exception("tb-diagnostics: is_active failed")
            return False

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Diagnostics")

    # ---- handlers: parse, ask the provider, respond --------------------------
    @wrappers.Request.application
    def _serve_index(self, request: wrappers.Request) -> wrappers.Response:
        return self._file(request, "index.js")

    @wrappers.Request.application
    def _serve_static(self, request: wrappers.Request) -> wrappers.Response:
        marker = f"/plugin/{PLUGIN_NAME}/static/"
        _, found, rel = request.path.partition(marker)
        return self._file(request, rel if found else "")

    @wrappers.Request.application
    def _serve_runs(self, request: wrappers.Request) -> wrappers.Response:
        return _json(request, self.provider.runs())

    @wrappers.Request.application
    def _serve_span(self, request: wrappers.Request) -> wrappers.Response:
        a = query_args(request)
        return _call(request, self.provider.span, a.get("run"), a.get("worker"), a.get("span"))

    @wrappers.Request.application
    def _serve_step(self, request: wrappers.Request) -> wrappers.Response:
        a = query_args(request)
        return _call(request, self.provider.step, a.get("run"), a.get("worker"), a.get("span"),
                     a.get("step"), a.get("highlight"))

    @wrappers.Request.application
    def _serve_view(self, request: wrappers.Request) -> wrappers.Response:
        a = query_args(request)
        return _call(request, self.provider.view, a.get("name"), a.get("run"), a.get("worker"),
                     a.get("span"), a)

    @wrappers.Request.application
    def _serve_timeline(self, request: wrappers.Request) -> wrappers.Response:
        a = query_args(request)
        return _call(request, self.provider.span_timeline, a.get("run"), a.get("worker"),
                     a.get("span"), a.get("t0"), a.get("t1"), a.get("width"))

    @wrappers.Request.application
    def _serve_chrome_trace(self, request: wrappers.Request) -> wrappers.Response:
        a = query_args(request)
        try:
            body, name = self.provider.chrome_trace(a.get("run"), a.get("worker"),
                                                    a.get("span"), a.get("step"))
        except RequestError as exc:
            return _json(request, {"error": exc.message}, exc.code)
        # A download (the browser saves it; the user opens it in ui.perfetto.dev).
        plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_"
                        for c in name)
        exact = quote(name, errors="surrogateescape")
        return http_util.Respond(request, body, "application/gzip", headers=[
            ("Content-Disposition", f"attachment; filename=\"{plain}\"; "
                                    f"filename*=UTF-8''{exact}")])

    @wrappers.Request.application
    def _serve_run(self, request: wrappers.Request) -> wrappers.Response:
        return _call(request, self.provider.run, query_args(request).get("run"))

    @wrappers.Request.application
    def _serve_compare(self, request: wrappers.Request) -> wrappers.Response:
        from tb_diagnostics.server.compare import compare

        a = query_args(request)
        return _call(request, compare, self.provider, a.get("baseline"), a.get("candidate"))

    @wrappers.Request.application
    def _serve_progress(self, request: wrappers.Request) -> wrappers.Response:
        return _json(request, self.provider.progress())

    def _file(self, request: wrappers.Request, rel: str) -> wrappers.Response:
        path = static_path(rel)
        if path is None:
            return _json(request, {"error": f"no such file: {rel!r}"}, 404)
        ctype = _CONTENT_TYPES[path.suffix.lower() if path.suffix else ""]
        return http_util.Respond(request, path.read_bytes(), ctype)


def static_path(rel: str) -> Path | None:
    """The file under ``static/`` that ``rel`` names, or None (traversal, hidden, unknown type)."""
    if not rel or "\\" in rel or "\x00" in rel or rel.startswith("/"):
        return None
    norm = posixpath.normpath(rel)
    if norm.startswith("..") or any(p.startswith(".") for p in norm.split("/")):
        return None
    path = (STATIC_DIR / norm).resolve()
    try:
        path.relative_to(STATIC_DIR)
    except ValueError:
        return None
    if not path.is_file() or path.suffix.lower() not in _CONTENT_TYPES:
        return None
    return path


# Every printable ASCII byte stays as sent (the query's own % escapes among them).
_QUERY_SAFE = "".join(map(chr, range(0x21, 0x7F)))
_ALLOWED_METHODS = ("GET", "HEAD")


def query_args(request: wrappers.Request) -> dict[str, str]:
    """The query's parameters (the first value of each), decoded from the raw query
    string: bytes that are not UTF-8 become surrogate escapes, as in the names Python
    lists (werkzeug's ``request.args`` would replace them, and ``run=caf%E9`` would
    name no run)."""
    # Raw non-ASCII bytes (a client that sent them unescaped) are escaped first, so they
    # decode as the same bytes would from %XX.
    text = quote(request.query_string, safe=_QUERY_SAFE)
    parsed = parse_qs(text, keep_blank_values=True, encoding="utf-8", errors="surrogateescape")
    return {k: v[0] for k, v in parsed.items()}


def _get_only(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """``app`` answering GET and HEAD; any other method gets 405 (every route only reads)."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method in _ALLOWED_METHODS:
            return app(environ, start_response)
        request = wrappers.Request(environ)
        body = encode_json({"error": f"method {method} not allowed: the Diagnostics routes "
                                     f"answer {' and '.join(_ALLOWED_METHODS)}"})
        response = http_util.Respond(request, body, _JSON, code=405,
                                     headers=[("Allow", ", ".join(_ALLOWED_METHODS))])
        return response(environ, start_response)

    return wsgi


def _json(request: wrappers.Request, payload: Any, code: int = 200) -> wrappers.Response:
    # msgspec: ~10x faster than json.dumps on a timeline, and NaN becomes null
    # (valid JSON) where TensorBoard's Cleanse would send the string "NaN".
    # encode_json keeps a name that is not UTF-8 exact, where msgspec alone raises.
    return http_util.Respond(request, encode_json(payload), _JSON, code=code)


def _call(request: wrappers.Request, method: Any, *args: Any) -> wrappers.Response:
    try:
        code, payload = method(*args)
    except RequestError as exc:
        return _json(request, {"error": exc.message}, exc.code)
    return _json(request, payload, code)
