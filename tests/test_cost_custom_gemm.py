"""Cost formulas of the scaled and custom GEMMs (analysis.cost.custom_gemm) against hand
counts: ``aten::_scaled_mm`` with MXFP8 and NVFP4/MXFP4 block scales, and
TransformerEngine's ``tex_ts::te_gemm_ts`` in its three layouts and FP8."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rules.conftest import TraceBuilder

from tb_diagnostics.analysis.cost.custom_gemm import GEMM_OPS
from tb_diagnostics.analysis.cost.formula import OpCost
from tb_diagnostics.analysis.cost.model import op_cost
from tb_diagnostics.analysis.cost.shapes import OpArgs
from tb_diagnostics.report.roofline import roofline_section
from tb_diagnostics.trace.categories import keeps_concrete_inputs

FP8, FP4, E8M0, BF16, U8, F32 = ("c10::Float8_e4m3fn", "c10::Float4_e2m1fn_x2",
                                 "c10::Float8_e8m0fnu", "c10::BFloat16", "unsigned char",
                                 "float")
B200 = {"id": 0, "name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0,
        "numSms": 148, "totalGlobalMem": 191_000_000_000}


def priced(name: str, dims: list, types: list, concrete: list) -> OpCost:
    c = op_cost(name, OpArgs.parse(json.dumps(dims), json.dumps(types), json.dumps(concrete)))
    assert isinstance(c, OpCost), c
    return c


def scaled_mm(a, b, sa, sb, t_data, t_scale, out_code="15"):
    return ([a, b, sa, sb, [], [], [], []],
            [t_data, t_data, t_scale, t_scale, "", "", "Scalar", "Scalar"],
            ["", "", "", "", "", "", out_code, "False"])


# ---- _scaled_mm -----------------------------------------------------------------------------
def test_mxfp8_block_scales():
    # M=256, K=512, N=128 in e4m3; e8m0 scales per 32 values, padded and swizzled:
    # round_up(256, 128)·round_up(512/32, 4) = 4096 and 128·16 = 2048 bytes; bf16 out.
    c = priced("aten::_scaled_mm", *scaled_mm([256, 512], [512, 128], [4096], [2048], FP8, E8M0))
    assert c.flops == 2 * 256 * 128 * 512
    assert c.bytes == 256 * 512 + 512 * 128 + 256 * 128 * 2 + 4096 + 2048
    assert c.precision == "fp8" and c.tensor_op


def test_nvfp4_packs_two_values_per_byte():
    # Float4_e2m1fn_x2 stores K/2 bytes per row: (256, 256) and (256, 128) are K = 512.
    # e4m3 scales per 16 values: 256·32 = 8192 and 128·32 = 4096 bytes.
    c = priced("aten::_scaled_mm", *scaled_mm([256, 256], [256, 128], [8192], [4096], FP4, FP8))
    assert c.flops == 2 * 256 * 128 * 512
    assert c.bytes == 256 * 256 + 256 * 128 + 256 * 128 * 2 + 8192 + 4096
    assert c.precision == "fp4"


def test_per_tensor_scales_are_left_out_of_the_bytes():
    c = priced("aten::_scaled_mm", *scaled_mm([64, 64], [64, 64], [], [], FP8, F32))
    assert c.bytes == 64 * 64 * 2 + 64 * 64 * 2


def _fp4_gemm_trace(tmp_path, device):
    b = TraceBuilder(tmp_path, device_properties=[device])
    b.step(1, 0, 1000)
    dims, types, conc = scaled_mm([8192, 4096], [4096, 8192], [8192 * 256], [8192 * 256],
                                  FP4, FP8)
    b.op("aten::_scaled_mm", 10, 30, dims=dims, types=types, args={"Concrete Inputs": conc})
    b.launch("nvjet_sm100_fp4_gemm", 12, 50, 200)
    return roofline_section(b.analysis())


def test_fp4_is_rated_against_the_fp4_peak_where_the_part_has_one(tmp_path):
    (op,) = _fp4_gemm_trace(tmp_path, B200)["ops"]
    assert op["precision"] == "fp4" and op["peak_precision"] == "fp4"
    flops = 2.0 * 8192 * 8192 * 8192
    assert op["flops"] == flops
    # 1.1 PFLOP in 200 µs: 5.5 PFLOP/s, compute-bound against the B200's 9 PFLOP/s.
    assert op["achieved_tflops"] == pytest.approx(flops / 200e-6 / 1e12, rel=1e-3)
    assert op["bound"] == "compute"


def test_fp4_without_fp4_math_is_rated_at_bf16(tmp_path):
    # An H100 has no FP4 tensor cores: FP4 kernels dequantise to 16 bits.
    (op,) = _fp4_gemm_trace(tmp_path, {"id": 0, "name": "NVIDIA H100 80GB HBM3"})["ops"]
    assert op["precision"] == "fp4" and op["peak_precision"] == "bf16"


# ---- TransformerEngine ----------------------------------------------------------------------
def te_gemm(a, transa, b, transb, d, a_type, b_type, d_type, *, types=(BF16, BF16, BF16),
            bias=None, grad=False, accumulate=False):
    dims = [[] for _ in range(22)]
    tys = [""] * 22
    conc = [""] * 22
    dims[0], tys[0] = a, types[0]
    dims[5], tys[5] = b, types[1]
    dims[10], tys[10] = d, types[2]
    for i in (1, 6, 11, 13, 16):  # empty scale/amax/pre-GELU tensors
        dims[i], tys[i] = [0], F32
    dims[14], tys[14] = (bias, BF16) if bias else ([0], BF16)
    dims[18], tys[18] = [33554432], U8
    for i, v in ((2, "-1"), (3, str(a_type)), (4, str(int(transa))), (7, "-1"),
                 (8, str(b_type)), (9, str(int(transb))), (12, str(d_type)), (15, "5"),
                 (17, str(int(grad))), (19, "33554432"), (20, str(int(accumulate))),
                 (21, "0")):
        tys[i], conc[i] = "Scalar", v
    return priced("tex_ts::te_gemm_ts", dims, tys, conc)


def test_te_forward_tn():
    # Y (2048, 3072) = X (2048, 1024) · Wᵀ, W (3072, 1024): layout TN, bf16 (TE DType 5).
    c = te_gemm([3072, 1024], True, [2048, 1024], False, [2048, 3072], 5, 5, 5)
    assert c.flops == 2 * 2048 * 3072 * 1024
    assert c.bytes == (3072 * 1024 + 2048 * 1024 + 2048 * 3072) * 2
    assert c.precision == "bf16" and c.family == "matmul"
    biased = te_gemm([3072, 1024], True, [2048, 1024], False, [2048, 3072], 5, 5, 5,
                     bias=[3072])
    assert biased.flops == c.flops + 2048 * 3072
    assert biased.bytes == c.bytes + 3072 * 2


def test_te_dgrad_nn_and_wgrad_nt():
    # dX (2048, 1024) = dY (2048, 3072) · W (3072, 1024): NN.
    dgrad = te_gemm([3072, 1024], False, [2048, 3072], False, [2048, 1024], 5, 5, 5)
    assert dgrad.flops == 2 * 2048 * 1024 * 3072
    # dW (3072, 1024) = dYᵀ (3072, 2048) · X (2048, 1024): NT, accumulating into dW.
    wgrad = te_gemm([2048, 1024], False, [2048, 3072], True, [3072, 1024], 5, 5, 5,
                    accumulate=True)
    assert wgrad.flops == 2 * 3072 * 1024 * 2048
    assert wgrad.bytes == (2048 * 1024 + 2048 * 3072 + 2 * 3072 * 1024) * 2


def test_te_fp8_operands_are_uint8_with_an_fp8_type_code():
    # TE keeps FP8 in uint8 tensors; A_type/B_type 6 (E4M3) say FP8, D_type 5 bf16.
    c = te_gemm([3072, 1024], True, [2048, 1024], False, [2048, 3072], 6, 6, 5,
                types=(U8, U8, BF16))
    assert c.precision == "fp8"
    assert c.bytes == (3072 * 1024 + 2048 * 1024) * 1 + 2048 * 3072 * 2


def test_te_mismatched_inner_sizes_say_so():
    r = op_cost("tex_ts::te_gemm_ts", OpArgs(
        [[64, 32], [], [], [], [], [64, 48]] + [[]] * 16, [BF16] + [""] * 4 + [BF16] + [""] * 16,
        ["", "", "", "5", "1", "", "", "", "5", "0"] + [""] * 12))
    assert isinstance(r, str) and "inner" in r


def test_the_trace_keeps_concrete_inputs_for_these_ops():
    assert all(keeps_concrete_inputs(n) for n in GEMM_OPS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(GEMM_OPS)),
       dims=st.lists(st.lists(st.integers(0, 64), max_size=3), max_size=24),
       concrete=st.lists(st.sampled_from(["", "True", "0", "1", "5", "6", "15", "x"]),
                         max_size=24))
def test_odd_arguments_give_a_cost_or_a_reason(name, dims, concrete):
    r = op_cost(name, OpArgs(dims, [FP4, U8, BF16, FP8] * 6, concrete))
    if isinstance(r, OpCost):
        assert math.isfinite(r.flops) and r.flops >= 0 and math.isfinite(r.bytes)
    else:
        assert isinstance(r, str) and r
