"""memory-growth: allocated memory rising step over step (profile_memory=True)."""

from __future__ import annotations

from tb_diagnostics.rules.memory_growth import RULE

MB = 2**20


def _steps(b, leak: float) -> None:
    base = 1000 * MB
    for s in range(4):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch("gemm_kernel", t0 + 12, t0 + 20, 400)
        # A temporary freed in the step, and what is kept (the leak).
        b.memory(t0 + 11, 64 * MB, base + 64 * MB, 2000 * MB)
        b.memory(t0 + 500, -64 * MB, base, 2000 * MB)
        if leak:
            base += leak
            b.memory(t0 + 600, leak, base, 2000 * MB)


def test_fires_on_a_leak(builder):
    _steps(builder, 16 * MB)
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "warning" and f.steps == [1, 2, 3, 4]
    assert f.message.startswith("CUDA 0: allocated memory grows 16.78 MB per step")


def test_flat_curve_reports_its_figures_as_info(builder):
    _steps(builder, 0)
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "info" and "does not grow" in f.message
    assert "peak allocated 1.12 GB" in f.message


def test_silent_without_memory_events(builder):
    builder.steady_steps(4)
    assert RULE.run(builder.analysis()) == []


def test_profile_memory_trace_is_evaluated(shared):
    findings = RULE.run(shared("hta_v100_profile_memory_rank1_of2"))
    (f,) = findings
    assert f.severity == "info" and f.steps == [2, 3, 4, 5, 6]
    assert "CUDA 1" in f.message and "peak reserved 12.78 GB (37% of 34.09 GB)" in f.message


GB = 10**9


def _alloc(b, ts: float, nbytes: float, total: float, addr: int) -> None:
    """A [memory] event with its block address (the builder's helper has none)."""
    b.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                     "pid": 100, "tid": 100, "ts": ts,
                     "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes,
                              "Total Allocated": total, "Total Reserved": 30 * GB}})


def _moe_forward(b, keep: bool) -> None:
    """One forward without step markers: 2.3 GB allocated at its start, experts' buffers
    of 2.6 GB each made by ``aten::index_select`` inside ``moe::experts`` (record_function
    labels): kept (23.1 GB at the end, with 0.1 GB more from ``aten::add``) or freed."""
    b.annotation("model.forward", 0, 10_000)
    _alloc(b, 5, 1e8, 2.3 * GB, 1 << 40)  # a small temporary, freed at once
    _alloc(b, 6, -1e8, 2.2 * GB, 1 << 40)
    total = 2.2 * GB
    b.annotation("moe::experts", 100, 8000)
    for i in range(8):
        b.op("aten::index_select", 200 + 900 * i, 50)
        total += 2.6 * GB
        _alloc(b, 210 + 900 * i, 2.6 * GB, total, (1 << 41) + i * (1 << 33))
    b.op("aten::add", 9000, 500)
    if keep:
        _alloc(b, 9100, 0.1 * GB, total + 0.1 * GB, 1 << 42)
        return
    for i in range(8):
        total -= 2.6 * GB
        _alloc(b, 9100 + i, -2.6 * GB, total, (1 << 41) + i * (1 << 33))


def test_growth_inside_one_window_counts(builder):
    _moe_forward(builder, keep=True)
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "warning" and f.steps == [None]
    assert f.title == "Memory grows inside a window"
    assert f.message.startswith("CUDA 0: allocated memory grows 20.90 GB inside the span, "
                                "from 2.20 GB to 23.10 GB at its end (peak 23.10 GB inside it)")
    # What is still allocated at the end, by the op that made it (not the labels around).
    assert ("still allocated at its end: 20.80 GB made by aten::index_select (8 allocations), "
            "100.00 MB made by aten::add (1 allocation);") in f.message


def test_a_window_that_gives_back_what_it_took_is_not_growth(builder):
    _moe_forward(builder, keep=False)
    assert RULE.run(builder.analysis()) == []
