"""tb-diagnostics: explains PyTorch profiler traces step by step.

The pipeline reads like Lighthouse: **load** (log dir → runs/workers/spans →
a columnar :class:`~tb_diagnostics.trace.model.TraceModel`), **analyse**
(step windows, verdicts, rules as pure functions of the model) and
**present** (the CLI, JSON documents, the TensorBoard tab).
"""

from tb_diagnostics.errors import LogDirError, TraceLoadError

__version__ = "0.1.0"

__all__ = ["LogDirError", "TraceLoadError", "__version__"]
