"""Cost counted, not timed: the lines of the package's code a call executes.

The linearity tests (``test_linearity_depth``, ``test_linearity_kernels``) compare this
count on a base trace and on one ten times deeper, wider or longer: the same on any
machine and under any load, where a wall-clock ratio fails on a busy machine and proves
nothing on an idle one.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

import tb_diagnostics

PACKAGE = str(Path(tb_diagnostics.__file__).parent)


def executed_lines(fn: Callable[[], object]) -> int:
    """Lines of the package's code that ``fn()`` executes, on every thread it starts."""
    count = 0
    lock = threading.Lock()

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            with lock:
                count += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    threading.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(previous)
        threading.settrace(None)  # type: ignore[arg-type]
    return count
