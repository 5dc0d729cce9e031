"""host-sync: syncs inside steps, tied to the op and the Python line; savings replayed."""

from __future__ import annotations

import pytest

from tb_diagnostics.rules.host_sync import RULE


def _item_step(b, n: int = 1, t0: float = 0.0, sync: bool = True, **op_kw) -> None:
    """A step whose kernel runs [t0+30, t0+430); ``.item()`` waits for it, the next launch
    comes at t0+600."""
    b.step(n, t0, 1000)
    b.op("aten::mm", t0 + 10, 20)
    b.launch("gemm_kernel", t0 + 15, t0 + 30, 400)
    if sync:
        b.op("aten::item", t0 + 40, 420, **op_kw)
        b.op("aten::_local_scalar_dense", t0 + 42, 416)
        b.runtime("cudaStreamSynchronize", t0 + 45, 410)
    b.op("aten::add", t0 + 600, 10)
    b.launch("add_kernel", t0 + 602, t0 + 620, 50)


def test_fires_on_item_with_the_device_idle_it_causes(builder):
    _item_step(builder)
    (f,) = RULE.run(builder.analysis())
    assert f.rule == "host-sync" and f.steps == [1]
    assert "aten::item → aten::_local_scalar_dense → cudaStreamSynchronize" in f.message
    # The device idles 190 µs (430 → 620) after the wait, and the message says so; the
    # saving is replayed: without the wait the host reaches everything after it 385 µs
    # sooner (it waited from 45 until the kernel ended at 430; the call's 30 µs tail stays).
    assert "the device sat idle 190 µs" in f.message
    assert f.savings_us == pytest.approx(385.0)
    names = [e.name for e in f.evidence]
    assert "cudaStreamSynchronize" in names and "add_kernel" in names


def test_silent_without_sync_and_on_the_profiler_flush(builder):
    _item_step(builder, sync=False)
    # The profiler's flush after the last step is not the user's sync.
    builder.runtime("cudaDeviceSynchronize", 1005, 2000)
    assert RULE.run(builder.analysis()) == []


def test_sync_on_an_idle_device_costs_only_its_own_time(builder):
    builder.step(1, 0, 1000)
    builder.op("aten::item", 40, 20)
    builder.runtime("cudaStreamSynchronize", 42, 15)
    builder.op("aten::add", 600, 10)
    builder.launch("add_kernel", 602, 620, 50)
    # 15 µs of device idle is below the 50 µs threshold: nothing reported.
    assert RULE.run(builder.analysis()) == []


def test_names_the_python_line_from_frames_on_another_lane(builder):
    _item_step(builder)
    # python_function frames of the same process on a lane of their own.
    top = builder.python("train.py(12): train_step", 35, 500, tid=555)
    builder.python("torch/_tensor.py(1): item", 39, 430, parent=top, tid=555)
    (f,) = RULE.run(builder.analysis())
    assert "called from train.py(12): train_step" in f.message
    assert any(e.name == "train.py(12): train_step" for e in f.evidence)


def test_names_the_python_line_from_a_2021_call_stack(builder):
    _item_step(builder, stack="torch/_tensor.py(100): item;train.py(7): <module>")
    (f,) = RULE.run(builder.analysis())
    assert "called from train.py(7): <module>" in f.message


def test_qwen_synchronize_at_the_start_of_step_6(shared):
    a = shared("tracelens_h100_qwen1.5_0.5b_inference")
    findings = RULE.run(a)
    (f,) = [f for f in findings if "cudaDeviceSynchronize" in f.message]
    assert f.steps == [6]
    assert "torch.cuda.synchronize()" in f.message and "14.10 ms" in f.message
    assert "at the start of step 6" in f.message
    assert "moca/library/profiling/profile.py(34): run_torch_profiler" in f.message
    # Replayed: the step's kernels start 0.47 ms sooner (the 1.01 ms of device idle after
    # the sync, less the launches the host still has to make).
    assert f.savings_us is not None and 400 < f.savings_us < 1100
    sync = next(e for e in f.evidence if e.name == "cudaDeviceSynchronize")
    assert sync.dur == pytest.approx(14102.53, abs=0.01)


def test_each_site_names_its_subject(builder):
    # Two syncs from two lines of one script: two findings that a collapsed row tells apart.
    _item_step(builder)
    top = builder.python("train.py(12): train_step", 35, 500, tid=555)
    builder.python("torch/_tensor.py(1): item", 39, 430, parent=top, tid=555)
    _item_step(builder, n=2, t0=1000, stack="torch/_tensor.py(100): item;eval.py(7): <module>")
    subjects = sorted(f.subject for f in RULE.run(builder.analysis()))
    assert subjects == ["aten::item → cudaStreamSynchronize in <module> (eval.py:7)",
                        "aten::item → cudaStreamSynchronize in train_step (train.py:12)"]
