"""Tensor types: shape, element type and optional quantization parameters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlx_edge.errors import IRError
from rlx_edge.ir.dtype import DType, as_dtype
from rlx_edge.ir.shape import Shape, as_shape, format_shape


@dataclass(frozen=True, eq=False)
class QuantParams:
    """Affine quantization: ``real = scale * (q - zero_point)``.

    Parameters
    ----------
    scale:
        float32 array, one element per tensor (per-tensor) or one per channel.
    zero_point:
        int64 array of the same length as ``scale``.
    axis:
        The channel axis for per-channel parameters, ``None`` for per-tensor.
    storage:
        The integer type the quantized values are stored in (i8, i16, i4, ...).
    """

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None
    storage: DType = DType.i8

    def __post_init__(self) -> None:
        scale = np.atleast_1d(np.asarray(self.scale, dtype=np.float32)).copy()
        zp = np.atleast_1d(np.asarray(self.zero_point, dtype=np.int64)).copy()
        if scale.ndim != 1 or zp.ndim != 1:
            raise IRError("quantization scale and zero_point must be 1-D")
        if zp.size == 1 and scale.size > 1:
            zp = np.repeat(zp, scale.size)
        if scale.size != zp.size:
            raise IRError(f"quantization has {scale.size} scales but {zp.size} zero points")
        if self.axis is None and scale.size != 1:
            raise IRError("per-tensor quantization needs exactly one scale; give axis= for per-channel")
        storage = as_dtype(self.storage)
        if not storage.is_int:
            raise IRError(f"quantized storage type must be an integer type, not {storage}")
        scale.flags.writeable = False
        zp.flags.writeable = False
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "zero_point", zp)
        object.__setattr__(self, "storage", storage)

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuantParams):
            return NotImplemented
        return (
            self.axis == other.axis
            and self.storage == other.storage
            and np.array_equal(self.scale.view(np.uint32), other.scale.view(np.uint32))
            and np.array_equal(self.zero_point, other.zero_point)
        )

    def __hash__(self) -> int:
        return hash((self.axis, self.storage, self.scale.tobytes(), self.zero_point.tobytes()))

    def __repr__(self) -> str:
        if self.scale.size == 1:
            return f"q({self.storage} s={float(self.scale[0]):.6g} zp={int(self.zero_point[0])})"
        return f"q({self.storage} axis={self.axis} x{self.scale.size})"

    def to_json(self) -> dict:
        """JSON form; scales are float32 values written as exact float64 numbers."""
        return {
            "scale": [float(s) for s in self.scale],
            "zero_point": [int(z) for z in self.zero_point],
            "axis": self.axis,
            "storage": self.storage.value,
        }

    @classmethod
    def from_json(cls, d: dict) -> QuantParams:
        return cls(
            scale=np.asarray(d["scale"], dtype=np.float64).astype(np.float32),
            zero_point=np.asarray(d["zero_point"], dtype=np.int64),
            axis=d.get("axis"),
            storage=as_dtype(d.get("storage", "i8")),
        )


@dataclass(frozen=True)
class TensorType:
    """The type of a value: static/symbolic shape, element type, quantization."""

    shape: Shape
    dtype: DType
    quant: QuantParams | None = field(default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", as_shape(self.shape))
        object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if self.quant is not None and self.quant.axis is not None:
            if not -len(self.shape) <= self.quant.axis < len(self.shape):
                raise IRError(f"quantization axis {self.quant.axis} is outside shape {format_shape(self.shape)}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_quantized(self) -> bool:
        return self.quant is not None

    def with_shape(self, shape: Sequence) -> TensorType:
        return TensorType(tuple(shape), self.dtype, self.quant)

    def with_dtype(self, dtype: DType | str) -> TensorType:
        return TensorType(self.shape, as_dtype(dtype), None)

    def same_shape_dtype(self, other: TensorType) -> bool:
        return self.shape == other.shape and self.dtype == other.dtype

    def __str__(self) -> str:
        q = f" {self.quant!r}" if self.quant is not None else ""
        return f"{self.dtype}{format_shape(self.shape)}{q}"
