"""What a request to the provider may ask, checked: the errors that carry an HTTP status,
and the parsers of the query parameters (a step, a number, highlight rows).

Kept apart from the provider so the provider is lookups and answers only; each parser
raises :class:`BadRequest` or :class:`NotFound` with a sentence that names the parameter.
"""

from __future__ import annotations

#: At most this many evidence rows may be pinned into one timeline request.
MAX_HIGHLIGHT = 64


class RequestError(Exception):
    """A request the provider cannot answer; ``code`` is the HTTP status."""

    code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(RequestError):
    code = 400


class NotFound(RequestError):
    code = 404


class Unavailable(RequestError):
    """Known but not servable now (still loading, unreadable): 409."""

    code = 409



def step_index(windows: list, step: str | None) -> int:
    """``step`` is ProfilerStep#N's N, or ``all`` for a span without steps."""
    if not step:
        raise BadRequest("missing parameter 'step'")
    if step == "all":
        if len(windows) == 1 and windows[0].step is None:
            return 0
        raise NotFound("this span has ProfilerStep# steps: ask for one by number")
    try:
        n = int(step)
    except ValueError:
        raise BadRequest(f"step must be a step number or 'all', not {step!r}") from None
    for w in windows:
        if w.step == n:
            return w.index
    known = ", ".join(str(w.step) for w in windows if w.step is not None) or "none"
    raise NotFound(f"no step {n} in this span (steps: {known})")


def opt_float(name: str, text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise BadRequest(f"{name} must be a number, not {text!r}") from None


def parse_rows(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    parts = text.split(",")
    if len(parts) > MAX_HIGHLIGHT:
        raise BadRequest(f"at most {MAX_HIGHLIGHT} highlight rows")
    try:
        rows = tuple(sorted({int(p) for p in parts if p.strip()}))
    except ValueError:
        raise BadRequest("highlight must be comma-separated row numbers") from None
    if any(r < 0 for r in rows):
        raise BadRequest("highlight rows must be >= 0")
    return rows
