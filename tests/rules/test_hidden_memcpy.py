"""hidden-memcpy: copies made inside non-copy ops (the addmm bias seed), not .to()."""

from __future__ import annotations

from tb_diagnostics.rules.hidden_memcpy import RULE


def test_addmm_bias_copy(builder):
    for s in range(2):
        t0 = s * 1000
        builder.step(s + 1, t0, 999)
        builder.op("aten::addmm", t0 + 10, 100)
        builder.op("aten::copy_", t0 + 12, 20)
        builder.launch("Memcpy DtoD (Device -> Device)", t0 + 15, t0 + 25, 33,
                       api="cudaMemcpyAsync", cat="gpu_memcpy", bytes=33554432)
        builder.launch("gemm_kernel", t0 + 40, t0 + 60, 500)
    (f,) = RULE.run(builder.analysis())
    assert f.message.startswith("aten::addmm makes DtoD copies you did not write")
    assert "33.55 MB" in f.message and "33 µs of device time per step" in f.message
    # Replayed: the GEMM could start 18 µs sooner without the copy, but the host's step
    # ends at 999 µs anyway: the step is no shorter.
    assert f.savings_us == 0.0
    assert any(e.name == "aten::addmm" and e.note == "the op that made the copy"
               for e in f.evidence)


def test_silent_on_explicit_to(builder):
    for s in range(2):
        t0 = s * 1000
        builder.step(s + 1, t0, 999)
        builder.op("aten::to", t0 + 10, 100)
        builder.op("aten::_to_copy", t0 + 11, 98)
        builder.op("aten::copy_", t0 + 12, 90)
        builder.launch("Memcpy HtoD (Pinned -> Device)", t0 + 15, t0 + 25, 330,
                       api="cudaMemcpyAsync", cat="gpu_memcpy", bytes=33554432)
    assert RULE.run(builder.analysis()) == []
