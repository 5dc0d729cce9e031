"""fp32-matmul: fp32 GEMMs on a Tensor Core GPU without low-precision kernels."""

from __future__ import annotations

from tb_diagnostics.rules.fp32_matmul import RULE, classify

A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85e9, "computeMajor": 8,
        "computeMinor": 0}
P100 = {"id": 0, "name": "Tesla P100", "totalGlobalMem": 16e9, "computeMajor": 6,
        "computeMinor": 0}


def _steps(b, kernel: str) -> None:
    for s in range(2):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::mm", t0 + 10, 20)
        b.launch(kernel, t0 + 12, t0 + 20, 800)


def test_fires_on_sgemm_on_an_a100(make_builder):
    b = make_builder(device_properties=[A100])
    _steps(b, "ampere_sgemm_128x64_nn")
    (f,) = RULE.run(b.analysis())
    assert "compute capability 8.0" in f.message and "enable TF32 or bf16 autocast" in f.message
    assert "from aten::mm" in f.message


def test_silent_on_bf16_and_on_old_gpus(make_builder):
    b = make_builder(device_properties=[A100])
    _steps(b, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64")
    assert RULE.run(b.analysis()) == []
    b = make_builder(device_properties=[P100])
    _steps(b, "maxwell_sgemm_128x64_nn")
    assert RULE.run(b.analysis()) == []


def test_kernel_classes():
    assert classify("volta_sgemm_128x32_nt") == "fp32"
    assert classify("void cudnn::detail::dgrad_engine<float, 512, 6>") == "fp32"
    assert classify("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64>") == "tf32"
    assert classify("ampere_fp16_s16816gemm_fp16_128x128") == "low"
    assert classify("void cudnn::bn_bw_1C11_kernel_new<float>") is None


def test_resnet_on_v100_fires(shared):
    (f,) = RULE.run(shared("kineto_resnet50_v100_dataloader_workers0"))
    assert "compute capability 7.0" in f.message and "fp16 autocast" in f.message


def _typed_steps(b, kernel: str) -> None:
    """fp32 GEMMs (Input type float) run by the given kernel, as cuBLASLt names them."""
    for s in range(2):
        t0 = s * 1000
        b.step(s + 1, t0, 999)
        b.op("aten::mm", t0 + 10, 20, dims=[[1024, 1024], [1024, 1024]],
             types=["float", "float"])
        b.launch(kernel, t0 + 12, t0 + 20, 800)


def test_fires_on_fp32_gemms_run_by_cublaslt_xmma_kernels(make_builder):
    b = make_builder(device_properties=[A100])
    kernel = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1"
    assert classify(kernel) is None  # the kernel name alone gives no precision away
    _typed_steps(b, kernel)
    (f,) = RULE.run(b.analysis())
    assert "fp32 GEMM/convolution kernels take" in f.message and "from aten::mm" in f.message


def test_silent_when_the_fp32_gemms_run_in_tf32(make_builder):
    b = make_builder(device_properties=[A100])
    _typed_steps(b, "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4")
    assert RULE.run(b.analysis()) == []
