"""The tab's name shortener (``shortName`` in static/app/format.js) over every kernel name
in ../shared/traces: a label is never empty, never ends in ``::`` and keeps the
kernel's own name (issue 16: ``void at::native::(anonymous namespace)::cunn_SoftMaxForward<…>(…)``
used to become ``void at::native::``).

The JavaScript runs in node; the oracle for "the kernel's own name" is computed
here another way (innermost brackets removed until none are left), so a
shortener bug is not mirrored by its test.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FORMAT_JS = REPO / "plugin" / "tb_diagnostics" / "static" / "app" / "format.js"
SHARED_TRACES = (REPO / ".." / "shared" / "traces").resolve()
NODE = shutil.which("node")
#: The widths the tab asks for (roofline 40/48, timeline 60/70, format's default 80, tree 110).
WIDTHS = (40, 60, 80, 110)
#: The timeline route cuts names to this many characters (analysis/timeline.py MAX_NAME).
ROUTE_CUT = 400

pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the tab's JavaScript")


def short_names(names: list[str], width: int, fn: str = "shortName") -> list[str]:
    """``shortName(name, width)`` (or another of format.js's functions) for each name, run in
    node on the tab's own module."""
    script = (f"import {{ {fn} }} from {json.dumps(FORMAT_JS.as_uri())};"
              "let raw = ''; process.stdin.on('data', (d) => { raw += d; });"
              "process.stdin.on('end', () => { const xs = JSON.parse(raw);"
              f"process.stdout.write(JSON.stringify(xs.map((x) => {fn}(x, {width})))); }});")
    out = subprocess.run([NODE, "--input-type=module", "-e", script], input=json.dumps(names),
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


_INNERMOST = re.compile(r"<[^<>()\[\]{}]*>|\([^<>()\[\]{}]*\)"
                        r"|\[[^<>()\[\]{}]*\]|\{[^<>()\[\]{}]*\}")


def own_name(name: str) -> str | None:
    """The function's own identifier: what is left before the parameter list once every
    bracketed group is gone (None where the brackets do not balance, e.g. a cut name)."""
    s = name.replace("->", "")
    while True:
        t = _INNERMOST.sub("\0", s)
        if t == s:
            break
        s = t
    if re.search(r"[<>()\[\]{}]", s):
        return None
    s = re.sub(r"(\s*\b(const|volatile)\b|\0|\s)+$", "", s)
    m = re.search(r"([A-Za-z_$][\w$]*)$", s)
    return m.group(1) if m else None


def kernel_names() -> list[str]:
    names: set[str] = set()
    for f in sorted(SHARED_TRACES.glob("*/*.pt.trace.json.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        names.update(e["name"] for e in events
                     if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel"
                     and isinstance(e.get("name"), str))
    return sorted(names)


@pytest.fixture(scope="module")
def kernels() -> list[str]:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    names = kernel_names()
    assert len(names) > 100, "expected hundreds of distinct kernel names in ../shared/traces"
    return names


def check(names: list[str], width: int) -> list[str]:
    bad = []
    for name, short in zip(names, short_names(names, width), strict=True):
        own = own_name(name)
        if not short.strip():
            bad.append(f"empty: {name[:120]!r}")
        elif short.endswith("::"):
            bad.append(f"ends in '::': {short!r} from {name[:120]!r}")
        elif own is not None and own not in short:
            bad.append(f"lost {own!r}: {short!r} from {name[:120]!r}")
    return bad


@pytest.mark.parametrize("width", WIDTHS)
def test_every_shared_kernel_name_keeps_its_own_name(kernels, width):
    assert check(kernels, width) == []


def test_the_oracle_knows_most_names(kernels):
    # The check above is only as strong as own_name: it must name nearly every kernel.
    known = [n for n in kernels if own_name(n)]
    assert len(known) >= 0.95 * len(kernels)


def test_names_cut_by_the_timeline_route(kernels):
    # The timeline ships names cut to 400 characters: brackets left open at the end.
    cut = [n[: ROUTE_CUT - 1] + "…" for n in kernels if len(n) > ROUTE_CUT]
    assert cut, "expected some kernel names longer than the route's cut"
    shorts = short_names(cut, 70)
    for full, name, short in zip((n for n in kernels if len(n) > ROUTE_CUT), cut, shorts,
                                 strict=True):
        assert short.strip() and not short.endswith("::"), (name, short)
        own = own_name(full)
        if own is not None and full.find(own + "<") + len(own) < ROUTE_CUT - 1:
            assert own in short, (name, short)


@pytest.mark.parametrize("name, width, expected", [
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
     80, "at::native::cunn_SoftMaxForward"),
    # Too long even so: the leading namespaces go, the function's own name stays.
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
     25, "cunn_SoftMaxForward"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>"
     "(float*, float const*, float const*, int, int, int, bool const*)", 30,
     "softmax_warp_forward"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1>)",
     80, "at::native::vectorized_elementwise_kernel"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1>)",
     30, "vectorized_elementwise_kernel"),
    # The generic cutlass wrapper: its first template argument is the kernel people know.
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)", 80,
     "Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>"),
    # Not C++: cut, with the brackets and arrows left as they are.
    ("Memcpy HtoD (Pageable -> Device) " * 3, 40, "Memcpy HtoD (Pageable -> Device) Memcpy…"),
    ("torch/nn/modules/module.py(1501): _call_impl " * 3, 30, "torch/nn/modules/module.py(15…"),
    ("aten::mm", 80, "aten::mm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel", 40,
     "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel"),
    ("", 80, "(unnamed)"),
])
def test_known_names(name, width, expected):
    assert short_names([name], width) == [expected]


def test_timeline_labels_are_the_kernels_own_names(kernels):
    # The timeline labels its bars with ownName(): exactly the oracle's name where there is one.
    signatures = [n for n in kernels if re.search(r"[<(]", n) and own_name(n)]
    owns = short_names(signatures, 0, "ownName")
    assert [o for n, o in zip(signatures, owns, strict=True) if o != own_name(n)
            and not o.startswith(own_name(n) + "<")] == []
    # Ops, memcpys and Python frames are no signatures: their labels are their names.
    assert short_names(["aten::mm", "Memcpy HtoD (Pageable -> Device)",
                        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"], 0,
                       "ownName") == [None, None, None]
