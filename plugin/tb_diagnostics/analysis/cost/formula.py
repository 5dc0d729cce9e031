"""What a cost formula returns, and how it says it cannot tell."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tb_diagnostics.analysis.cost.shapes import OpArgs

#: Families whose math runs on Tensor Cores / matrix cores when the precision allows.
PRODUCT_FAMILIES = frozenset({"matmul", "conv", "attention"})


@dataclass(frozen=True)
class OpCost:
    """The work of one op call: FLOPs, bytes moved to and from memory, the data precision."""

    flops: float
    bytes: float
    precision: str | None  # fp64/fp32/bf16/fp16/fp8/fp4/int8 from the input types; None unknown
    family: str  # matmul, conv, attention, elementwise, reduction, softmax, norm, …
    #: Only a lower bound: ``bytes`` are the least the op must move (its FLOPs are not
    #: known and ``flops`` is 0); ``why`` says what is missing. Not a modelled op.
    lower_bound: bool = False
    why: str | None = None

    @property
    def tensor_op(self) -> bool:
        """A product whose math may run on Tensor Cores (the others run on vector units)."""
        return self.family in PRODUCT_FAMILIES and not self.lower_bound


class CannotModel(Exception):
    """The op is known but these recorded arguments do not determine its cost.

    ``lower_bound_bytes``: the bytes the op moves at the least, when the shapes give them
    (a KV-cache attention reads its queries and writes its output whatever the context).
    """

    def __init__(self, why: str, lower_bound_bytes: float | None = None) -> None:
        super().__init__(why)
        self.lower_bound_bytes = lower_bound_bytes


#: A formula: (the call's arguments, the span's fallback element size) → (flops, bytes,
#: precision). It raises CannotModel with the reason when the arguments do not suffice.
Formula = Callable[[OpArgs, int], tuple[float, float, str | None]]


def need(value: object, why: str) -> object:
    """``value``, or CannotModel(why) when it is None (a shape or list not recorded)."""
    if value is None:
        raise CannotModel(why)
    return value
