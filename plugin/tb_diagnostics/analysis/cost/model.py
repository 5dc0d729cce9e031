"""The op cost model: one entry point from an op call's name and recorded arguments to
its FLOPs, bytes and precision.

Formulas live in :mod:`.products` (matmul family, convolution, attention),
:mod:`.pointwise` (elementwise, reductions, softmax, norms, embeddings, copies),
:mod:`.custom_ops` (the attention ops of FlashAttention 2/3 and xformers),
:mod:`.serving_ops` (FlashInfer's and vLLM's ops) and :mod:`.custom_gemm`
(``_scaled_mm`` with block scales, TransformerEngine's GEMM). An op the model does not
know, or whose recorded arguments do not determine its cost, gets no figure and a
reason, never a guess; when the arguments fix the bytes it moves at the least, it gets
those as a lower bound (``OpCost.lower_bound``).
"""

from __future__ import annotations

from tb_diagnostics.analysis.cost.custom_gemm import GEMM_OPS
from tb_diagnostics.analysis.cost.custom_ops import ATTENTION_OPS
from tb_diagnostics.analysis.cost.formula import CannotModel, Formula, OpCost
from tb_diagnostics.analysis.cost.pointwise import POINTWISE, foreach_formula
from tb_diagnostics.analysis.cost.products import ATTENTION, CONV, MATMUL
from tb_diagnostics.analysis.cost.serving_ops import SERVING_OPS, pattern_formula
from tb_diagnostics.analysis.cost.shapes import PRECISION, OpArgs

_FORMULAS: dict[str, tuple[str, Formula]] = {
    **POINTWISE,
    **{n: ("matmul", f) for n, f in MATMUL.items()},
    **{n: ("conv", f) for n, f in CONV.items()},
    **{n: ("attention", f) for n, f in ATTENTION.items()},
    **{n: ("attention", f) for n, f in ATTENTION_OPS.items()},
    **SERVING_OPS,
    **{n: ("matmul", f) for n, f in GEMM_OPS.items()},
}

NO_SHAPES = "record_shapes was off: no FLOPs"


def _entry(name: str) -> tuple[str, Formula] | None:
    return _FORMULAS.get(name) or foreach_formula(name) or pattern_formula(name)


def family_of(name: str) -> str | None:
    """The family of an op the model knows (``matmul``, ``conv``, ``attention``,
    ``elementwise``, ``reduction``, ``softmax``, ``norm``, ``embedding``, ``memory``)."""
    entry = _entry(name)
    return entry[0] if entry else None


def op_cost(name: str, args: OpArgs | None, default_itemsize: int = 4) -> OpCost | str:
    """The cost of one call of ``name`` with ``args``, or why there is none.

    ``default_itemsize`` stands in for element sizes the trace does not give (a
    ``TensorList``'s members have no recorded dtype).
    """
    entry = _entry(name)
    if entry is None:
        return "no cost model for this op"
    if args is None:
        return NO_SHAPES
    family, formula = entry
    try:
        flops, nbytes, precision = formula(args, default_itemsize)
    except CannotModel as why:
        if why.lower_bound_bytes is None or why.lower_bound_bytes <= 0:
            return str(why)
        t = args.first_dtype()
        return OpCost(flops=0.0, bytes=float(why.lower_bound_bytes),
                      precision=PRECISION.get(t) if t else None, family=family,
                      lower_bound=True, why=f"{why}; memory lower bound only")
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        # Shapes of an unexpected form (hand-edited or future traces): no figure.
        return "its recorded shapes have an unexpected form"
    return OpCost(flops=float(flops), bytes=float(nbytes), precision=precision, family=family)
