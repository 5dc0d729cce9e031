"""An operator call's arguments as ``record_shapes`` writes them.

Kineto records, per op call, ``Input Dims`` (a shape per argument: ``[]`` for a
scalar or a non-tensor, a list of shapes for a ``TensorList``), ``Input type``
(the C++ dtype name of each tensor, or ``Scalar``/``ScalarList``/``TensorList``/"")
and, since PyTorch 2.1, ``Concrete Inputs`` (the value of each scalar or list
argument as text, "" for tensors). :class:`OpArgs` holds them parsed, with the
helpers every cost formula needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec

#: Bytes per element of the dtype names the profiler writes.
ITEMSIZE: dict[str, int] = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::Float8_e8m0fnu": 1,
    "c10::Float4_e2m1fn_x2": 1,  # two 4-bit values per element (byte)
    "long int": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1,
    "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4, "c10::qint8": 1, "c10::quint8": 1, "c10::qint32": 4,
    "unsigned int": 4, "unsigned long": 8, "unsigned short": 2,
}

#: The arithmetic a dtype's math runs in (the key of the device peak table).
PRECISION: dict[str, str] = {
    "double": "fp64", "c10::complex<double>": "fp64",
    "float": "fp32", "c10::complex<float>": "fp32",
    "c10::Half": "fp16", "c10::complex<c10::Half>": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8", "c10::Float4_e2m1fn_x2": "fp4",
    "signed char": "int8", "unsigned char": "int8", "c10::qint8": "int8", "c10::quint8": "int8",
}

#: ``c10::ScalarType`` codes (how ``Concrete Inputs`` writes a ``dtype`` argument) → bytes
#: per element (c10/core/ScalarType.h).
SCALAR_TYPE_ITEMSIZE: dict[int, int] = {
    0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1, 12: 1, 13: 1,
    14: 4, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1,
}

_NON_TENSOR = frozenset({"Scalar", "ScalarList", "TensorList", "", "GenericList"})

_decode_any = msgspec.json.Decoder()


def parse_json(text: str | None) -> Any:
    """A recorded JSON text (shapes, types, concrete values) as Python; None when absent or
    malformed."""
    if not text:
        return None
    try:
        return _decode_any.decode(text)
    except msgspec.DecodeError:
        return None


def is_shape(shape: Any) -> bool:
    """A tensor shape: a list of sizes (ints ≥ 0)."""
    return isinstance(shape, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)


def numel(shape: Any) -> int:
    """Elements of one tensor shape (a list of ints); 0 for anything else."""
    if not is_shape(shape):
        return 0
    return math.prod(shape) if shape else 1


def broadcast(*shapes: list[int]) -> list[int]:
    """NumPy/PyTorch broadcasting of tensor shapes (mismatches take the larger size)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, start=rank - len(s)):
            out[i] = max(out[i], d)
    return out


@dataclass(frozen=True)
class OpArgs:
    """One group of op calls' recorded arguments (same name, shapes, types, concretes)."""

    dims: list[Any]
    types: list[str]
    concrete: list[str]

    @classmethod
    def parse(cls, dims: str | None, types: str | None,
              concrete: str | None = None) -> OpArgs | None:
        """From the recorded JSON texts; None when the shapes are absent or malformed."""
        d, t, c = parse_json(dims), parse_json(types), parse_json(concrete)
        if not isinstance(d, list):
            return None
        t = [x if isinstance(x, str) else "" for x in t] if isinstance(t, list) else []
        c = [x if isinstance(x, str) else "" for x in c] if isinstance(c, list) else []
        return cls(d, t, c)

    def shape(self, i: int) -> list[int] | None:
        """The shape of argument ``i`` when it is one tensor (not a list of tensors)."""
        if i >= len(self.dims):
            return None
        s = self.dims[i]
        if not is_shape(s):
            return None
        if i < len(self.types) and self.types[i] in _NON_TENSOR and not s:
            return None  # a scalar or a non-tensor argument
        return s

    def shapes(self, i: int) -> list[list[int]]:
        """The shapes of argument ``i`` as a list: one for a tensor, several for a TensorList
        (none when a member's shape is malformed)."""
        if i >= len(self.dims) or not isinstance(self.dims[i], list):
            return []
        s = self.dims[i]
        if s and all(isinstance(x, list) for x in s):
            return s if all(is_shape(x) for x in s) else []
        one = self.shape(i)
        return [one] if one is not None else []

    def tensor_args(self) -> list[int]:
        """Indices of the arguments that are tensors (or lists of tensors)."""
        out = []
        for i in range(len(self.dims)):
            t = self.types[i] if i < len(self.types) else ""
            # Old traces leave some tensors' types empty.
            if t in ITEMSIZE or (t in ("TensorList", "") and self.shapes(i)):
                out.append(i)
        return out

    def dtype(self, i: int) -> str | None:
        t = self.types[i] if i < len(self.types) else ""
        return t if t in ITEMSIZE else None

    def itemsize(self, i: int, default: int | None = None) -> int | None:
        t = self.dtype(i)
        return ITEMSIZE[t] if t else default

    def first_dtype(self) -> str | None:
        """The dtype of the first tensor argument that names one."""
        return next((t for t in self.types if t in ITEMSIZE), None)

    def nbytes(self, i: int, default_itemsize: int | None = None) -> float | None:
        """Bytes of argument ``i`` (summed over a TensorList); None when its size is unknown."""
        shapes = self.shapes(i)
        size = self.itemsize(i, default_itemsize)
        if not shapes or size is None:
            return None
        return float(sum(numel(s) for s in shapes) * size)

    def value(self, i: int) -> Any:
        """Argument ``i``'s concrete value (int, float, bool, list), or None when not recorded."""
        if i >= len(self.concrete) or self.concrete[i] == "":
            return None
        text = self.concrete[i]
        if text in ("True", "False"):
            return text == "True"
        parsed = parse_json(text)
        if parsed is None and text.endswith("."):  # "0." for a float zero
            parsed = parse_json(text + "0")
        if parsed is None and text.startswith("["):  # a bool list: "[False, True, True]"
            parsed = parse_json(text.replace("True", "true").replace("False", "false"))
        return parsed

    def int_list(self, i: int, n: int, default: int) -> list[int] | None:
        """A list argument such as stride or padding, widened to ``n`` entries; ``None``
        when it was not recorded (no ``Concrete Inputs``)."""
        v = self.value(i)
        if v is None:
            return None
        if isinstance(v, int) and not isinstance(v, bool):
            return [v] * n
        if isinstance(v, list) and all(isinstance(x, int) for x in v):
            if len(v) == 1:
                return v * n
            return v if len(v) == n else None
        return [default] * n if v == [] else None
