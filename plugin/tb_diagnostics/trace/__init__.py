"""Trace engine: decode Kineto JSON and build the columnar :class:`TraceModel`."""

from tb_diagnostics.trace.load import load_trace, load_trace_bytes
from tb_diagnostics.trace.model import Lane, MemoryEvents, TraceMeta, TraceModel

__all__ = ["Lane", "MemoryEvents", "TraceMeta", "TraceModel", "load_trace", "load_trace_bytes"]
