"""Table views of one span (Operators, Kernels, Memory, Modules): the views
torch-tb-profiler users work in, each one module of this package.

A module exposes ``VIEW = SpanView(...)``: its ``document(analysis, params)`` answers the
tab's ``/view?name=<name>`` route, the ``tb-diagnostics <name>`` command and the Python
API from the same analysis views (``analysis/views/``: computed once, memoized). Tables
are bounded: a document holds at most ``params.limit`` rows of the sorted, filtered table
and says how many there are (``total_rows``), so a span of 10⁶ ops never sends them all.
Adding a view is adding one module here (the CLI command comes with
``commands/_view_command.make_view_command``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.discovery import discover

#: Rows a document holds unless asked for fewer; the most it ever holds.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class ViewParamError(ValueError):
    """A parameter the view cannot use; the message names it."""


@dataclass(frozen=True)
class ViewParams:
    """What a caller may ask of any view: the step (None: the whole span), grouping,
    sorting, a search string, and the page."""

    step: str | None = None  # a step number, or None for the span
    group: str | None = None  # view-specific ("name", "shapes", "op", …)
    sort: str | None = None  # a column name; "-col" for descending
    q: str | None = None  # case-insensitive substring of the row's name
    offset: int = 0
    limit: int = DEFAULT_LIMIT
    extra: Mapping[str, str] | None = None  # view-specific parameters, as given

    @classmethod
    def from_query(cls, args: Mapping[str, str]) -> ViewParams:
        """From a route's query parameters (strings); raises ViewParamError."""
        def number(key: str, default: int, lo: int, hi: int) -> int:
            raw = args.get(key)
            if raw in (None, ""):
                return default
            try:
                value = int(raw)
            except ValueError:
                raise ViewParamError(f"{key} must be an integer, not {raw!r}") from None
            return max(lo, min(value, hi))

        known = {"name", "run", "worker", "span", "step", "group", "sort", "q", "offset", "limit"}
        return cls(step=args.get("step") or None, group=args.get("group") or None,
                   sort=args.get("sort") or None, q=args.get("q") or None,
                   offset=number("offset", 0, 0, 1 << 62),
                   limit=number("limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
                   extra={k: v for k, v in args.items() if k not in known})


#: (the span's analysis, the parameters) → the view's JSON document.
Document = Callable[[SpanAnalysis, ViewParams], dict[str, Any]]


@dataclass(frozen=True)
class SpanView:
    """One table view of a span."""

    name: str  # the route's ``name=``, the CLI command, the span JSON key
    title: str  # the tab card's title
    document: Document
    #: The document's row list key and the columns a CSV export writes, in order.
    rows_key: str = "rows"
    columns: tuple[str, ...] = ()
    #: Plain text for the CLI (the document → lines); None: a table of ``columns``.
    text: Callable[[dict[str, Any]], str] | None = None


@cache
def all_views() -> dict[str, SpanView]:
    """Every view by name (discovered: one module of this package each)."""
    found = discover(__name__, __path__, "VIEW", SpanView)
    out: dict[str, SpanView] = {}
    for module, view in found:
        if view.name in out:
            raise ValueError(f"duplicate view name {view.name!r} in {module}")
        out[view.name] = view
    return out


def page(rows: list[dict[str, Any]], params: ViewParams, *, name_key: str = "name",
         default_sort: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """Filter by ``params.q`` on ``name_key``, sort by ``params.sort`` (or
    ``default_sort``; "-col" descending, None values last), and cut the page: the page's
    rows and how many matched. Raises ViewParamError for a column no row has."""
    if params.q:
        needle = params.q.casefold()
        rows = [r for r in rows if needle in str(r.get(name_key) or "").casefold()]
    key = params.sort or default_sort
    if key:
        desc = key.startswith("-")
        col = key[1:] if desc else key
        if rows and col not in rows[0]:
            raise ViewParamError(f"sort: no column {col!r} (one of {', '.join(rows[0])})")
        present = [r for r in rows if r.get(col) is not None]
        absent = [r for r in rows if r.get(col) is None]
        present.sort(key=lambda r: r[col], reverse=desc)
        rows = present + absent
    total = len(rows)
    return rows[params.offset:params.offset + params.limit], total


def step_window(analysis: SpanAnalysis, step: str | None) -> int | None:
    """The window index of ``step`` (ProfilerStep#N's N; "all" or None: the whole span,
    None returned). Raises ViewParamError for a step the span does not have."""
    if step in (None, "", "all"):
        return None
    try:
        n = int(step)
    except ValueError:
        raise ViewParamError(f"step must be a step number or 'all', not {step!r}") from None
    for w in analysis.windows:
        if w.step == n:
            return w.index
    raise ViewParamError(f"no step {n} in this span")
