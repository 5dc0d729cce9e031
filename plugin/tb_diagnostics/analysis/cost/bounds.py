"""A memory lower bound for an op the cost model has no formula for.

An op whose ``Input Dims`` and ``Input type`` were recorded but whose work is unknown
(a library's custom kernel: vLLM's ``_C::fused_add_rms_norm``, a MoE kernel) still
moves its tensors: the bound is the bytes of its tensor arguments, each read once.
The profiler records no output shapes, so outputs count only where they are
arguments (``out=`` tensors, the ``output`` of an in-place custom op). Its FLOPs are
not known: the bound is on memory time only, ``bytes / bandwidth``, and the roofline
shows it as a bound, never as a modelled op. It assumes what every formula's bytes
assume, that each argument is read whole: an op that gathers from a larger tensor (a
table, a cache) reads less, and data still in L2 comes faster than HBM; the ops known
to do the first (vLLM's cache writes and rotary embedding, embeddings, gathers) have
formulas of their own.
"""

from __future__ import annotations

from tb_diagnostics.analysis.cost.formula import OpCost
from tb_diagnostics.analysis.cost.shapes import PRECISION, OpArgs

#: The family of a lower-bound cost: not a formula's family.
LOWER_BOUND_FAMILY = "unmodelled"
LOWER_BOUND_WHY = ("no cost model for this op; memory lower bound only (its tensor "
                   "arguments' bytes, each read once)")
NO_TENSORS = "no cost model for this op, and no tensor shapes recorded"


def memory_lower_bound(args: OpArgs | None, default_itemsize: int = 4) -> OpCost | str:
    """The lower-bound cost of a call with ``args``, or why there is none."""
    if args is None:
        return NO_TENSORS
    total = sum(args.nbytes(i, default_itemsize) or 0.0 for i in args.tensor_args())
    if total <= 0:
        return NO_TENSORS
    t = args.first_dtype()
    return OpCost(flops=0.0, bytes=float(total), precision=PRECISION.get(t) if t else None,
                  family=LOWER_BOUND_FAMILY, lower_bound=True, why=LOWER_BOUND_WHY)

