"""tb_diagnostics.names.shorten_name: demangled kernel names cut to the function's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tb_diagnostics.names import cut, shorten_name
from tb_diagnostics.trace import load_trace
from tb_diagnostics.trace.categories import Kind

SHARED_TRACES = (Path(__file__).parents[1] / ".." / "shared" / "traces").resolve()
FILES = sorted(SHARED_TRACES.glob("*/*.pt.trace.json*")) if SHARED_TRACES.is_dir() else []
_IDENT = re.compile(r"[A-Za-z_~$][\w$]*")


@pytest.mark.parametrize(("name", "short"), [
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
     "at::native::cunn_SoftMaxForward"),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, "
     "false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)",
     "softmax_warp_forward"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::"
     "tanh_backward_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::"
     "{lambda()#2}::operator()() const::{lambda(float, float)#1}>(at::TensorIteratorBase&, "
     "at::native::tanh_backward_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()"
     "() const::{lambda()#2}::operator()() const::{lambda(float, float)#1} const&)::"
     "{lambda(int)#1}>(int, at::native::gpu_kernel_impl<>(at::TensorIteratorBase&)::"
     "{lambda(int)#1})", "at::native::elementwise_kernel"),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float>"
     "(cublasGemvParamsEx<int, float>)", "internal::gemvx::kernel"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4>"
     "(cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4::Params)",
     "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4>"),
    # No C++ signature: kept as it is.
    ("volta_sgemm_128x64_nn", "volta_sgemm_128x64_nn"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    ("aten::add", "aten::add"),
    ("<module>", "<module>"),
])
def test_shortens_to_the_functions_own_name(name, short):
    assert shorten_name(name, width=0) == short


def test_width_drops_namespaces_never_the_own_name():
    name = "void a_long_namespace::another_one::the_kernel<int>(int)"
    assert shorten_name(name, width=20) == "the_kernel"
    assert shorten_name(name, width=40) == "another_one::the_kernel"


def test_cut_caps_a_cell():
    assert cut("abcdef", 4) == "abc…" and cut("abc", 4) == "abc"


def _kernel_names() -> set[str]:
    names: set[str] = set()
    for path in FILES:
        m = load_trace(str(path))
        names.update(m.name_of(int(r)) for r in m.rows_of({Kind.KERNEL}).tolist())
    return names


@pytest.mark.shared
def test_every_kernel_name_of_the_shared_traces():
    if not FILES:
        pytest.skip("../shared/traces not available")
    names = _kernel_names()
    assert len(names) > 300
    for name in names:
        short = shorten_name(name)
        assert short.strip(), name
        assert not short.endswith("::"), name
        own = short.split("<", 1)[0].rsplit("::", 1)[-1]
        # The own name is a whole identifier of the original, followed there by its
        # template arguments, its parameters or the end.
        assert _IDENT.fullmatch(own) or short == name, (short, name)
        assert re.search(rf"(?<![\w$]){re.escape(own)}(?:<|\(|$)", name), (short, name)
        assert len(short) <= len(name)
