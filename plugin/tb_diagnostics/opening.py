"""Opening span files: each one's model (from the cache when it is current) and analysis.

Below the engine (:mod:`tb_diagnostics.engine`, which runs load → analyse →
present over many files): a renderer that needs a span's analysis again, not only
its document (the compare's per-op times, the HTML report's dispatch trees),
opens it here, the same way and through the same cache as the engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from tb_diagnostics.analysis import SpanAnalysis, Thresholds
from tb_diagnostics.cache import TraceCache
from tb_diagnostics.errors import TraceLoadError
from tb_diagnostics.logdir import SpanFile
from tb_diagnostics.trace import TraceModel, load_trace


def open_model(f: SpanFile, cache: TraceCache | None = None) -> TraceModel:
    """The model of a span file: from the cache when it is current, else parsed (and cached)."""
    if cache is not None:
        model = cache.get_model(f)
        if model is not None:
            return model
    # The listing's size and mtime: a file replaced since is reported, not cached under them.
    model = load_trace(f.url, display_path=f.relpath, expect=(f.size, f.mtime))
    if cache is not None:
        with contextlib.suppress(OSError):  # a full or read-only cache must not fail analysis
            cache.put_model(f, model)
    return model


def open_analysis(f: SpanFile, thresholds: Thresholds | None = None,
                  cache: TraceCache | None = None) -> SpanAnalysis:
    """A :class:`SpanAnalysis` of the span (raises :class:`TraceLoadError`)."""
    return SpanAnalysis(open_model(f, cache), thresholds)


def analysed_spans(files: Iterable[SpanFile], span_docs: dict[str, dict[str, Any]],
                   thresholds: Thresholds | None = None, cache: TraceCache | None = None,
                   ) -> Iterator[tuple[dict[str, Any], SpanAnalysis]]:
    """``(span document, analysis)`` for each file that the report analysed with steps
    (``span_docs`` by relpath); unreadable files are skipped: the report names them."""
    for f in files:
        span = span_docs.get(f.relpath)
        if span is None or not span["steps"]:
            continue
        try:
            yield span, open_analysis(f, thresholds, cache)
        except TraceLoadError:
            continue
