"""A window column whose every value has the same bits is that value broadcast
(``trace.columns.one_value``): 8 bytes, not an array per window, for the figures no step
has (the comm, input or compile idle of a run without them). It reads as the array did,
refuses writes (nothing writes a built column), and tells 0.0 from -0.0 and NaN apart.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.trace.columns import one_value
from tb_diagnostics.trace.load import load_trace_bytes


@pytest.mark.parametrize("values", [np.zeros(1000), np.full(1000, np.nan),
                                    np.full(1000, 7, dtype=np.int64), np.full(1000, -0.0)])
def test_a_column_of_one_value_is_that_value_broadcast(values):
    col = one_value(values)
    assert col.strides == (0,) and not col.flags.writeable
    assert col.shape == values.shape and col.dtype == values.dtype
    assert col.tobytes() == values.tobytes()  # the same bits, element by element
    assert col.base.size == 1  # the one element, not the caller's array


@pytest.mark.parametrize("values", [np.array([0.0, -0.0]), np.array([np.nan, 1.0]),
                                    np.arange(5), np.zeros(1), np.zeros(0),
                                    np.array(["a", "a"], dtype=object)])
def test_other_columns_are_themselves(values):
    assert one_value(values) is values


def _trace(steps: int) -> bytes:
    events, t = [], 0.0
    for k in range(steps):
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1,
             "tid": 1, "ts": t, "dur": 10.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
             "ts": t + 1, "dur": 5.0 + k},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
             "tid": 1, "ts": t + 2, "dur": 2.0, "args": {"correlation": k + 1}},
            {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7,
             "ts": t + 5, "dur": 3.0, "args": {"correlation": k + 1, "stream": 7,
                                                "device": 0}},
        ]
        t += 10.0
    return json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0}]}).encode()


def test_a_spans_constant_figures_are_broadcast_and_its_varying_ones_are_not():
    a = SpanAnalysis(load_trace_bytes(_trace(50), "t.pt.trace.json"))
    c = a.windows.columns
    assert len(c) == 50
    assert c.idle["comm"].strides == (0,) and c.idle["input"].strides == (0,)
    assert c.exposed_collective_us.strides == (0,)
    assert c.self_cpu_us.strides != (0,)  # aten::add takes longer every step
    assert c.start.strides != (0,)
