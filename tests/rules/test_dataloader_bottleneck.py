"""dataloader-bottleneck: the device waiting for input (tb-profiler > 5 %, xprof ≥ 20 % high)."""

from __future__ import annotations

import pytest

from tb_diagnostics.rules.dataloader_bottleneck import RULE

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _steps(b, load_us: float) -> None:
    for s in range(3):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.annotation(LOADER, t0 + 1, load_us)
        b.op("aten::mm", t0 + load_us + 5, 10)
        b.launch("gemm_kernel", t0 + load_us + 6, t0 + load_us + 15, 980 - load_us - 15)


def test_fires_critical_above_20_percent(builder):
    _steps(builder, 300)
    (f,) = RULE.run(builder.analysis())
    assert f.severity == "critical" and f.steps == [1, 2, 3]
    assert f.savings_us == pytest.approx(300.0)
    assert "num_workers=0" in f.message and f.evidence[0].name == LOADER


def test_silent_below_5_percent(builder):
    _steps(builder, 20)
    assert RULE.run(builder.analysis()) == []


def test_resnet_workers0_fires_workers4_does_not(shared):
    for index in (0, 1):
        (f,) = RULE.run(shared("kineto_resnet50_v100_dataloader_workers0", index))
        # The second span's first step saves nothing: its batch copy waited for device work
        # from before the window (the replay keeps it), so 27.5 ms per step there.
        assert f.severity == "critical" and f.savings_us > 25_000
        assert RULE.run(shared("kineto_resnet50_v100_dataloader_workers4", index)) == []
