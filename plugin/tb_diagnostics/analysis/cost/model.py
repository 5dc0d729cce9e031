"""The op cost model: one entry point from an op call's name and recorded arguments to
its FLOPs, bytes and precision.

Formulas live in :mod:`.products` (matmul family, convolution, attention) and
:mod:`.pointwise` (elementwise, reductions, softmax, norms, embeddings, copies). An op
the model does not know, or whose recorded arguments do not determine its cost, gets
no figure and a reason, never a guess.
"""

from __future__ import annotations

from tb_diagnostics.analysis.cost.formula import CannotModel, Formula, OpCost
from tb_diagnostics.analysis.cost.pointwise import POINTWISE, foreach_formula
from tb_diagnostics.analysis.cost.products import ATTENTION, CONV, MATMUL
from tb_diagnostics.analysis.cost.shapes import OpArgs

_FORMULAS: dict[str, tuple[str, Formula]] = {
    **POINTWISE,
    **{n: ("matmul", f) for n, f in MATMUL.items()},
    **{n: ("conv", f) for n, f in CONV.items()},
    **{n: ("attention", f) for n, f in ATTENTION.items()},
}

NO_SHAPES = "record_shapes was off: no FLOPs"


def family_of(name: str) -> str | None:
    """The family of an op the model knows (``matmul``, ``conv``, ``attention``,
    ``elementwise``, ``reduction``, ``softmax``, ``norm``, ``embedding``, ``memory``)."""
    entry = _FORMULAS.get(name) or foreach_formula(name)
    return entry[0] if entry else None


def op_cost(name: str, args: OpArgs | None, default_itemsize: int = 4) -> OpCost | str:
    """The cost of one call of ``name`` with ``args``, or why there is none.

    ``default_itemsize`` stands in for element sizes the trace does not give (a
    ``TensorList``'s members have no recorded dtype).
    """
    entry = _FORMULAS.get(name) or foreach_formula(name)
    if entry is None:
        return "no cost model for this op"
    if args is None:
        return NO_SHAPES
    family, formula = entry
    try:
        flops, nbytes, precision = formula(args, default_itemsize)
    except CannotModel as why:
        return str(why)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        # Shapes of an unexpected form (hand-edited or future traces): no figure.
        return "its recorded shapes have an unexpected form"
    return OpCost(flops=float(flops), bytes=float(nbytes), precision=precision, family=family)
