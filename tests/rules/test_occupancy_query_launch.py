"""occupancy-query-launch: cudaOccupancyMaxActiveBlocksPerMultiprocessor before a launch."""

from __future__ import annotations

from tb_diagnostics.rules.occupancy_query_launch import RULE


def test_gemm_launches_are_queried_elementwise_are_not(builder):
    for s in range(2):
        t0 = s * 1000
        builder.step(s + 1, t0, 999)
        builder.op("aten::mm", t0 + 10, 60)
        builder.runtime("cudaOccupancyMaxActiveBlocksPerMultiprocessor", t0 + 15, 3)
        builder.launch("ampere_sgemm_128x64_nn", t0 + 20, t0 + 30, 300)
        builder.op("aten::add", t0 + 100, 20)
        builder.launch("elementwise_kernel", t0 + 105, t0 + 340, 10)
    (f,) = RULE.run(builder.analysis())
    assert f.message.startswith("1 launch(es) per step are preceded by an occupancy query")
    assert "aten::mm (1)" in f.message and "ampere_sgemm_128x64_nn" in f.message
    assert "other 1 launch(es)" in f.message


def test_silent_without_queries(builder):
    builder.steady_steps(2)
    assert RULE.run(builder.analysis()) == []
