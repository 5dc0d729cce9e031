"""Iterations as the script ran them (issue 23, item 3): graph launches, compiled regions,
a repeating top-level unit that must be top-level and cover the thread's activity, the
last (and first) complete iteration kept, and the reason when the span stays one window.

Each hand-made trace is one of the misses the issue lists, with the count the script
that made it implies; the shared traces check the same on real files: the step-less ones
and the eager-vs-compile pair (5 iterations each side), and every shared trace with
steps, its ``ProfilerStep#`` events removed, against its own step count.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import TraceBuilder, analyse

FETCH = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def windows(tr: TraceBuilder, tmp_path: Path):
    a = analyse(tr, tmp_path)
    return a, [(w.host_start, w.host_end) for w in a.windows]


# ---- markers ---------------------------------------------------------------------------
def test_one_graph_launch_per_iteration(trace, tmp_path):
    """20 ``g.replay()`` calls, each followed by a read of the output: 20 iterations (the
    old inference found one top-level op name and no signature: one window)."""
    for k in range(20):
        t = k * 100
        trace.launch(t, 5, "graph_kernel", t + 10, 60, runtime="cudaGraphLaunch")
        trace.op("aten::copy_", t + 20, 10)
    a, win = windows(trace, tmp_path)
    assert win == [(100.0 * k, 100.0 * (k + 1)) for k in range(19)] + [(1900.0, 1930.0)]
    assert a.host_steps.inferred_from == "the graph launches (cudaGraphLaunch)"
    assert [w.device_busy_us for w in a.windows] == [60.0] * 20


def test_a_compiled_region_per_iteration_from_its_cache_lookup(trace, tmp_path):
    """5 calls of a ``torch.compile``'d model (the shared pair's after side): each
    ``Torch-Compiled Region`` follows its ``TorchDynamo Cache Lookup``; the iteration
    starts at the lookup, and the final synchronize stays in the last one."""
    for k in range(5):
        t = k * 400
        trace.op("TorchDynamo Cache Lookup", t, 20)
        trace.op("Torch-Compiled Region: 0/0", t + 25, 300)
        for j, (name, at) in enumerate((("triton_poi_fused_add_0", 50),
                                        ("triton_red_fused_sum_1", 150))):
            trace.launch(t + at, 5, name, t + at + 10, 80 + 10 * j, runtime="cuLaunchKernel",
                         cat="kernel")
    trace.x("cuda_runtime", "cudaDeviceSynchronize", 2000, 10)
    a, win = windows(trace, tmp_path)
    assert win == [(0.0, 400.0), (400.0, 800.0), (800.0, 1200.0), (1200.0, 1600.0),
                   (1600.0, 2010.0)]
    assert a.host_steps.inferred_from == ("the compiled-region calls (Torch-Compiled Region: "
                                          "0/0), each from its TorchDynamo cache lookup")
    assert [w.kernels for w in a.windows] == [2] * 5


def test_seven_compiled_graphs_per_forward_are_one_iteration(trace, tmp_path):
    """Graph breaks: each forward runs 7 compiled graphs (the shared compiled-training
    trace's shape). The chunks between graphs inside a forward look alike, but only every
    seventh matches exactly: 3 iterations, each from the forward holding its graphs."""
    for k in range(3):
        t = k * 1000
        trace.x("user_annotation", "## forward ##", t, 800)
        for j in range(7):
            g = t + 10 + 100 * j
            trace.op("CompiledFunction", g, 60)
            trace.launch(g + 5, 5, f"graph_{j}", g + 20, 30, runtime="cudaGraphLaunch")
            trace.op("aten::view", g + 70, 5)
        trace.x("user_annotation", "## optimizer ##", t + 850, 100)
        trace.op("aten::add_", t + 860, 50)
    a, win = windows(trace, tmp_path)
    assert win == [(0.0, 1000.0), (1000.0, 2000.0), (2000.0, 2950.0)]
    assert a.host_steps.inferred_from == "the graph launches (cudaGraphLaunch), 7 per iteration"


# ---- a repeating top-level unit ------------------------------------------------------------
BLOCK = ("aten::layer_norm", "aten::linear", "aten::gelu", "aten::linear", "aten::add")


def blocks_in_a_loop(tr: TraceBuilder, iterations: int, blocks: int, loop_pause: float) -> None:
    """``for _ in range(iterations): y = model(x)``, the model ``blocks`` identical blocks
    of five ops (8 µs each, 2 µs apart), no stacks: between iterations the host spends
    ``loop_pause`` µs more (the loop, the call into the model) than between blocks."""
    t = 0.0
    for _ in range(iterations):
        for _ in range(blocks):
            for name in BLOCK:
                tr.op(name, t, 8)
                t += 10
        t += loop_pause


def test_a_loop_over_identical_blocks_is_one_iteration_per_loop(trace, tmp_path):
    """5 iterations of a 4-block model (the shared pair's before side): the block repeats
    20 times, but the host pauses 6 µs longer before every 4th: 5 iterations, not 20."""
    blocks_in_a_loop(trace, 5, 4, loop_pause=6)
    a, win = windows(trace, tmp_path)
    assert win == [(0.0, 206.0), (206.0, 412.0), (412.0, 618.0), (618.0, 824.0),
                   (824.0, 1022.0)]
    assert a.host_steps.inferred_from == (
        "a repeating sequence of top-level ops starting with aten::layer_norm (4 repeats per "
        "iteration, cut where the host pauses between them)")


def test_identical_units_without_a_loop_pause_stay_one_per_iteration(trace, tmp_path):
    """The control: 20 one-block iterations, the host pausing alike between all of them."""
    blocks_in_a_loop(trace, 20, 1, loop_pause=0)
    _, win = windows(trace, tmp_path)
    assert len(win) == 20
    assert win[:2] == [(0.0, 50.0), (50.0, 100.0)] and win[-1] == (950.0, 998.0)


def test_a_benchmark_loop_of_one_op(trace, tmp_path):
    """``for _ in range(5): torch.matmul(a, b)`` after two ``torch.randn``, then a
    synchronize: the one top-level op that repeats holds all the device time launched
    from the first call on, so it is the loop (5 iterations, not one window)."""
    for k in range(2):
        trace.op("aten::randn", 40 * k, 30)
        trace.launch(40 * k + 5, 5, "curand_kernel", 40 * k + 10, 5)
    dev = 110.0
    for k in range(5):
        t = 100 + 50 * k
        trace.op("aten::matmul", t, 40)
        trace.op("aten::mm", t + 2, 36)
        trace.launch(t + 5, 5, "sm90_gemm", dev, 200)
        dev += 200
    trace.x("cuda_runtime", "cudaDeviceSynchronize", 400, 720)
    a, win = windows(trace, tmp_path)
    assert win == [(100.0, 150.0), (150.0, 200.0), (200.0, 250.0), (250.0, 300.0),
                   (300.0, 400.0)]
    assert a.host_steps.inferred_from == ("a repeating sequence of top-level ops starting "
                                          "with aten::matmul")


@pytest.mark.parametrize(("calls", "steps"), [(3, [None]), (4, [0, 1, 2, 3])])
def test_a_few_calls_of_one_op_are_not_a_loop(trace, tmp_path, calls, steps):
    """Three ``aten::to`` calls (a forward moving its inputs) repeat too: a sequence of
    ops needs 4 top-level calls over its repeats to be a loop."""
    for k in range(calls):
        trace.op("aten::to", 100 * k, 50)
    a, _ = windows(trace, tmp_path)
    assert [w.step for w in a.windows] == steps


def test_the_layers_of_one_forward_are_one_window(trace, tmp_path):
    """One eager forward of a 32-layer decoder, its modules recorded: the layers' ops
    repeat 32 times at the top level of ops, but one ``nn.Module`` forward encloses them
    all: one window (the old inference cut 32 iterations)."""
    trace.op("aten::to", 0, 3)  # the input, moved before the forward
    trace.x("python_function", "nn.Module: Decoder_0", 4, 3296)
    trace.op("aten::embedding", 5, 15)
    for i in range(32):
        t = 30 + 100 * i
        trace.x("python_function", f"nn.Module: DecoderLayer_{i}", t, 90)
        for j, name in enumerate(("aten::layer_norm", "aten::scaled_dot_product_attention",
                                  "aten::add", "aten::gelu")):
            trace.op(name, t + 5 + 20 * j, 15)
    a, _ = windows(trace, tmp_path)
    assert [w.step for w in a.windows] == [None]
    assert (a.host_steps.notes[-1] == "no iterations inferred: no graph launch, compiled "
            "region, optimizer step or DataLoader fetch repeats on the main thread, and the "
            "sequence of top-level ops starting with aten::layer_norm repeats 32 times inside "
            "one forward (Decoder_0): layers, not iterations")


def test_the_forwards_of_a_loop_with_stacks(trace, tmp_path):
    """The same model called 5 times (4 blocks each): the model's forward is the unit."""
    for k in range(5):
        t = 1000 * k
        trace.x("python_function", "nn.Module: ToyModel_0", t, 900)
        for b in range(4):
            trace.x("python_function", f"nn.Module: Block_{b}", t + 200 * b + 10, 180)
            for j, name in enumerate(BLOCK):
                trace.op(name, t + 200 * b + 20 + 30 * j, 20)
    a, win = windows(trace, tmp_path)
    assert win == [(0.0, 1000.0), (1000.0, 2000.0), (2000.0, 3000.0), (3000.0, 4000.0),
                   (4000.0, 4900.0)]
    assert a.host_steps.inferred_from == "the repeating forward of ToyModel_0"


def test_a_chance_repeat_in_one_long_forward_is_not_a_loop(trace, tmp_path):
    """An 87 ms inference forward that starts with the same four ops twice, 1.7 ms each
    time (the old inference cut two windows of 1.7 ms there): they repeat alike, but their
    windows hold 4 % of the thread's op time: one window, and why."""
    for t0 in (0, 1700):
        for j, name in enumerate(("aten::detach", "aten::to", "aten::empty")):
            trace.op(name, t0 + 10 * j, 5)
        trace.op("aten::conv2d", t0 + 100, 1400)
    for i in range(40):
        trace.op(f"aten::op{i}", 3400 + 2100 * i, 2000)
    a, _ = windows(trace, tmp_path)
    assert [w.step for w in a.windows] == [None]
    assert a.host_steps.notes[-1] == (
        "no iterations inferred: no graph launch, compiled region, optimizer step or "
        "DataLoader fetch repeats on the main thread, and the 2 repeats of the sequence of "
        "top-level ops starting with aten::detach hold 4% of the main thread's activity "
        "from the first on (iterations need 90%)")


def test_nothing_repeating_says_why_in_the_span_notes(trace, tmp_path):
    for j, name in enumerate(("aten::randn", "aten::mm", "aten::add", "aten::sum")):
        trace.op(name, 10 * j, 8)
    a, _ = windows(trace, tmp_path)
    assert a.host_steps.notes == (
        "no iterations inferred: no graph launch, compiled region, optimizer step or "
        "DataLoader fetch repeats on the main thread, and no sequence of calls repeats "
        "alike at its top level",)


# ---- the edges: every complete iteration kept ----------------------------------------------
def test_a_slow_last_fetch_keeps_the_last_iteration(trace, tmp_path):
    """40 training iterations; the last batch waits 300 µs for its worker. Its window holds
    all its calls, past the 1.5 median iterations that used to bound it (and left only
    the fetch in it, dropped as a fragment: 39 of 40)."""
    for k in range(40):
        t = k * 100
        slow = 290 if k == 39 else 0
        trace.x("user_annotation", FETCH, t, 10 + slow)
        trace.x("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", t + 11 + slow, 2)
        trace.op("aten::conv2d", t + 15 + slow, 30)
        trace.launch(t + 20 + slow, 3, "conv_kernel", t + 25 + slow, 40)
        trace.op("aten::relu", t + 50 + slow, 10)
        trace.x("user_annotation", "Optimizer.step#SGD.step", t + 80 + slow, 15)
    a, win = windows(trace, tmp_path)
    assert len(win) == 40
    assert win[-2:] == [(3800.0, 3900.0), (3900.0, 4285.0)]
    assert [w.kernels for w in a.windows] == [1] * 40


def test_a_slow_last_labelled_iteration_is_kept(trace, tmp_path):
    """30 iterations under ``record_function("train_step")``; the last batch is smaller,
    so its first convolution autotunes again (400 µs): still 30 iterations, not 29."""
    for k in range(30):
        t = k * 100
        conv = 400 if k == 29 else 20
        trace.x("user_annotation", "train_step", t, conv + 70)
        trace.op("aten::conv2d", t + 5, conv)
        trace.launch(t + 10, 5, "conv_kernel", t + 20, 10)
        for j, name in enumerate(("aten::relu", "aten::add", "aten::mul", "aten::mse_loss",
                                  "aten::sum")):
            trace.op(name, t + conv + 10 + 10 * j, 5)
    a, win = windows(trace, tmp_path)
    assert len(win) == 30
    assert win[-1] == (2900.0, 3370.0)
    assert a.host_steps.inferred_from == "the repeating record_function label 'train_step'"


def test_a_cold_first_iteration_ending_at_its_optimizer_step_is_kept(trace, tmp_path):
    """30 iterations marked only by their optimizer steps; the first one runs 4 times
    slower (cuDNN autotuning every layer). Its window reaches back over all its calls,
    not just the 1.5 median iterations before its step (then a fragment: 29 of 30)."""
    t = 0.0
    for k in range(30):
        pitch = 60 if k == 0 else 15
        for name in ("aten::conv2d", "aten::bn", "aten::relu", "aten::conv2d", "aten::add",
                     "aten::linear"):
            trace.op(name, t, 10)
            t += pitch
        trace.x("user_annotation", "Optimizer.step#SGD.step", t, 10)
        t += 20
    _, win = windows(trace, tmp_path)
    assert len(win) == 30
    assert win[:2] == [(0.0, 380.0), (380.0, 490.0)]


# ---- real traces ---------------------------------------------------------------------------
PAIR = "h100_toyblocks_eager_vs_compile"


@pytest.fixture
def shared_pairs() -> Path:
    from conftest import SHARED

    if not (SHARED / "pairs" / PAIR).is_dir():
        pytest.skip("../shared/pairs is not present")
    return SHARED / "pairs" / PAIR


@pytest.mark.shared
@pytest.mark.parametrize(("side", "source"), [
    ("before", "a repeating sequence of top-level ops starting with aten::layer_norm (4 "
               "repeats per iteration, cut where the host pauses between them)"),
    ("after", "the compiled-region calls (Torch-Compiled Region: 0/0), each from its "
              "TorchDynamo cache lookup"),
])
def test_the_shared_pair_has_five_iterations_each_side(shared_pairs, side, source):
    """The pair's script profiles 5 iterations ``y = fn(x)`` of a 4-block model (README).
    Eager: 20 blocks of 9 top-level ops, the host pausing longer before every 4th (the
    loop); compiled: 5 compiled-region calls. Each window holds one iteration's 40 (eager)
    or 25 (compiled) kernels."""
    from tb_diagnostics.analysis import SpanAnalysis
    from tb_diagnostics.trace import load_trace

    (path,) = (shared_pairs / side).iterdir()
    a = SpanAnalysis(load_trace(str(path)))
    assert [w.step for w in a.windows] == [0, 1, 2, 3, 4]
    assert a.host_steps.inferred_from == source
    assert [w.kernels for w in a.windows] == [40 if side == "before" else 25] * 5


#: Shared traces with steps, and how many iterations their steps hold: each step is one
#: iteration of the loop (0: one iteration, so no inference), except
#: - the ROCm excerpt's second step, 49 µs long (the profiler's last step just opened),
#:   with one optimizer step in the whole trace: one iteration;
#: - the OWLv2 inference's one step, which holds 5 full DataLoader fetches (122 ms each,
#:   a forward after each) and the 0.1 ms fetch that ended the loop: 5 batches.
STEP_COUNTS = {
    "hta_a100_torch_compile_triton_tiny": 0, "hta_cpu_only_gloo_rank34": 0,
    "tracelens_h100_bert_small_inference": 0, "tracelens_h100_owlv2_large_inference": 5,
    "tracelens_h100_qwen1.5_0.5b_inference": 0, "tracelens_h100_timesformer_inference": 0,
    "hta_2022_a100_rank3_of8": 6, "hta_2022_v100_rank1_of2": 6,
    "hta_a100_compiled_train_rank0_of16": 5, "hta_a100_nccl_train_rank0_of2": 3,
    "hta_amd_mi250_rocm_tiny": 0, "hta_sampled_2ranks_of128": 2,
    "hta_v100_profile_memory_rank1_of2": 5, "hta_v100_resnet_ns_timeunit": 5,
    "kineto_2021jan_resnet50_profiler_api": 6, "kineto_resnet50_v100_dataloader_workers0": 6,
    "kineto_resnet50_v100_dataloader_workers4": 6,
}


@pytest.mark.shared
@pytest.mark.parametrize("run", sorted(STEP_COUNTS))
def test_shared_traces_without_their_steps_get_one_iteration_per_step(shared_traces, run):
    """Every shared trace with steps, its ``ProfilerStep#`` events removed: the inference
    finds as many iterations as the profiler recorded steps, whatever marks them (graph
    launches, compiled functions, optimizer steps, fetches), and none in one-step
    inference traces (one forward, its layers alike, is one window)."""
    from tb_diagnostics.analysis.iterations import infer_iterations
    from tb_diagnostics.trace.load import load_trace_bytes

    for path in sorted((shared_traces / run).iterdir()):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        doc["traceEvents"] = [e for e in doc["traceEvents"]
                              if not str(e.get("name", "")).startswith("ProfilerStep#")]
        it = infer_iterations(load_trace_bytes(json.dumps(doc).encode(), path.name))
        assert (0 if it is None else len(it)) == STEP_COUNTS[run], path.name


@pytest.mark.shared
def test_the_shared_excerpt_says_why_it_is_one_window(shared_traces):
    """The 54-event inference excerpt holds 8 runtime calls and 4 kernels, no op or label:
    nothing to cut at, and the span's note says so."""
    from tb_diagnostics.analysis.steps import find_host_steps
    from tb_diagnostics.trace import load_trace

    (path,) = (shared_traces / "hta_2022_legacy_categories_tiny").iterdir()
    hs = find_host_steps(load_trace(str(path)))
    assert len(hs) == 0
    assert hs.notes == ("no iterations inferred: the trace has no top-level op or label calls",)


def test_a_span_without_steps_or_iterations_says_why_in_one_note(tmp_path, trace):
    """One note, not two: no steps, why none were inferred, and that it is one window."""
    from tb_diagnostics.engine import span_summary
    from tb_diagnostics.logdir import scan_logdir

    trace.op("aten::mm", 10, 100)
    trace.write(tmp_path / "log" / "run" / "w.1.pt.trace.json")
    (f,) = scan_logdir(str(tmp_path / "log")).files
    notes = [n for n in span_summary(f)["notes"] if "window" in n or "inferred" in n]
    assert len(notes) == 1, notes
    assert notes[0].startswith("no ProfilerStep# events and no iterations inferred: ")
    assert notes[0].endswith("; the span is analysed as one window")
