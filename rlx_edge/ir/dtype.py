"""Element types of the IR, their numpy storage and promotion rules."""

from __future__ import annotations

import enum

import numpy as np

from rlx_edge.errors import IRError


class DType(enum.Enum):
    """An element type.

    ``bf16`` has no numpy type; it is stored as float32 values that are exactly
    representable in bfloat16. ``i4`` is stored one value per int8 (the packed
    form belongs to targets, not to the IR).
    """

    f64 = "f64"
    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    i64 = "i64"
    i32 = "i32"
    i16 = "i16"
    i8 = "i8"
    i4 = "i4"
    u8 = "u8"
    bool = "bool"

    def __repr__(self) -> str:
        return f"DType.{self.value}"

    def __str__(self) -> str:
        return self.value

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.f64, DType.f32, DType.f16, DType.bf16)

    @property
    def is_int(self) -> bool:
        return self in _INT_RANGE

    @property
    def is_signed(self) -> bool:
        return self.is_float or self in (DType.i64, DType.i32, DType.i16, DType.i8, DType.i4)

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that stores values of this type."""
        return np.dtype(_NUMPY[self])

    @property
    def min(self) -> int:
        return _INT_RANGE[self][0]

    @property
    def max(self) -> int:
        return _INT_RANGE[self][1]

    @property
    def storage_bytes(self) -> int:
        """Bytes per element as stored in memory (i4 is packed by targets, not here)."""
        return self.numpy.itemsize


_BITS = {
    DType.f64: 64,
    DType.f32: 32,
    DType.f16: 16,
    DType.bf16: 16,
    DType.i64: 64,
    DType.i32: 32,
    DType.i16: 16,
    DType.i8: 8,
    DType.i4: 4,
    DType.u8: 8,
    DType.bool: 1,
}
_NUMPY = {
    DType.f64: np.float64,
    DType.f32: np.float32,
    DType.f16: np.float16,
    DType.bf16: np.float32,
    DType.i64: np.int64,
    DType.i32: np.int32,
    DType.i16: np.int16,
    DType.i8: np.int8,
    DType.i4: np.int8,
    DType.u8: np.uint8,
    DType.bool: np.bool_,
}
_INT_RANGE = {
    DType.i64: (-(2**63), 2**63 - 1),
    DType.i32: (-(2**31), 2**31 - 1),
    DType.i16: (-(2**15), 2**15 - 1),
    DType.i8: (-128, 127),
    DType.i4: (-8, 7),
    DType.u8: (0, 255),
}
_FROM_NUMPY = {
    np.dtype(np.float64): DType.f64,
    np.dtype(np.float32): DType.f32,
    np.dtype(np.float16): DType.f16,
    np.dtype(np.int64): DType.i64,
    np.dtype(np.int32): DType.i32,
    np.dtype(np.int16): DType.i16,
    np.dtype(np.int8): DType.i8,
    np.dtype(np.uint8): DType.u8,
    np.dtype(np.bool_): DType.bool,
}


def as_dtype(x: DType | str | np.dtype | type) -> DType:
    """Accept a DType, its name (``"f32"``, ``"int8"``) or a numpy dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if x in DType.__members__:
            return DType[x]
        if x in _ALIASES:
            return _ALIASES[x]
    try:
        return _FROM_NUMPY[np.dtype(x)]
    except (TypeError, KeyError):
        raise IRError(f"unknown dtype {x!r}; use one of {', '.join(DType.__members__)}") from None


_ALIASES = {
    "float64": DType.f64,
    "float32": DType.f32,
    "float16": DType.f16,
    "bfloat16": DType.bf16,
    "int64": DType.i64,
    "int32": DType.i32,
    "int16": DType.i16,
    "int8": DType.i8,
    "int4": DType.i4,
    "uint8": DType.u8,
}


def from_numpy(dt: np.dtype) -> DType:
    return as_dtype(dt)


def promote(a: DType, b: DType) -> DType:
    """The type both operands are converted to in a mixed binary op.

    Floats win over integers (the float keeps its width, at least f16's);
    two floats give the wider one, and f16 with bf16 gives f32. Integers give
    the narrowest signed type holding both ranges (u8 with i8 gives i16);
    bool gives way to anything.
    """
    if a == b:
        return a
    if a == DType.bool:
        return b
    if b == DType.bool:
        return a
    if a.is_float and b.is_float:
        if {a, b} == {DType.f16, DType.bf16}:
            return DType.f32
        return a if a.bits > b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    lo = min(a.min, b.min)
    hi = max(a.max, b.max)
    for cand in (DType.i4, DType.i8, DType.i16, DType.i32, DType.i64):
        if cand.min <= lo and hi <= cand.max:
            return cand
    return DType.i64


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), kept as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16 << 16).astype(np.uint32)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    out = np.where(nan, np.uint32(0x7FC00000), out)
    return out.view(np.float32)
