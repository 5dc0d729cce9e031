"""pageable-memcpy: host→device copies from pageable memory."""

from __future__ import annotations

from tb_diagnostics.rules.pageable_memcpy import RULE


def _copy(b, kind: str) -> None:
    for s in range(2):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::to", t0 + 10, 220)
        b.op("aten::copy_", t0 + 12, 215)
        b.launch(f"Memcpy HtoD ({kind} -> Device)", t0 + 15, t0 + 30, 190, api="cudaMemcpyAsync",
                 api_dur=210 if kind == "Pageable" else 5, cat="gpu_memcpy", bytes=19_267_584)


def test_fires_on_pageable(builder):
    _copy(builder, "Pageable")
    (f,) = RULE.run(builder.analysis())
    assert "1 host→device copies per step from pageable memory (19.27 MB" in f.message
    assert "blocks the host 210 µs per step (aten::to)" in f.message
    # Replayed with pinned memory: the 210 µs call returns after 5 µs, and the rest of the
    # host's step moves 205 µs earlier.
    assert f.savings_us is not None and abs(f.savings_us - 205.0) < 1.0


def test_silent_on_pinned(builder):
    _copy(builder, "Pinned")
    assert RULE.run(builder.analysis()) == []


def test_resnet_input_copy(shared):
    (f,) = RULE.run(shared("kineto_resnet50_v100_dataloader_workers0", 1))
    assert "called from resnet50_profiler_api.py(44): <module>" in f.message


def test_says_what_the_host_link_allows(make_builder):
    # The T4 case: 4 MB per step in 710 µs ≈ 5.6 GB/s over PCIe 3.0 x16 (15.75).
    b = make_builder(device_properties=[{"id": 0, "name": "Tesla T4", "computeMajor": 7,
                                         "computeMinor": 5, "numSms": 40}])
    for s in range(2):
        t0 = s * 2000
        b.step(s + 1, t0, 1999)
        b.op("aten::copy_", t0 + 12, 780)
        b.launch("Memcpy HtoD (Pageable -> Device)", t0 + 15, t0 + 30, 710,
                 api="cudaMemcpyAsync", api_dur=760, cat="gpu_memcpy", bytes=4_000_000)
    (f,) = RULE.run(b.analysis())
    assert ("The host link (PCIe 3.0 x16) allows 15.75 GB/s per direction; these copies "
            "reach 5.6 GB/s (36% of it).") in f.message
