"""tb-diagnostics: explains PyTorch profiler traces step by step.

The pipeline reads like Lighthouse: **load** (log dir → runs/workers/spans →
a columnar :class:`~tb_diagnostics.trace.model.TraceModel`), **analyse**
(step windows, verdicts, rules as pure functions of the model) and
**present** (the CLI, JSON documents, the TensorBoard tab).

From Python: :func:`analyze` returns a :class:`Report` (a notebook shows it inline;
DataFrames with ``tb-diagnostics[pandas]``), and :func:`trace_handler` is a drop-in for
``torch.profiler.tensorboard_trace_handler`` that logs each profiling cycle's verdict.
Both are imported on first use, so ``import tb_diagnostics`` loads neither numpy nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tb_diagnostics.errors import LogDirError, TraceLoadError

if TYPE_CHECKING:
    from tb_diagnostics.api import Report, analyze
    from tb_diagnostics.handler import trace_handler

__version__ = "0.1.0"

__all__ = ["LogDirError", "Report", "TraceLoadError", "__version__", "analyze",
           "trace_handler"]

#: Public names served lazily (PEP 562): the module that defines each.
_LAZY = {"analyze": "tb_diagnostics.api", "Report": "tb_diagnostics.api",
         "trace_handler": "tb_diagnostics.handler"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tb_diagnostics' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
