"""record-shapes-off: op calls without Input Dims mean no FLOPs and no roofline."""

from __future__ import annotations

from tb_diagnostics.rules.record_shapes_off import RULE


def _ops(b, n: int, shapes: bool) -> None:
    b.step(1, 0, 10_000)
    for i in range(n):
        kw = {"dims": [[8, 8], [8, 8]], "types": ["float", "float"]} if shapes else {}
        b.op("aten::mm", 10 + i * 100, 50, **kw)
        b.launch("gemm", 12 + i * 100, 30 + i * 100, 40)


def test_fires_without_shapes(builder):
    _ops(builder, 25, shapes=False)
    (f,) = RULE.run(builder.analysis())
    assert "None of the span's 25 op calls recorded its input shapes" in f.message
    assert "record_shapes=True" in f.message
    assert f.severity == "info" and f.savings_us is None and f.evidence


def test_silent_with_shapes_and_on_tiny_spans(builder, make_builder):
    _ops(builder, 25, shapes=True)
    assert RULE.run(builder.analysis()) == []
    b = make_builder()
    _ops(b, 5, shapes=False)
    assert RULE.run(b.analysis()) == []


def test_fires_on_a_shared_trace_without_shapes(shared):
    (f,) = RULE.run(shared("hta_v100_resnet_ns_timeunit"))
    assert "record_shapes was off" in f.message
