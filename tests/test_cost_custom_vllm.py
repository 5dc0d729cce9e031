"""vLLM's memory-side custom kernels (analysis.cost.serving_ops) against hand counts:
``_C::rms_norm``, ``_C::fused_add_rms_norm``, ``_C::rotary_embedding`` and the gated
activations, with the schemas of vllm-project/vllm csrc/torch_bindings.cpp."""

from __future__ import annotations

import json

from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.cost.formula import OpCost
from tb_diagnostics.analysis.cost.model import family_of, op_cost
from tb_diagnostics.analysis.cost.shapes import OpArgs
from tb_diagnostics.report.roofline import roofline_section
from tb_diagnostics.trace.categories import keeps_concrete_inputs

BF16, F32, I64 = "c10::BFloat16", "float", "long int"


def priced(name: str, dims: list, types: list, concrete: list | None = None) -> OpCost:
    c = op_cost(name, OpArgs.parse(json.dumps(dims), json.dumps(types),
                                   json.dumps(concrete or [""] * len(dims))))
    assert isinstance(c, OpCost) and not c.lower_bound, c
    return c


def test_rms_norm():
    # result (16, 4096) = rms_norm(input (16, 4096), weight (4096)): 4 FLOPs per element;
    # input read, weight read, result written, bf16.
    c = priced("_C::rms_norm", [[16, 4096], [16, 4096], [4096], []],
               [BF16, BF16, BF16, "Scalar"], ["", "", "", "1e-06"])
    assert c.flops == 4 * 16 * 4096
    assert c.bytes == (16 * 4096 + 4096 + 16 * 4096) * 2
    assert c.family == "norm" and c.precision == "bf16" and not c.tensor_op


def test_fused_add_rms_norm():
    # residual += input; input = norm(residual) · weight: both read and written back.
    c = priced("_C::fused_add_rms_norm", [[8, 4096], [8, 4096], [4096], []],
               [BF16, BF16, BF16, "Scalar"])
    assert c.flops == 5 * 8 * 4096
    assert c.bytes == (4 * 8 * 4096 + 4096) * 2


def test_rotary_embedding_rotates_rot_dim_of_each_head():
    # 8 tokens, q (8, 32·128), k (8, 8·128), head_size 128, cos_sin_cache (32768, 64):
    # the first 64 values of each of the 40 heads rotate, 3 FLOPs per value (4 mul + 2 add
    # per pair); each rotated value read and written, positions read, 8 cache rows read.
    dims = [[8], [8, 32 * 128], [8, 8 * 128], [], [32768, 64], []]
    types = [I64, BF16, BF16, "Scalar", F32, "Scalar"]
    c = priced("_C::rotary_embedding", dims, types, ["", "", "", "128", "", "True"])
    rotated = 8 * 40 * 64
    assert c.flops == 3 * rotated
    assert c.bytes == 8 * 8 + 2 * rotated * 2 + 8 * 64 * 4
    # The whole cache (32768 · 64 · 4 bytes = 8 MB) is not counted: only the rows gathered.
    assert c.bytes < 32768 * 64 * 4 / 10
    assert keeps_concrete_inputs("_C::rotary_embedding")
    r = op_cost("_C::rotary_embedding", OpArgs.parse(json.dumps(dims), json.dumps(types)))
    assert isinstance(r, str) and "head_size" in r


def test_silu_and_mul():
    # out (16, 11008) = silu(x[:, :11008]) · x[:, 11008:], x (16, 22016): 2 per output value.
    c = priced("_C::silu_and_mul", [[16, 11008], [16, 22016]], [BF16, BF16])
    assert c.flops == 2 * 16 * 11008
    assert c.bytes == (16 * 22016 + 16 * 11008) * 2
    assert family_of("_C::gelu_tanh_and_mul") == "elementwise"


def test_cache_writes_count_the_new_tokens_not_the_cache():
    # 8 tokens of key and value (8, 8, 128) bf16 into an fp8 cache of 4096 blocks of 16:
    # read k, v and the slot mapping; write 2·8·8·128 values of 1 byte.
    dims = [[8, 8, 128], [8, 8, 128], [4096, 16, 8, 128], [4096, 16, 8, 128], [8], [], [], []]
    types = [BF16, BF16, "c10::Float8_e4m3fn", "c10::Float8_e4m3fn", I64, "", F32, F32]
    c = priced("_C_cache_ops::reshape_and_cache_flash", dims, types)
    assert c.flops == 0 and c.family == "memory"
    assert c.bytes == 2 * 8 * 8 * 128 * 2 + 8 * 8 + 2 * 8 * 8 * 128 * 1
    # MLA: kv_c (8, 512) and k_pe (8, 64) into one cache, bf16.
    mla = priced("_C_cache_ops::concat_and_cache_mla",
                 [[8, 512], [8, 64], [1024, 64, 576], [8], [], []],
                 [BF16, BF16, BF16, I64, "", F32])
    assert mla.bytes == 8 * 576 * 2 + 8 * 8 + 8 * 576 * 2


def test_vllm_kernels_are_modelled_memory_bound_ops_in_the_roofline(tmp_path):
    b = TraceBuilder(tmp_path)
    b.step(1, 0, 1000)
    b.op("_C::fused_add_rms_norm", 10, 30, dims=[[8, 4096], [8, 4096], [4096], []],
         types=[BF16, BF16, BF16, "Scalar"])
    b.launch("fused_add_rms_norm_kernel", 12, 50, 4)
    (op,) = roofline_section(b.analysis())["ops"]
    assert op["name"] == "_C::fused_add_rms_norm" and op["bound"] == "memory"
    assert op["bytes"] == (4 * 8 * 4096 + 4096) * 2 and op["peak_precision"] == "fp32"
